package tui

import (
	"errors"
	"strings"
	"testing"
)

// "? help" stays on the hint line at every width, a long error showing
// or not; the other hints give way.
func TestHintLineKeepsHelp(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w1", "")
	for _, sz := range [][2]int{{40, 24}, {60, 24}, {80, 24}, {120, 40}, {200, 60}} {
		d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, sz[0], sz[1])
		for _, pane := range []string{"1", "2", "3", "4", "5"} {
			d.keys(pane)
			last := strings.Split(d.screen(), "\n")[sz[1]-1]
			if !strings.Contains(last, "? help") {
				t.Errorf("%dx%d pane %s: hint line without ? help: %q", sz[0], sz[1], pane, last)
			}
		}
		d.send(doneMsg{err: errors.New(strings.Repeat("a long error that fills the status line ", 5))})
		if last := strings.Split(d.screen(), "\n")[sz[1]-1]; !strings.Contains(last, "? help") {
			t.Errorf("%dx%d with an error: hint line without ? help: %q", sz[0], sz[1], last)
		}
	}
}
