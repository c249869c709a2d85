package panes

import (
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
)

// TranscriptChunk is one record of a session's transcript as the
// Transcript pane takes it: output bytes, or a resize of the session's
// terminal (Cols and Rows set, no Data).
type TranscriptChunk struct {
	Time       time.Time
	Data       []byte
	Cols, Rows int
}

// Default size of a PTY session's screen until its transcript says.
const defaultCols, defaultRows = 80, 24

// terminal replays a PTY session's output through a terminal emulator, so
// programs that move the cursor (top, vim, progress bars) show the screen
// they drew instead of a smear of control sequences. Its lines are the
// emulator's scrollback followed by the screen.
type terminal struct {
	emu        *vt.Emulator
	cols, rows int
	// screen caches the rendered screen rows; nil after each write.
	screen []string
}

func newTerminal(cols, rows int) *terminal {
	t := &terminal{emu: vt.NewEmulator(cols, rows), cols: cols, rows: rows}
	// The emulator answers the program's queries (cursor position, device
	// attributes) on a pipe; nobody types into a replay, so drain it or a
	// query would block the write forever.
	go func() { _, _ = io.Copy(io.Discard, t.emu) }()
	return t
}

// close ends the drain of the emulator's answers. It closes the pipe's
// write end rather than calling Close, whose flag the drain reads
// unsynchronised.
func (t *terminal) close() {
	if t == nil {
		return
	}
	if c, ok := t.emu.InputPipe().(io.Closer); ok {
		_ = c.Close()
	}
}

func (t *terminal) write(c TranscriptChunk) {
	if c.Cols > 0 && c.Rows > 0 {
		if c.Cols != t.cols || c.Rows != t.rows {
			t.cols, t.rows = c.Cols, c.Rows
			t.emu.Resize(c.Cols, c.Rows)
		}
	} else if len(c.Data) > 0 {
		_, _ = t.emu.Write(c.Data)
	}
	t.screen = nil
}

func (t *terminal) screenLines() []string {
	if t.screen == nil {
		t.screen = strings.Split(t.emu.Render(), "\n")
		for i, l := range t.screen {
			// Blank cells pad every row; the pane pads rows itself.
			t.screen[i] = strings.TrimRight(strings.TrimSuffix(l, "\r"), " ")
		}
	}
	return t.screen
}

// shownRows is how many screen rows count as lines: down to the last row
// holding anything. Programs park the cursor anywhere (top leaves it on
// the bottom row), so the cursor does not count; a blank bottom would
// otherwise be the "tail" the pane follows.
func (t *terminal) shownRows() int {
	scr := t.screenLines()
	for i := len(scr) - 1; i >= 0; i-- {
		if strings.TrimSpace(ansi.Strip(scr[i])) != "" {
			return i + 1
		}
	}
	return 1
}

func (t *terminal) scrollback() int {
	if t.emu.IsAltScreen() {
		return 0 // the full screen program owns the view
	}
	return t.emu.ScrollbackLen()
}

func (t *terminal) lines() int { return t.scrollback() + t.shownRows() }

func (t *terminal) line(i int) string {
	sb := t.scrollback()
	if i < sb {
		return t.emu.Scrollback().Line(i).Render()
	}
	scr := t.screenLines()
	if i-sb < len(scr) {
		return scr[i-sb]
	}
	return ""
}
