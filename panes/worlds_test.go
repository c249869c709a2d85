package panes

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// At the Worlds pane's size in a 120x40 screen, forks keep their whole
// names (the figures give way), while short names keep the sparkline.
func TestWorldsNamesWinOverFigures(t *testing.T) {
	env := testEnv(t, "dark")
	res := map[string]WorldResources{
		"refactor-1": {CPU: 55, History: []float64{10, 50, 55}, Live: true},
		"refactor-2": {CPU: 2, History: []float64{5, 2}, Live: true},
	}
	p := NewWorlds(env)
	p, _ = p.SetRows([]WorldRow{{Name: "refactor-1", Status: "running"}, {Name: "refactor-2", Status: "running"}})
	out := ansi.Strip(p.SetResources(res).SetSize(0, 9).View(46, 9, true))
	for _, n := range []string{"refactor-1", "refactor-2"} {
		if !strings.Contains(out, n+" ") {
			t.Errorf("%s is cut:\n%s", n, out)
		}
	}
	short := NewWorlds(env)
	short, _ = short.SetRows([]WorldRow{{Name: "busy", Status: "running"}, {Name: "idle", Status: "idle"}})
	spark := strings.TrimSpace(Sparkline([]float64{10, 50, 55}, SparkWidth))
	out = ansi.Strip(short.SetResources(map[string]WorldResources{"busy": res["refactor-1"]}).SetSize(0, 9).View(46, 9, true))
	if !strings.Contains(out, spark) || !strings.Contains(out, "55%") {
		t.Errorf("short names lost the sparkline %q:\n%s", spark, out)
	}
}

// The first screen's explanation is two lines, whole, even in the Worlds
// pane of a 120x40 screen (46 columns) over a long source path.
func TestWorldsEmptyExplainsInTwoLines(t *testing.T) {
	p := NewWorlds(testEnv(t, "dark"))
	p.Scope = "/home/someone/src/github.com/example/a-rather-long-repository"
	p, _ = p.SetRows(nil)
	lines := strings.Split(ansi.Strip(p.View(46, 9, true)), "\n")
	var text []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(l); l != "" {
			text = append(text, l)
		}
	}
	if len(text) != 2 || !strings.HasPrefix(text[0], "No Worlds") || text[1] != "press n to create one, or run: strata new NAME" {
		t.Errorf("explanation at 46 columns: %q", text)
	}
}
