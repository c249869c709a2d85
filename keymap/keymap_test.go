package keymap

import (
	"strings"
	"testing"

	tea "github.com/stratahq/strata/third_party/bubbletea"
)

func press(s string) tea.KeyPressMsg {
	switch s {
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "ctrl+r":
		return tea.KeyPressMsg{Code: 'r', Mod: tea.ModCtrl}
	}
	r := []rune(s)
	return tea.KeyPressMsg{Code: r[0], Text: s}
}

func TestDefaultsHaveNoConflicts(t *testing.T) {
	km := Default()
	if err := km.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, a := range km.Actions() {
		if a.Desc() == "" || a.Binding.Help().Key == "" {
			t.Errorf("%s has no help text", a.Name)
		}
		if len(a.Binding.Keys()) == 0 {
			t.Errorf("%s has no keys", a.Name)
		}
		if !strings.HasPrefix(a.Name, string(a.Area)+".") {
			t.Errorf("%s is filed under area %s", a.Name, a.Area)
		}
	}
}

func TestMatch(t *testing.T) {
	km := Default()
	cases := []struct {
		area Area
		key  string
		want string
	}{
		{Diff, "space", DiffPick},
		{Changes, "space", ChangesPick},
		{Transcript, "n", TranscriptNextMatch},
		{Worlds, "n", WorldsNew},
		{Global, "ctrl+r", Refresh},
		{Worlds, "enter", WorldsOpen},
	}
	for _, c := range cases {
		got, ok := km.Match(c.area, press(c.key))
		if !ok || got != c.want {
			t.Errorf("Match(%s, %q) = %q, %v; want %q", c.area, c.key, got, ok, c.want)
		}
	}
	if got, ok := km.Match(Diff, press("z")); ok {
		t.Errorf("z matched %s", got)
	}
}

func TestLoadOverride(t *testing.T) {
	km, err := Load(map[string][]string{DiffPick: {"p", "space"}, WorldsRemove: {}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := km.Match(Diff, press("p")); got != DiffPick {
		t.Errorf("p = %q, want diff.pick", got)
	}
	if km.Binding(DiffPick).Help().Key != "p/space" {
		t.Errorf("help key = %q", km.Binding(DiffPick).Help().Key)
	}
	if _, ok := km.Match(Worlds, press("D")); ok {
		t.Error("unbound action still matches")
	}
	// Short help reflects the override: the same bindings drive both.
	found := false
	for _, b := range km.ShortHelp(Diff) {
		if b.Help().Key == "p/space" {
			found = true
		}
	}
	if !found {
		t.Error("short help does not show the overridden key")
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		over map[string][]string
		want string
	}{
		{map[string][]string{"diff.pik": {"p"}}, `unknown action "diff.pik" (actions of diff: diff.up`},
		{map[string][]string{"nope": {"p"}}, "AREA.VERB"},
		{map[string][]string{DiffPick: {"s"}}, `"s" is bound to both`},
		{map[string][]string{WorldsNew: {"q"}}, `"q" is bound to both global.quit and worlds.new`},
		{map[string][]string{DiffPick: {" "}}, "empty key name"},
	}
	for _, c := range cases {
		_, err := Load(c.over)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%v) = %v; want error containing %q", c.over, err, c.want)
		}
	}
	// Dialogs are modal: reusing a global key there is fine.
	if _, err := Load(map[string][]string{DialogConfirm: {"q", "enter"}}); err != nil {
		t.Errorf("dialog reusing a global key: %v", err)
	}
}

func TestFullHelpFocusedFirst(t *testing.T) {
	groups := Default().FullHelp(Diff)
	if groups[0].Area != Diff {
		t.Fatalf("first group %s", groups[0].Area)
	}
	total := 0
	for _, g := range groups {
		total += len(g.Bindings)
	}
	if total != len(Default().Actions()) {
		t.Errorf("full help shows %d of %d actions", total, len(Default().Actions()))
	}
}
