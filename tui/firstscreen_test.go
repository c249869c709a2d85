package tui

import (
	"strings"
	"testing"
)

// The first screen over a source without Worlds says how to make one (the
// key and the CLI), and that A shows the Worlds over other sources when
// there are some; A then shows them.
func TestFirstScreenExplains(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 200, 60)
	scr := d.screen()
	if !strings.Contains(scr, "press n to create one, or run: strata new NAME") {
		t.Fatalf("the empty screen does not say how to create a World:\n%s", scr)
	}
	if strings.Contains(scr, "other sources") {
		t.Fatalf("mentions other sources when there are none:\n%s", scr)
	}

	other := t.TempDir()
	newWorld(t, eng, other, "elsewhere", "")
	d = newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 200, 60)
	scr = d.screen()
	if !strings.Contains(scr, "1 World over other sources — press A to show every World") {
		t.Fatalf("the empty screen does not point at the World over another source:\n%s", scr)
	}
	d.keys("A")
	if !strings.Contains(d.screen(), "elsewhere") {
		t.Fatalf("A does not show the World over the other source:\n%s", d.screen())
	}
}
