package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay"
)

// multiTreeEngine is testEngine with three more trees beside the source:
// game, tools and ddc, each with sub/a.txt.
func multiTreeEngine(t *testing.T) (e *Engine, src string, trees map[string]string) {
	t.Helper()
	e, src = testEngine(t)
	base := filepath.Dir(src)
	trees = map[string]string{}
	for _, n := range []string{"game", "tools", "ddc"} {
		d := filepath.Join(base, n)
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "sub", "a.txt"), []byte(n+" a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		trees[n] = d
	}
	return e, src, trees
}

// multiTreeWorld: game an overlay tree, tools read-only, ddc shared.
func multiTreeWorld(t *testing.T, e *Engine, src string, trees map[string]string, name string) *World {
	t.Helper()
	w, err := e.Create(context.Background(), CreateOptions{Name: name, Source: src, MountBackend: overlay.BackendKernel, Trees: []Tree{
		{Name: "game", Path: trees["game"], Mode: TreeOverlay},
		{Name: "tools", Path: trees["tools"], Mode: TreeReadOnly},
		{Name: "ddc", Path: trees["ddc"], Mode: TreeShared},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestCreateWithTrees(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	w := multiTreeWorld(t, e, src, trees, "ue")
	r, err := e.World("ue")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Trees) != 3 || r.Trees[0].Path != trees["game"] || r.Trees[2].Mode != TreeShared {
		t.Fatalf("trees = %+v", r.Trees)
	}
	v, _ := w.TreeView("game")
	for _, d := range []string{e.Paths.UpperOf(v), e.Paths.WorkOf(v), e.Paths.MergedOf(v)} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Fatalf("tree dir %s: %v", d, err)
		}
	}
	// Only overlay trees get layers.
	if _, err := os.Stat(e.Paths.Tree("ue", "tools")); !os.IsNotExist(err) {
		t.Fatalf("read-only tree has layers: %v", err)
	}
}

func TestCreateRefusesBadTrees(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	home, _ := os.UserHomeDir()
	link := filepath.Join(filepath.Dir(src), "game-link")
	if err := os.Symlink(trees["game"], link); err != nil {
		t.Fatal(err)
	}
	for why, tc := range map[string]struct {
		trees []Tree
		says  string
	}{
		"missing dir":        {[]Tree{{Name: "x", Path: filepath.Join(src, "..", "nope")}}, "no such file"},
		"inside the source":  {[]Tree{{Name: "d0", Path: filepath.Join(src, "d0")}}, "overlap"},
		"over the source":    {[]Tree{{Name: "all", Path: filepath.Dir(src)}}, ""},
		"a link to another":  {[]Tree{{Name: "game", Path: trees["game"]}, {Name: "g2", Path: link}}, "overlap"},
		"the state root":     {[]Tree{{Name: "st", Path: e.Paths.Root}}, "state"},
		"inside the state":   {[]Tree{{Name: "st", Path: e.Paths.Worlds()}}, "state"},
		"the root":           {[]Tree{{Name: "root", Path: "/", Mode: TreeReadOnly}}, "whole host"},
		"the home":           {[]Tree{{Name: "home", Path: home, Mode: TreeShared}}, "home"},
		"a name taken twice": {[]Tree{{Name: "g", Path: trees["game"]}, {Name: "g", Path: trees["tools"]}}, "named"},
		"the source's name":  {[]Tree{{Name: "main", Path: trees["game"]}}, "source"},
		"a bad name":         {[]Tree{{Name: "Game", Path: trees["game"]}}, "tree name"},
	} {
		_, err := e.Create(context.Background(), CreateOptions{Name: "bad", Source: src, MountBackend: overlay.BackendKernel, Trees: tc.trees})
		if !errors.Is(err, ErrInvalidMount) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: Create = %v, want ErrInvalidMount saying %q", why, err, tc.says)
		}
		if _, err := os.Lstat(e.Paths.World("bad")); !os.IsNotExist(err) {
			t.Fatalf("%s: a refused World left its dir", why)
		}
	}
}

// A cube World's sandbox gets one host share: --mount is refused with a
// clear message, and no World is left behind.
func TestCreateCubeRefusesTrees(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	_, err := e.Create(context.Background(), CreateOptions{Name: "c", Source: src, Backend: RuntimeCube, Trees: []Tree{{Name: "game", Path: trees["game"]}}})
	if !errors.Is(err, ErrInvalidMount) || !strings.Contains(err.Error(), "--backend local") {
		t.Fatalf("cube Create with a tree = %v", err)
	}
	if _, err := os.Lstat(e.Paths.World("c")); !os.IsNotExist(err) {
		t.Fatal("a refused cube World left its dir")
	}
}
