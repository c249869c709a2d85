package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
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
	ErrNoTree       = world.ErrNoTree
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
	if w.View != "" {
		return []*World{w} // a view stands for its own tree only
	}
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
	for _, v := range treeViews(w)[1:] {
		for _, d := range []string{"upper", "work", "merged"} {
			if err := os.MkdirAll(filepath.Join(world.TreeDirIn(worldDir, v.View), d), 0o755); err != nil {
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

// TreeChanges is one tree's change set in a World with several.
type TreeChanges struct {
	Tree   string // MainTree for the source
	Source string // the tree's directory
	*overlay.ChangeSet
}

// ChangesByTree reads the change set of every overlay tree of w, the
// source first; only names one tree ("" = all).
func (e *Engine) ChangesByTree(ctx context.Context, w *World, includeIgnored bool, only string) ([]TreeChanges, error) {
	var out []TreeChanges
	for _, v := range treeViews(w) {
		if only != "" && v.TreeName() != only {
			continue
		}
		if err := checkTreeView(v); err != nil {
			return nil, err
		}
		cs, err := e.Changes(ctx, v, includeIgnored)
		if err != nil {
			return nil, err
		}
		out = append(out, TreeChanges{Tree: v.TreeName(), Source: v.Source, ChangeSet: cs})
	}
	if only != "" && len(out) == 0 {
		if _, err := w.TreeView(only); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitTreePaths groups path operands by tree (World.SplitTreePath);
// with tree set, plain paths are in it and a NAME: of another tree is
// refused. trees lists the trees to act on in the World's order: those
// the paths name, or every overlay tree (only tree) when there are none.
func splitTreePaths(w *World, upper, tree string, paths []string) (byTree map[string][]string, trees []string, err error) {
	if tree != "" {
		if _, err := w.TreeView(tree); err != nil {
			return nil, nil, err
		}
	}
	byTree = map[string][]string{}
	for _, p := range paths {
		if err := w.UnknownTreePrefix(p, upper); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		t, rel := w.SplitTreePath(p)
		explicit := t != MainTree || strings.HasPrefix(p, MainTree+":")
		if tree != "" {
			if explicit && t != tree {
				return nil, nil, fmt.Errorf("%s is in tree %s, not %s", p, t, tree)
			}
			t = tree
		}
		if tr, ok := w.FindTree(t); ok && tr.Mode != TreeOverlay {
			return nil, nil, fmt.Errorf("%s: tree %s is %s: it has no changes of its own", p, t, tr.Mode)
		}
		byTree[t] = append(byTree[t], rel)
	}
	for _, n := range w.TreeNames() {
		if tree != "" && n != tree {
			continue
		}
		if len(paths) == 0 || len(byTree[n]) > 0 {
			trees = append(trees, n)
		}
	}
	return byTree, trees, nil
}

// diffTrees is Diff of a World with several trees: each tree's diff (of
// the paths in it), in the World's tree order, every FileChange naming its
// tree.
func (e *Engine) diffTrees(ctx context.Context, w *World, o DiffOptions) ([]FileChange, error) {
	if o.Changes != nil && o.Tree == "" {
		return e.diffFlat(ctx, w, o)
	}
	if o.Changes != nil {
		v, err := w.TreeView(o.Tree)
		if err != nil {
			return nil, fmt.Errorf("diff world %q: %w", w.Name, err)
		}
		if err := checkTreeView(v); err != nil {
			return nil, fmt.Errorf("diff: %w", err)
		}
		fcs, err := e.diffTree(ctx, v, o)
		for i := range fcs {
			fcs[i].Tree = v.TreeName()
		}
		return fcs, err
	}
	byTree, trees, err := splitTreePaths(w, e.Paths.Upper(w.Name), o.Tree, o.Paths)
	if err != nil {
		return nil, fmt.Errorf("diff world %q: %w", w.Name, err)
	}
	var out []FileChange
	for _, t := range trees {
		oo := o
		oo.Paths, oo.Tree = byTree[t], ""
		fcs, err := e.diffInTree(ctx, w, t, oo)
		if err != nil {
			return nil, err
		}
		out = append(out, fcs...)
	}
	return out, nil
}

// diffInTree diffs tree t of w (its paths tree-relative), each change
// marked with its tree.
func (e *Engine) diffInTree(ctx context.Context, w *World, t string, o DiffOptions) ([]FileChange, error) {
	v, err := w.TreeView(t)
	if err != nil {
		return nil, err
	}
	if err := checkTreeView(v); err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	fcs, err := e.diffTree(ctx, v, o)
	if err != nil {
		return nil, err
	}
	for i := range fcs {
		fcs[i].Tree = t
	}
	return fcs, nil
}

// ResolveTreePath is ResolvePath for a World with several trees: arg is
// NAME:path (relative to that tree's root), an absolute path (in the tree
// it lies in), or a relative one (in the tree the caller's directory cwd
// is in, else the source). The result is TREE:rel, main: included, which
// Diff and Apply read back unambiguously; a World with one tree gets
// ResolvePath's plain rel.
func ResolveTreePath(p Paths, w *World, cwd, arg string) (string, error) {
	if !w.HasTrees() {
		return ResolvePath(w, p.Merged(w.Name), cwd, arg)
	}
	if err := w.UnknownTreePrefix(arg, p.Upper(w.Name)); err != nil {
		// Unless it names a file where the caller is ("a:b" in a subdir).
		if _, serr := os.Lstat(filepath.Join(cwd, arg)); cwd == "" || serr != nil {
			return "", fmt.Errorf("%s: %w", arg, err)
		}
	}
	tree, rel := w.SplitTreePath(arg)
	if rel != arg {
		cwd = "" // NAME:path is from the tree's root
	} else if !filepath.IsAbs(arg) {
		for _, v := range treeViews(w)[1:] {
			if _, ok := CallerDir(v, p.MergedOf(v), cwd); ok {
				tree = v.View
			}
		}
	}
	v, err := w.TreeView(tree)
	if err != nil {
		return "", fmt.Errorf("%s: %w", arg, err)
	}
	r, err := ResolvePath(v, p.MergedOf(v), cwd, rel)
	if err != nil {
		return "", err
	}
	return tree + ":" + r, nil
}

// treeInfo adds the extra trees' change counts to a World's info.
func (e *Engine) treeInfo(ctx context.Context, w *World, wi *WorldInfo) {
	if !w.HasTrees() {
		return
	}
	wi.TreeChanges = map[string]int{MainTree: wi.Changes}
	for _, v := range treeViews(w)[1:] {
		if err := checkTreeView(v); err != nil {
			if wi.Error == "" {
				wi.Error = err.Error()
			}
			continue
		}
		cs, err := e.Changes(ctx, v, false)
		if err != nil {
			if wi.Error == "" {
				wi.Error = fmt.Sprintf("tree %s: %v", v.View, err)
			}
			continue
		}
		wi.TreeChanges[v.View] = len(cs.Changes)
		wi.Changes += len(cs.Changes)
	}
}

// checkTrees checks the source is still at its path (not behind a link)
// and each extra tree is still a directory, or a session would bind over a
// fresh empty one and a publication rebuild a partial tree there.
func (e *Engine) checkTrees(w *World) error {
	// The source was resolved when the World was made too: a path that now
	// leads elsewhere through a symlink (the source moved and a link, or a
	// decoy, took its place) would mount another directory as the World's
	// lower and diff and publish against it.
	if real, err := filepath.EvalSymlinks(w.Source); err == nil && real != w.Source {
		return ledAway(fmt.Sprintf("world %q: its source", w.Name), w.Source, real)
	}
	for _, t := range w.Trees {
		if err := checkTreeDir(w, t); err != nil {
			return err
		}
	}
	return nil
}

// checkTreeDir refuses a tree whose dir is gone or is no longer the
// directory the World was made over: its path was canonical at new, so a
// symlink now in it or in a parent (the dir moved away and a link left in
// its place) would point the session's bind, the tree's overlay and its
// publication at the link's target, another tree or the source among them.
func checkTreeDir(w *World, t Tree) error {
	missing := treeMovedError(fmt.Sprintf("world %q: tree %s: its dir %s no longer exists (moved or deleted?); put it back there (strata ls shows Worlds whose source or a tree is missing)", w.Name, t.Name, t.Path))
	real, err := filepath.EvalSymlinks(t.Path)
	if err != nil {
		return missing
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return missing
	}
	if real != t.Path {
		return ledAway(fmt.Sprintf("world %q: tree %s:", w.Name, t.Name), t.Path, real)
	}
	return nil
}

// ledAway is the error of what (the source, a tree) whose path now leads
// to real through a symlink.
func ledAway(what, path, real string) error {
	return treeMovedError(fmt.Sprintf("%s %s now leads to %s through a symlink, not the directory the World was made over; put that directory back at %s (or make a new World over %s)", what, path, real, path, real))
}

// treeMovedError is a tree whose path now leads elsewhere: the World's
// tree is missing (errors.Is ErrSourceMissing) and says where it leads.
type treeMovedError string

func (e treeMovedError) Error() string { return string(e) }

func (e treeMovedError) Is(target error) bool { return target == ErrSourceMissing }

// checkTreeView is checkTreeDir of the tree a view stands for (the source
// is not checked here).
func checkTreeView(v *World) error {
	if v.View == "" {
		return nil
	}
	t, _ := v.FindTree(v.View)
	return checkTreeDir(v, t)
}

// inTree reports whether dir lies in one of w's extra trees: `strata ls`
// there lists the World like from its source.
func inTree(w *World, dir string) bool {
	for _, t := range w.Trees {
		if within(dir, t.Path) {
			return true
		}
	}
	return false
}

// FlatChanges is every overlay tree's changes in one list, as a review
// shows them (the TUI's Changes pane): a path of an extra tree is written
// NAME:path, and Diff (with Changes) and Apply (as picks) read it back.
// A World with one tree gets its change set's list as it is.
func (e *Engine) FlatChanges(ctx context.Context, w *World, includeIgnored bool) ([]overlay.Change, error) {
	tcs, err := e.ChangesByTree(ctx, w, includeIgnored, "")
	if err != nil {
		return nil, err
	}
	var out []overlay.Change
	for _, tc := range tcs {
		for _, c := range tc.Changes {
			c.Path = TreePath(tc.Tree, c.Path)
			out = append(out, c)
		}
	}
	return out, nil
}

// diffFlat diffs changes of FlatChanges: each in its tree, each
// FileChange's Path given back as it came (NAME:path).
func (e *Engine) diffFlat(ctx context.Context, w *World, o DiffOptions) ([]FileChange, error) {
	byTree := map[string][]overlay.Change{}
	for _, c := range o.Changes {
		t, rel := w.SplitTreePath(c.Path)
		c.Path = rel
		byTree[t] = append(byTree[t], c)
	}
	var out []FileChange
	for _, t := range w.TreeNames() {
		if len(byTree[t]) == 0 {
			continue
		}
		oo := o
		oo.Changes = byTree[t]
		fcs, err := e.diffInTree(ctx, w, t, oo)
		if err != nil {
			return nil, err
		}
		for i := range fcs {
			fcs[i].Path = TreePath(t, fcs[i].Path)
			fcs[i].Change.Path = fcs[i].Path
		}
		out = append(out, fcs...)
	}
	return out, nil
}

// treeOf is cwd when it lies in one of w's extra trees (every tree is
// seen at its own path, so the session can start there).
func treeOf(w *World, cwd string) (string, bool) {
	if cwd == "" {
		return "", false
	}
	c := filepath.Clean(cwd)
	for _, t := range w.Trees {
		if within(c, t.Path) {
			return c, true
		}
	}
	return "", false
}
