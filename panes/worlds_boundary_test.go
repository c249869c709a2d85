package panes

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// A World's isolation level and network mode show in its row on a wide
// pane; a narrow one gives the column up before the name.
func TestWorldsShowBoundary(t *testing.T) {
	rows := fixtureWorldRows()
	rows[0].Boundary = "tree/host"
	rows[1].Boundary = "sandbox/proxy"
	p := NewWorlds(testEnv(t, "dark"))
	p, _ = p.SetRows(rows)
	p = p.SetSize(0, 20)
	wide := ansi.Strip(p.View(120, 20, true))
	for _, want := range []string{"tree/host", "sandbox/proxy"} {
		if !strings.Contains(wide, want) {
			t.Errorf("120 columns: %q missing:\n%s", want, wide)
		}
	}
	if narrow := ansi.Strip(p.View(60, 20, true)); strings.Contains(narrow, "sandbox/proxy") {
		t.Errorf("60 columns: the boundary column should give way:\n%s", narrow)
	}
}
