package engine

import (
	"fmt"
	"os"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/fsx"
)

// Several trees in one World (`new --mount`): see engine/world/trees.go
// for the record and docs/design.md for the layout and apply semantics.

type (
	Tree     = world.Tree
	TreeMode = world.TreeMode
)

const (
	MainTree     = world.MainTree
	TreeOverlay  = world.TreeOverlay
	TreeReadOnly = world.TreeReadOnly
	TreeShared   = world.TreeShared
)

var (
	ErrInvalidMount = world.ErrInvalidMount
	ParseMount      = world.ParseMount
	TreePath        = world.TreePath
)

// resolveTrees canonicalises the extra trees of a new World and refuses
// what cannot be one: a missing dir, a tree overlapping another (or the
// source), the state root, "/", the home, a credential path.
func (e *Engine) resolveTrees(name, source string, trees []Tree) ([]Tree, error) {
	if len(trees) == 0 {
		return nil, nil
	}
	home, _ := os.UserHomeDir()
	out := make([]Tree, 0, len(trees))
	for _, t := range trees {
		if t.Mode == "" {
			t.Mode = TreeOverlay
		}
		p, err := fsx.CanonicalDir(t.Path)
		if err != nil {
			return nil, fmt.Errorf("new world %q: %w: tree %s: %w", name, ErrInvalidMount, t.Name, err)
		}
		t.Path = p
		if err := boundary.CheckTreePath(p, boundary.Host{Home: home, StateRoot: e.Paths.Root}, e.Config.Boundary.DenyPaths); err != nil {
			return nil, fmt.Errorf("new world %q: %w: tree %s: %w", name, ErrInvalidMount, t.Name, err)
		}
		out = append(out, t)
	}
	if err := world.CheckTrees(source, out); err != nil {
		return nil, fmt.Errorf("new world %q: %w", name, err)
	}
	return out, nil
}

// treeViews returns the World's overlay trees as views (World.TreeView),
// the primary first: what status, snapshots and apply walk.
func treeViews(w *World) []*World {
	out := []*World{w}
	for _, n := range w.TreeNames()[1:] {
		if v, err := w.TreeView(n); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// makeTreeDirs creates the layer dirs of every extra overlay tree under a
// (staged) World dir.
func makeTreeDirs(worldDir string, w *World) error {
	p := Paths{Root: "/"}
	for _, v := range treeViews(w)[1:] {
		// Paths below a World dir do not depend on the root: rebase them.
		rel := p.Tree(w.Name, v.View)[len(p.World(w.Name)):]
		for _, d := range []string{"upper", "work", "merged"} {
			if err := os.MkdirAll(worldDir+rel+"/"+d, 0o755); err != nil {
				return fmt.Errorf("new world %q: tree %s: %w", w.Name, v.View, err)
			}
		}
	}
	return nil
}

// treesMountRoots reports whether every extra overlay tree's merged view
// is a mount (ensureMountedFast): an unmounted one must never be bound
// into a session, whose writes would land beside the tree's upper.
func (e *Engine) treesMountRoots(w *World) bool {
	for _, v := range treeViews(w)[1:] {
		if !isMountRoot(e.Paths.MergedOf(v)) {
			return false
		}
	}
	return true
}

// treeBinds are the session binds that show the World's extra trees at
// their own paths: an overlay tree's merged view, a read-only tree
// read-only, a shared tree read-write. Cloned before the sandbox's plan
// and attached after it, like every bind of a session (engine/local).
func (e *Engine) treeBinds(w *World) []Bind {
	var out []Bind
	for _, t := range w.Trees {
		switch t.Mode {
		case TreeOverlay:
			v, err := w.TreeView(t.Name)
			if err != nil {
				continue
			}
			out = append(out, Bind{Source: e.Paths.MergedOf(v), Target: t.Path})
		case TreeReadOnly:
			out = append(out, Bind{Source: t.Path, Target: t.Path, ReadOnly: true})
		case TreeShared:
			out = append(out, Bind{Source: t.Path, Target: t.Path})
		}
	}
	return out
}
