package panes

import (
	"strings"
	"testing"

	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/themes"
)

// :snap lists the snapshot action first, above fuzzy hits of
// descriptions like "scroll down".
func TestPaletteRanksRealMatchesFirst(t *testing.T) {
	p := NewPalette(testEnv(t, "dark"))
	for _, k := range typeText("snap") {
		p, _, _ = p.Update(k)
	}
	ms := p.Matches()
	if len(ms) == 0 || ms[0].Name != keymap.TimelineSnapshot {
		t.Fatalf("first match for snap: %v", names(ms))
	}
	// Every match holds the query within its description or its name,
	// not threaded through both.
	for _, a := range ms {
		_, okd := FuzzyScore("snap", a.Desc())
		_, okn := FuzzyScore("snap", a.Name)
		if !okd && !okn {
			t.Errorf("snap lists %s (%q): its letters are only spread over description and name", a.Name, a.Desc())
		}
	}
	t.Logf("snap: %v", names(ms))
	for _, c := range []struct{ q, want string }{{"roll", keymap.TimelineRollback}, {"pick all", keymap.ChangesPickAll}, {"quit", keymap.Quit}} {
		p := NewPalette(testEnv(t, "dark"))
		for _, k := range typeText(c.q) {
			p, _, _ = p.Update(k)
		}
		if ms := p.Matches(); len(ms) == 0 || ms[0].Name != c.want {
			t.Errorf("first match for %q: %v", c.q, names(ms))
		}
	}
}

func names(as []*keymap.Action) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Name)
	}
	return out
}

// Keys added in config.toml show in the help and the palette, all of them.
func TestHelpAndPaletteShowConfiguredKeys(t *testing.T) {
	km, err := keymap.Load(map[string][]string{"worlds.down": {"down", "j", "ctrl+n"}, "timeline.snapshot": {"s", "S", "f9"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := themes.New(themes.Options{Theme: "dark"})
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Keys: km, Styles: st}
	help := ansiStrip(strings.Join(NewHelp(env, keymap.Worlds).Lines(), "\n"))
	for _, want := range []string{"↓/j/ctrl+n", "s/S/f9"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	p := NewPalette(env)
	for _, k := range typeText("snapshot") {
		p, _, _ = p.Update(k)
	}
	if v := ansiStrip(p.View(100, 30)); !strings.Contains(v, "s/S/f9") {
		t.Errorf("palette lacks the configured keys:\n%s", v)
	}
}
