package panes

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
)

func ptyTranscript(t *testing.T, chunks ...TranscriptChunk) Transcript {
	t.Helper()
	p := NewTranscript(testEnv(t, "dark"))
	p, _ = p.SetSessions("w", []SessionRow{{ID: "s-pty", Command: "top", State: "running", TTY: true}})
	return p.SetSize(0, 12).AppendChunks(chunks)
}

func at(s int) time.Time { return fixedNow.Add(time.Duration(s) * time.Second) }

// A PTY session's output is replayed through a terminal emulator sized by
// the transcript's resize records: cursor addressing lands where the
// program meant it, not as a smear of text.
func TestTerminalTranscriptCursorMoves(t *testing.T) {
	p := ptyTranscript(t,
		TranscriptChunk{Time: at(0), Cols: 30, Rows: 6},
		TranscriptChunk{Time: at(1), Data: []byte("old line\r\n")},
		TranscriptChunk{Time: at(2), Data: []byte("\x1b[2J\x1b[HTOP LEFT\x1b[4;10H\x1b[31mMIDDLE\x1b[0m\x1b[1;1HX")},
	)
	if !p.Terminal() {
		t.Fatal("a PTY session is not shown through the emulator")
	}
	// The clear moves the old screen into the scrollback, as terminals do;
	// the screen shows down to its last written row.
	var rows []string
	for i := 0; i < p.Lines(); i++ {
		rows = append(rows, ansi.Strip(p.Line(i)))
	}
	got := strings.Join(rows, "|")
	if got != "old line|XOP LEFT|||         MIDDLE" {
		t.Fatalf("screen rows %q", got)
	}
	if strings.Contains(got, "\x1b") || strings.Contains(got, "[4;10H") {
		t.Fatalf("control sequences leaked: %q", got)
	}
	// Colours survive as SGR.
	found := false
	for i := 0; i < p.Lines(); i++ {
		if strings.Contains(p.Line(i), "MIDDLE") && strings.Contains(p.Line(i), "\x1b[") {
			found = true
		}
	}
	if !found {
		t.Error("the red MIDDLE lost its colour")
	}
	view := ansi.Strip(p.View(40, 12, true))
	if !strings.Contains(view, "30x6") || !strings.Contains(view, "XOP LEFT") {
		t.Errorf("view:\n%s", view)
	}
}

// A full-screen program (alternate screen) shows exactly its screen; when
// it leaves, the shell's lines are back.
func TestTerminalTranscriptAltScreen(t *testing.T) {
	p := ptyTranscript(t,
		TranscriptChunk{Time: at(0), Cols: 20, Rows: 4},
		TranscriptChunk{Time: at(1), Data: []byte("$ vim\r\n")},
		TranscriptChunk{Time: at(2), Data: []byte("\x1b[?1049h\x1b[H\x1b[2Jline one\r\n~\r\n~\r\n\x1b[7m-- INSERT --\x1b[0m")},
	)
	if p.Lines() != 4 {
		t.Fatalf("alt screen: %d lines", p.Lines())
	}
	if l := ansi.Strip(p.Line(3)); l != "-- INSERT --" {
		t.Errorf("status row %q", l)
	}
	if strings.Contains(ansi.Strip(p.View(30, 6, true)), "$ vim") {
		t.Error("the shell shows through the full-screen program")
	}
	p = p.AppendChunks([]TranscriptChunk{{Time: at(3), Data: []byte("\x1b[?1049l$ ")}})
	if v := ansi.Strip(p.View(30, 6, true)); !strings.Contains(v, "$ vim") || strings.Contains(v, "INSERT") {
		t.Errorf("after leaving the alternate screen:\n%s", v)
	}
}

// A resize record resizes the emulator; lines wider than the pane are cut,
// not wrapped, so the screen's rows stay rows.
func TestTerminalTranscriptResizeAndCut(t *testing.T) {
	p := ptyTranscript(t,
		TranscriptChunk{Time: at(0), Cols: 10, Rows: 3},
		TranscriptChunk{Time: at(1), Data: []byte("0123456789ABCDEF")}, // wraps at 10 columns
	)
	if l := ansi.Strip(p.Line(0)); l != "0123456789" {
		t.Fatalf("10 columns: %q", l)
	}
	p = p.AppendChunks([]TranscriptChunk{{Time: at(2), Cols: 40, Rows: 5}, {Time: at(3), Data: []byte("\x1b[H" + strings.Repeat("w", 40))}})
	if l := ansi.Strip(p.Line(0)); l != strings.Repeat("w", 40) {
		t.Fatalf("40 columns: %q", l)
	}
	view := strings.Split(ansi.Strip(p.View(20, 6, true)), "\n")
	if !strings.HasPrefix(view[1], strings.Repeat("w", 20)) || strings.HasPrefix(view[2], "w") {
		t.Errorf("wide row wrapped:\n%s", strings.Join(view, "\n"))
	}
}

// Queries a program sends (cursor position, device attributes) are
// answered into a drained pipe: replaying them must not block.
func TestTerminalTranscriptQueriesDoNotBlock(t *testing.T) {
	done := make(chan Transcript, 1)
	go func() {
		done <- ptyTranscript(t, TranscriptChunk{Time: at(0), Data: []byte("\x1b[6n\x1b[c\x1b[>c\x1b]11;?\x07ready")})
	}()
	select {
	case p := <-done:
		if !strings.Contains(ansi.Strip(p.Line(0)), "ready") {
			t.Errorf("line %q", p.Line(0))
		}
		p.Reset()
	case <-time.After(5 * time.Second):
		t.Fatal("replaying a query blocked")
	}
}

// Plain sessions keep the text path; records map times to lines.
func TestTranscriptLineAt(t *testing.T) {
	p := NewTranscript(testEnv(t, "dark"))
	p, _ = p.SetSessions("w", []SessionRow{{ID: "s", Command: "make", State: "exited"}})
	p = p.SetSize(0, 5).AppendChunks([]TranscriptChunk{
		{Time: at(0), Data: []byte("a\nb\n")},
		{Time: at(5), Data: []byte("c\nd\n")},
		{Time: at(9), Data: []byte("e\n")},
	})
	if p.Terminal() || p.Lines() != 5 {
		t.Fatalf("plain: terminal %v, %d lines", p.Terminal(), p.Lines())
	}
	for _, c := range []struct {
		at   time.Time
		want int
	}{{at(-1), 0}, {at(0), 0}, {at(3), 2}, {at(5), 2}, {at(7), 4}, {at(10), -1}} {
		if got := p.LineAt(c.at); got != c.want {
			t.Errorf("LineAt(%v) = %d, want %d", c.at.Sub(fixedNow), got, c.want)
		}
	}
}
