package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine"
)

// At 80x24, the apply dialog of a World with two trees names each path by
// its tree and says which trees it publishes to: a pick of game:sub/a.txt
// used to read "write sub/a.txt ... to its source", as if it went to the
// source's own sub/a.txt (which the World also changed).
func TestApplyDialogNamesTrees(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"sub/a.txt": "main a\n"})
	game := t.TempDir()
	if err := os.MkdirAll(filepath.Join(game, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(game, "sub", "a.txt"), []byte("game a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Create(context.Background(), engine.CreateOptions{Name: "w1", Source: src, Trees: []engine.Tree{{Name: "game", Path: game, Mode: engine.TreeOverlay}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = eng.Remove(context.Background(), "w1", engine.RemoveOptions{Force: true, Purge: true, Kill: true})
	})
	runIn(t, eng, "w1", "echo main2 >> sub/a.txt && echo game2 >> "+game+"/sub/a.txt")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 80, 24)
	d.keys("3")
	d.selectChange("game:sub/a.txt")
	d.keys("space", "a")
	if d.m.dialog() == nil {
		t.Fatalf("no apply dialog: %q\n%s", d.m.lastErr, d.screen())
	}
	scr := d.screen()
	for _, want := range []string{"write game:sub/a.txt", "to tree game, all or nothing"} {
		if !strings.Contains(scr, want) {
			t.Errorf("apply dialog lacks %q:\n%s", want, scr)
		}
	}
	d.keys("enter")
	if d.m.lastErr != "" {
		t.Fatalf("apply: %s", d.m.lastErr)
	}
	if b, _ := os.ReadFile(filepath.Join(game, "sub", "a.txt")); string(b) != "game a\ngame2\n" {
		t.Fatalf("game:sub/a.txt published as %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "sub", "a.txt")); string(b) != "main a\n" {
		t.Fatalf("the source's sub/a.txt got %q", b)
	}
	// Both trees picked: the dialog names both.
	d.keys("3")
	d.selectChange("sub/a.txt")
	d.keys("space", "a")
	if d.m.dialog() == nil {
		t.Fatalf("no apply dialog: %q\n%s", d.m.lastErr, d.screen())
	}
	if scr := d.screen(); !strings.Contains(scr, "write sub/a.txt") || !strings.Contains(scr, "to its source, all or nothing") {
		t.Errorf("apply dialog of a source path:\n%s", scr)
	}
}

// applyTargets over both trees.
func TestApplyTargetsBothTrees(t *testing.T) {
	got := applyTargets([]engine.AppliedPath{{Tree: "main", Path: "a"}, {Tree: "game", Path: "b"}, {Tree: "game", Path: "c"}})
	if got != "its source and tree game, each all or nothing" {
		t.Fatalf("applyTargets = %q", got)
	}
}

// A conflict in another tree is shown as NAME:path and, resolved, applied
// in that tree: the source has a change at the same relative path, which
// the resolution must not touch.
func TestConflictInAnotherTree(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": threeHunks()})
	game := t.TempDir()
	if err := os.WriteFile(filepath.Join(game, "a.txt"), []byte(threeHunks()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Create(context.Background(), engine.CreateOptions{Name: "w1", Source: src, Trees: []engine.Tree{{Name: "game", Path: game, Mode: engine.TreeOverlay}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = eng.Remove(context.Background(), "w1", engine.RemoveOptions{Force: true, Purge: true, Kill: true})
	})
	runIn(t, eng, "w1", editThree+" && cd "+game+" && "+editThree)
	w, err := eng.World("w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.ChangesByTree(context.Background(), w, false, ""); err != nil { // the game tree's bases
		t.Fatal(err)
	}
	theirs := strings.Replace(threeHunks(), "line 2\n", "line 2 from the source\n", 1)
	theirs = strings.Replace(theirs, "line 15\n", "line 15 from the source\n", 1)
	if err := os.WriteFile(filepath.Join(game, "a.txt"), []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 80, 24)
	d.keys("3")
	d.selectChange("game:a.txt")
	d.keys("space", "a", "enter")
	if d.m.conflicts() == nil {
		t.Fatalf("no conflict view: %q\n%s", d.m.lastErr, d.screen())
	}
	if scr := d.screen(); !strings.Contains(scr, "game:a.txt") {
		t.Errorf("conflict view does not name the tree:\n%s", scr)
	}
	d.keys("o", "o", "enter") // keep the World's version, region by region
	if d.m.conflicts() != nil || d.m.lastErr != "" {
		t.Fatalf("apply again: %q\n%s", d.m.lastErr, d.screen())
	}
	want := strings.Replace(threeHunks(), "line 2\n", "line two\n", 1)
	want = strings.Replace(want, "line 15\n", "line fifteen\n", 1)
	want = strings.Replace(want, "line 28\n", "line twenty-eight\n", 1)
	if b, _ := os.ReadFile(filepath.Join(game, "a.txt")); string(b) != want {
		t.Fatalf("game a.txt after resolving:\n%s\nwant:\n%s", b, want)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "a.txt")); string(b) != threeHunks() {
		t.Fatalf("the source's a.txt was written:\n%s", b)
	}
}
