package tui

import (
	"strings"
	"testing"

	"github.com/stratahq/strata/engine"
)

// The New World form's agent, prompt and command fields: a preset that
// does not exist and a prompt without an agent are refused before any
// World is made, with every field kept; ↑ chooses a configured preset; a
// plain command starts on a terminal in the new World.
func TestNewWorldFormStartsWhatItSays(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	t.Cleanup(func() {
		for _, n := range []string{"w1", "w2"} {
			_, _ = eng.Remove(t.Context(), n, engine.RemoveOptions{Force: true, Purge: true, Kill: true})
		}
	})
	d.keys("n")
	if scr := d.screen(); !strings.Contains(scr, "agent: aider, claude, codex") || !strings.Contains(scr, "first prompt for the agent") || !strings.Contains(scr, "command (no agent") {
		t.Fatalf("form lacks the agent fields:\n%s", scr)
	}
	d.typeText("w1")
	d.keys("tab", "tab", "tab")
	d.typeText("nosuch")
	d.keys("tab")
	d.typeText("fix the bug")
	d.keys("enter")
	scr := d.screen()
	if !strings.Contains(scr, `agent "nosuch"`) || !strings.Contains(scr, "fix the bug") || !strings.Contains(scr, "nosuch") {
		t.Fatalf("unknown preset not refused in the form, or fields lost:\n%s", scr)
	}
	if _, err := eng.World("w1"); err == nil {
		t.Fatal("a World was made for a refused form")
	}
	// Clear the agent: a prompt alone is refused too.
	x, _ := topmost[dialogModal](d.m)
	x.d.Fields[formAgent].Input.Set("")
	d.m.replaceTop(x)
	d.keys("enter")
	if scr := d.screen(); !strings.Contains(scr, "a first prompt needs an agent") {
		t.Fatalf("prompt without an agent:\n%s", scr)
	}
	// ↑ in the agent field goes through the presets.
	d.keys("shift+tab")
	d.send(press("up"))
	if v := d.m.dialog().Values()[formAgent]; v == "" {
		t.Fatal("↑ chose no preset")
	}
	x, _ = topmost[dialogModal](d.m)
	x.d.Fields[formAgent].Input.Set("")
	x.d.Fields[formPrompt].Input.Set("")
	x.d.Fields[formCommand].Input.Set("echo started > f.txt; sleep 30")
	d.m.replaceTop(x)
	d.keys("enter")
	if scr := d.screen(); !strings.Contains(scr, "created World w1, started echo started > f.txt; sleep 30") {
		t.Fatalf("plain command not started:\n%s", scr)
	}
	if d.m.dialog() != nil {
		t.Fatal("the form stayed open after the World was made")
	}
	ss, err := eng.Sessions("w1")
	if err != nil || len(ss) != 1 || !ss[0].TTY {
		t.Fatalf("sessions of w1: %+v, %v", ss, err)
	}
}
