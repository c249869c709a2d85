package tui

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/keymap"
)

// Three Worlds, one fan-out that writes a different result in each and
// the same file everywhere: the compare view shows the fan-out's results,
// the disagreement and the agreement; adopting w-b's result publishes
// exactly it; the Worlds not chosen are then removed together.
func TestCompareAdoptAndRemoveOthers(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"result.txt": "base\n", "keep.txt": "k\n"})
	names := []string{"w-a", "w-b", "w-c"}
	for _, n := range names {
		newWorld(t, eng, src, n, "echo "+n+" > id.txt")
	}
	ctx := context.Background()
	res := eng.FanOut(ctx, names, engine.ExecOptions{Argv: []string{"/bin/sh", "-c", "cat id.txt > result.txt; echo same > agree.txt"}}, func(string, engine.Record) {})
	for _, r := range res {
		if r.ExitCode != 0 || r.Error != "" {
			t.Fatalf("fan-out: %+v", r)
		}
	}

	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("1")
	d.selectWorld("w-b")
	d.keys("c")
	if d.m.compare() == nil {
		t.Fatalf("no compare view: %q", d.m.lastErr)
	}
	scr := d.screen()
	for _, want := range []string{"Compare Worlds", "w-a · w-b · w-c", "last fan-out", "cat id.txt > result.txt", "exit 0", "result.txt", "agree.txt", "2 differ", "1 agree"} {
		if !strings.Contains(scr, want) {
			t.Errorf("compare view lacks %q:\n%s", want, scr)
		}
	}
	// The status bar shows the compare keys.
	if last := strings.Split(scr, "\n")[39]; !strings.Contains(last, "adopt this World's version") {
		t.Errorf("status bar %q", last)
	}
	key := func(a string) { d.send(press(keymap.Default().Binding(a).Keys()[0])) }
	for p, _ := d.m.compare().Cursor(); p != "result.txt"; p, _ = d.m.compare().Cursor() {
		key(keymap.CompareDown)
	}
	key(keymap.CompareRight) // w-b
	if _, w := d.m.compare().Cursor(); w != "w-b" {
		t.Fatalf("column %q", w)
	}
	key(keymap.CompareAdopt)
	if d.m.compare().Chosen("result.txt") != "w-b" {
		t.Fatal("not adopted")
	}
	key(keymap.CompareApply)
	if d.m.lastErr != "" || !strings.Contains(d.m.info, "adopted 1 path from w-b") {
		t.Fatalf("apply: %q %q", d.m.info, d.m.lastErr)
	}
	got, _ := os.ReadFile(filepath.Join(src, "result.txt"))
	if string(got) != "w-b\n" {
		t.Fatalf("source result.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(src, "agree.txt")); !os.IsNotExist(err) {
		t.Error("a path not adopted was published")
	}
	// The view compares anew: the source now holds w-b's version.
	if d.m.compare() == nil || d.m.compare().Chosen("result.txt") != "w-b" {
		t.Fatal("compare view lost after the apply")
	}

	// Remove the others: confirm, then the second, typed confirm because
	// they hold unapplied work.
	key(keymap.CompareRemove)
	if d.m.dialog() == nil || !strings.Contains(d.screen(), "Remove 2 Worlds not chosen?") || !strings.Contains(d.screen(), "w-a, w-c") {
		t.Fatalf("no confirm:\n%s", d.screen())
	}
	d.keys("enter")
	if d.m.dialog() == nil || d.m.dialog().Require != "remove" {
		t.Fatalf("no second confirm:\n%s", d.screen())
	}
	d.typeText("remove")
	d.keys("enter")
	for _, n := range []string{"w-a", "w-c"} {
		if _, err := eng.World(n); !errors.Is(err, engine.ErrWorldNotFound) {
			t.Errorf("%s still there: %v", n, err)
		}
	}
	if _, err := eng.World("w-b"); err != nil {
		t.Errorf("the chosen World went: %v", err)
	}
	if d.m.compare() != nil {
		t.Error("compare view open with one World left")
	}
}
