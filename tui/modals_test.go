package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/panes"
)

// The palette opens over the help, and esc comes back to the help, not
// to the panes: closing pops one modal.
func TestModalStackPaletteOverHelp(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("?")
	if d.m.help() == nil {
		t.Fatalf("no help:\n%s", d.screen())
	}
	d.keys(":")
	if _, ok := d.m.top().(paletteModal); !ok {
		t.Fatalf("the palette key over the help opened no palette on top (stack %T):\n%s", d.m.modals, d.screen())
	}
	d.typeText("snap")
	if !strings.Contains(d.screen(), ":snap") {
		t.Fatalf("the palette does not get the keys:\n%s", d.screen())
	}
	d.keys("esc")
	if _, ok := d.m.top().(helpModal); !ok || len(d.m.modals) != 1 {
		t.Fatalf("esc on the palette did not return to the help (stack %T):\n%s", d.m.modals, d.screen())
	}
	if !strings.Contains(d.screen(), "config.toml [keys] overrides them") {
		t.Fatalf("the help is not on screen again:\n%s", d.screen())
	}
	d.keys("esc")
	if len(d.m.modals) != 0 {
		t.Fatalf("esc on the help left %T open", d.m.modals)
	}
}

// A dialog that opens over the help (an answer arriving while the help is
// open) gets the mouse: the wheel does not scroll the help under it, a
// click does not reach the panes.
func TestModalMouseGoesToTopOnly(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("?")
	before := d.screen()
	d.send(infoMsg{title: "About this snapshot", lines: []string{"only information"}})
	if _, ok := d.m.top().(dialogModal); !ok {
		t.Fatalf("no dialog on top: %T", d.m.modals)
	}
	for range 3 {
		d.send(tea.MouseWheelMsg{X: 60, Y: 20, Button: tea.MouseWheelDown})
	}
	focus := d.m.focus
	d.send(tea.MouseClickMsg{X: 110, Y: 30, Button: tea.MouseLeft}) // over the Diff pane
	if d.m.focus != focus {
		t.Errorf("a click under the dialog moved the focus to %v", d.m.focus)
	}
	d.keys("esc")
	if d.m.help() == nil || d.m.dialog() != nil {
		t.Fatalf("esc did not close just the dialog: %T", d.m.modals)
	}
	if got := d.screen(); got != before {
		t.Errorf("the wheel over the dialog scrolled the help under it:\nbefore\n%s\nafter\n%s", before, got)
	}
	// The help, now on top, takes the wheel.
	d.send(tea.MouseWheelMsg{X: 60, Y: 20, Button: tea.MouseWheelDown})
	if d.screen() == before {
		t.Error("the wheel does not scroll the help on top")
	}
}

// The top modal is drawn last: over everything under it, which stays
// visible around it.
func TestModalTopDrawnLast(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("?", ":")
	scr := d.screen()
	if !strings.Contains(scr, "Keys  (config.toml [keys] overrides them)") || !strings.Contains(scr, "global.palette") {
		t.Fatalf("help and palette are not both drawn:\n%s", scr)
	}
	// The same two the other way up: the help covers the palette's list.
	m := d.m
	m.modals = []modal{paletteModal{panes.NewPalette(m.env)}, helpModal{panes.NewHelp(m.env, m.focusArea())}}
	under := ansi.Strip(m.Render())
	if under == scr {
		t.Fatal("the order of the stack does not change the drawing")
	}
	if !strings.Contains(under, "config.toml [keys] overrides them") || strings.Contains(under, "global.palette") {
		t.Fatalf("the help on top is not drawn over the palette:\n%s", under)
	}
}

// The status line under a dialog names only keys that do something there: a
// confirmation or a one-field form has no "next field".
func TestDialogHintsOnlyWhatWorks(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w", "")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	statusLine := func() string {
		lines := strings.Split(ansi.Strip(d.screen()), "\n")
		return lines[len(lines)-1]
	}
	d.keys("n")
	if _, ok := d.m.top().(dialogModal); !ok {
		t.Fatalf("n opened no form: %T", d.m.modals)
	}
	if !strings.Contains(statusLine(), "next field") {
		t.Fatalf("the many-field new-World form's status line lacks next field: %q", statusLine())
	}
	d.keys("esc")
	d.keys("5", "s") // the snapshot form: one field
	if _, ok := d.m.top().(dialogModal); !ok {
		t.Fatalf("s opened no form: %T\n%s", d.m.modals, d.screen())
	}
	if strings.Contains(statusLine(), "next field") {
		t.Fatalf("a one-field form's status line offers a next field: %q", statusLine())
	}
}
