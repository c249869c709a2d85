package tui

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"

	"github.com/stratahq/strata/third_party/teatest"
)

// teaScreen is what a person sees of a teatest program: its output drawn on
// a virtual terminal of the program's size. Waiting for text on it, not in
// the output stream, does not hang on how the renderer cut its frames (a
// redraw sends only the cells that changed, so text already on the screen
// is not sent again, and text that changed in part arrives in part).
type teaScreen struct {
	t   *testing.T
	tm  *teatest.TestModel
	emu *vt.Emulator
}

// teaScreenWait is how long a teaScreen waits for its text: a loaded
// machine's apply, with its fsyncs, can take seconds.
const teaScreenWait = 30 * time.Second

func newTeaScreen(t *testing.T, tm *teatest.TestModel, width, height int) *teaScreen {
	emu := vt.NewEmulator(width, height)
	// The emulator answers the program's terminal queries on its input
	// pipe, whose writes wait for a reader.
	go func() { _, _ = io.Copy(io.Discard, emu) }()
	t.Cleanup(func() { _ = emu.Close() })
	return &teaScreen{t: t, tm: tm, emu: emu}
}

// wait waits until the screen shows every one of what at once.
func (s *teaScreen) wait(what ...string) {
	s.t.Helper()
	deadline := time.Now().Add(teaScreenWait)
	for {
		out, err := io.ReadAll(s.tm.Output())
		if err != nil {
			s.t.Fatalf("program output: %v", err)
		}
		_, _ = s.emu.Write(out)
		scr := s.emu.String()
		if shows(scr, what) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("after %s the screen does not show %q:\n%s", teaScreenWait, what, scr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func shows(screen string, what []string) bool {
	for _, w := range what {
		if !strings.Contains(screen, w) {
			return false
		}
	}
	return true
}
