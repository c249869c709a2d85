package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A World whose world.toml is corrupt stays in the Worlds pane as broken,
// and selecting it puts the reason in the status line; a session whose
// meta.json is corrupt is still counted.
func TestBrokenWorldShown(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "good", "echo one; echo two > a.txt")
	newWorld(t, eng, src, "wreck", "true")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(eng.Paths.WorldFile("wreck"), []byte("name = [garbage"), 0o644))
	runIn(t, eng, "good", "true")
	ss, err := eng.Sessions("good")
	if err != nil || len(ss) != 2 {
		t.Fatalf("sessions: %v %v", ss, err)
	}
	must(os.WriteFile(filepath.Join(eng.SessionDir("good", ss[0].ID), "meta.json"), []byte("{"), 0o644))

	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 160, 48)
	var wreck, good bool
	for _, r := range d.m.worlds.Rows() {
		switch r.Name {
		case "wreck":
			wreck = r.Status == "broken" && strings.Contains(r.Error, "world.toml")
		case "good":
			good = r.Sessions == 2
		}
	}
	if !wreck || !good {
		t.Fatalf("rows %+v: want wreck broken with its error, good with 2 sessions (one broken)", d.m.worlds.Rows())
	}
	if !strings.Contains(d.screen(), "wreck") || !strings.Contains(d.screen(), "broken") {
		t.Fatalf("the broken World is not on screen:\n%s", d.screen())
	}
	d.selectWorld("wreck")
	if !strings.Contains(d.m.lastErr, "broken") || !strings.Contains(d.m.lastErr, "world.toml") || !strings.Contains(d.m.lastErr, "rm --purge wreck") {
		t.Fatalf("status line on a broken World: %q", d.m.lastErr)
	}
	d.selectWorld("good")
	if !strings.Contains(d.screen(), "2/2 ") { // the command reads "true" when $SHELL is /bin/sh
		t.Errorf("the session list does not count the broken session:\n%s", d.screen())
	}
}
