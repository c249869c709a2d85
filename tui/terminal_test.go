package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/engine"
)

// A real PTY session whose program moves the cursor: its recorded
// transcript (output and resize records) is replayed through the terminal
// emulator, so the pane shows the screen the program drew.
func TestPTYTranscriptThroughEmulator(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w1", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	script := `printf 'first line\n'; printf '\033[2J\033[HHEADER\033[3;5Hcell-3-5\033[1;1Hh\033[10;1H'`
	meta, err := eng.Exec(ctx, "w1", engine.ExecOptions{Argv: []string{"/bin/sh", "-c", script}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.WaitSession(ctx, eng.SessionDir("w1", meta.ID)); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 80, 24)
	d.keys("2")
	d.eventually("the PTY output", func() bool { return strings.Contains(d.screen(), "cell-3-5") })
	if !d.m.transcript.Terminal() {
		t.Fatal("the PTY session is not shown through the emulator")
	}
	var rows []string
	for _, l := range strings.Split(d.screen(), "\n") {
		rows = append(rows, strings.TrimRight(strings.Trim(l, "│┃"), " "))
	}
	scr := strings.Join(rows, "\n")
	// HEADER's first cell was overwritten in place, and cell-3-5 sits two
	// rows below it at column 5: exactly as a terminal shows it.
	if !strings.Contains(scr, "\nhEADER\n\n    cell-3-5\n") {
		t.Fatalf("cursor addressing not honoured:\n%s", scr)
	}
	if body := strings.Join(rows[3:], "\n"); strings.Contains(body, "[3;5H") || strings.Contains(body, "[2J") {
		t.Fatalf("control sequences shown as text:\n%s", scr)
	}
}
