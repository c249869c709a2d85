package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine"
)

// The Changes pane of a World with several trees names each path's tree
// (NAME:path); picking one and applying publishes it to that tree only.
func TestChangesPaneShowsTrees(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"keep.txt": "k\n"})
	game := t.TempDir()
	if err := os.WriteFile(filepath.Join(game, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Create(context.Background(), engine.CreateOptions{Name: "w1", Source: src, Trees: []engine.Tree{{Name: "game", Path: game, Mode: engine.TreeOverlay}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = eng.Remove(context.Background(), "w1", engine.RemoveOptions{Force: true, Purge: true, Kill: true})
	})
	runIn(t, eng, "w1", "echo m > m.txt && echo g > "+game+"/g.txt")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("3")
	for _, want := range []string{"m.txt", "game:g.txt"} {
		if !strings.Contains(d.screen(), want) {
			t.Fatalf("Changes pane lacks %s:\n%s", want, d.screen())
		}
	}
	d.selectChange("game:g.txt")
	d.keys("space", "a")
	if d.m.dialog() == nil {
		t.Fatalf("no apply dialog: %q\n%s", d.m.lastErr, d.screen())
	}
	d.keys("enter")
	if d.m.lastErr != "" {
		t.Fatalf("apply: %s", d.m.lastErr)
	}
	if b, err := os.ReadFile(filepath.Join(game, "g.txt")); err != nil || string(b) != "g\n" {
		t.Fatalf("game:g.txt not published: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(src, "m.txt")); !os.IsNotExist(err) {
		t.Fatalf("m.txt published without a pick: %v", err)
	}
}
