package world

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratahq/strata/fsx"
)

// A World may see several trees, each at its own absolute path (`strata
// new --mount [name=]path[:mode]`): its source, the primary tree, named
// MainTree, and the extra trees of World.Trees. Every overlay tree has
// layers of its own under worlds/<name>/trees/<tree>/ (upper, work, merged,
// bases); the primary tree keeps the World's own (upper/, work/, merged/,
// bases/), so a World made before trees existed is a World with one tree.

// MainTree is the name of a World's primary tree (its Source). Paths
// without a NAME: prefix are in it; no extra tree may take the name.
const MainTree = "main"

// TreeMode is how a World sees one of its trees.
type TreeMode string

const (
	// TreeOverlay: the World's changes go to a private upper, like the
	// source's; reviewed and applied per tree. The default.
	TreeOverlay TreeMode = "overlay"
	// TreeReadOnly: seen as it is on the host, read-only (EROFS).
	TreeReadOnly TreeMode = "readonly"
	// TreeShared: read-write straight to the host dir, like a declared
	// shared cache; never in status, snapshots or apply.
	TreeShared TreeMode = "shared"
)

// TreeModes lists the modes, for help and errors.
var TreeModes = []TreeMode{TreeOverlay, TreeReadOnly, TreeShared}

// Tree is one extra tree of a World ([[trees]] in world.toml).
type Tree struct {
	Name string   `toml:"name" json:"name"`
	Path string   `toml:"path" json:"path"`
	Mode TreeMode `toml:"mode" json:"mode"`
}

// ErrInvalidMount is wrapped by every refusal of a --mount value.
var ErrInvalidMount = errors.New("invalid mount")

// ParseMount reads a --mount value: [name=]path[:mode]. The name defaults
// to the path's base name, the mode to overlay. The path is returned as
// written (the engine canonicalises it and checks overlaps).
func ParseMount(s string) (Tree, error) {
	t := Tree{Mode: TreeOverlay}
	rest := s
	if i := strings.IndexByte(rest, '='); i >= 0 && !strings.Contains(rest[:i], "/") {
		t.Name, rest = rest[:i], rest[i+1:]
		if t.Name == "" {
			return t, fmt.Errorf("%w %q: empty name before '='; write NAME=PATH or just PATH", ErrInvalidMount, s)
		}
	} else if i >= 0 && strings.HasPrefix(rest[i+1:], "/") {
		// "../x=/src/game": a name that looks like a path (a path with
		// "=/" in it is too odd to read as one).
		return t, fmt.Errorf("%w %q: tree name %q holds '/': a name is 1-63 characters a-z 0-9 . _ - (write NAME=PATH, e.g. game=%s)", ErrInvalidMount, s, rest[:i], rest[i+1:])
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		m := TreeMode(rest[i+1:])
		if !m.valid() {
			return t, fmt.Errorf("%w %q: mode %q: want %s (a path holding ':' takes its mode spelled out: PATH:overlay)", ErrInvalidMount, s, m, modeList())
		}
		t.Mode, rest = m, rest[:i]
	}
	if rest == "" {
		return t, fmt.Errorf("%w %q: no path; write [NAME=]PATH[:MODE]", ErrInvalidMount, s)
	}
	t.Path = rest
	if t.Name == "" {
		// A base name like UnrealEngine becomes unrealengine: names are
		// lower case, like World names.
		t.Name = strings.ToLower(filepath.Base(filepath.Clean(rest)))
	}
	return t, nil
}

func (m TreeMode) valid() bool {
	for _, v := range TreeModes {
		if m == v {
			return true
		}
	}
	return false
}

func modeList() string {
	s := make([]string, len(TreeModes))
	for i, m := range TreeModes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// Validate checks one tree of a world.toml (or of `new --mount`, after
// canonicalisation): a valid unique name, an absolute clean path, a mode.
func (t Tree) Validate() error {
	switch {
	case !fsx.ValidName(t.Name):
		return fmt.Errorf("%w: tree name %q: use 1-63 characters a-z 0-9 . _ - starting with a letter or digit (write NAME=PATH)", ErrInvalidMount, t.Name)
	case t.Name == MainTree:
		return fmt.Errorf("%w: tree name %q is the World's source; pick another (NAME=PATH)", ErrInvalidMount, t.Name)
	case !filepath.IsAbs(t.Path) || filepath.Clean(t.Path) != t.Path:
		return fmt.Errorf("%w: tree %s: path %q is not a clean absolute path", ErrInvalidMount, t.Name, t.Path)
	case !t.Mode.valid():
		return fmt.Errorf("%w: tree %s: mode %q: want %s", ErrInvalidMount, t.Name, t.Mode, modeList())
	}
	return nil
}

// CheckTrees checks a World's trees together: each valid, names unique,
// and no two trees (the source among them) one inside the other, which
// would put one tree's layer inside another's lower.
func CheckTrees(source string, trees []Tree) error {
	names := map[string]bool{}
	all := []Tree{{Name: MainTree, Path: source}}
	for _, t := range trees {
		if err := t.Validate(); err != nil {
			return err
		}
		if names[t.Name] {
			return fmt.Errorf("%w: two trees are named %q; name one NAME=PATH", ErrInvalidMount, t.Name)
		}
		names[t.Name] = true
		for _, o := range all {
			if Within(t.Path, o.Path) || Within(o.Path, t.Path) {
				return fmt.Errorf("%w: tree %s (%s) and %s (%s) overlap: one lies inside the other; mount each directory once, side by side", ErrInvalidMount, t.Name, t.Path, o.Name, o.Path)
			}
		}
		all = append(all, t)
	}
	return nil
}

// HasTrees reports whether the World sees more than its source.
func (w *World) HasTrees() bool { return len(w.Trees) > 0 }

// FindTree returns the extra tree of that name.
func (w *World) FindTree(name string) (Tree, bool) {
	for _, t := range w.Trees {
		if t.Name == name {
			return t, true
		}
	}
	return Tree{}, false
}

// TreeNames lists the World's overlay trees, the primary first: the trees
// whose changes are reviewed, snapshotted and applied.
func (w *World) TreeNames() []string {
	out := []string{MainTree}
	for _, t := range w.Trees {
		if t.Mode == TreeOverlay {
			out = append(out, t.Name)
		}
	}
	return out
}

// TreeView returns a copy of w that stands for one of its overlay trees:
// Source is the tree's path and View its name, so its layers (Layers,
// Paths.UpperOf...) are the tree's. The primary tree's view is w itself.
func (w *World) TreeView(name string) (*World, error) {
	if name == "" || name == MainTree {
		return w, nil
	}
	t, ok := w.FindTree(name)
	if !ok {
		return nil, w.NoTree(name)
	}
	if t.Mode != TreeOverlay {
		return nil, fmt.Errorf("tree %s of world %q is %s: it has no changes of its own", name, w.Name, t.Mode)
	}
	v := *w
	v.Source = t.Path
	v.View = t.Name
	return &v, nil
}

// ErrNoTree is wrapped by every refusal of a tree name the World lacks
// (a usage mistake: exit 2).
var ErrNoTree = errors.New("no tree")

// NoTree is the refusal of name, a tree w does not have, listing its
// trees.
func (w *World) NoTree(name string) error {
	names := []string{MainTree}
	for _, t := range w.Trees {
		names = append(names, t.Name)
	}
	return fmt.Errorf("%w %s in World %s (its trees: %s)", ErrNoTree, name, w.Name, strings.Join(names, ", "))
}

// UnknownTreePrefix checks a path operand of a World with trees: NAME:rel
// where NAME is no tree of w (SplitTreePath left it whole) and nothing at
// p exists in the source (source) or the source's upper (upper), so it
// cannot be a file named "NAME:rel", is refused with NoTree. A World with
// one tree keeps every operand as a source path.
func (w *World) UnknownTreePrefix(p, upper string) error {
	if !w.HasTrees() || filepath.IsAbs(p) {
		return nil
	}
	name, _, ok := strings.Cut(p, ":")
	if !ok || name == "" || name == MainTree || strings.Contains(name, "/") {
		return nil
	}
	if _, found := w.FindTree(name); found {
		return nil
	}
	for _, root := range []string{w.Source, upper} {
		if root == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p))); err == nil {
			return nil
		}
	}
	return w.NoTree(name)
}

// TreeName is the name of the tree w stands for: View, else MainTree.
func (w *World) TreeName() string {
	if w.View == "" {
		return MainTree
	}
	return w.View
}

// SplitTreePath reads a path operand NAME:rel (a plain relative path is
// in the primary tree, an absolute one in the tree it lies in). Only a known tree name counts as a prefix, so a file
// named "a:b" in the source stays reachable.
func (w *World) SplitTreePath(p string) (tree, rel string) {
	if filepath.IsAbs(p) {
		// An absolute path is in the tree it lies in (kept absolute: the
		// caller makes it relative to that tree's path).
		c := filepath.Clean(p)
		for _, t := range w.Trees {
			if Within(c, t.Path) {
				return t.Name, p
			}
		}
		return MainTree, p
	}
	if name, rest, ok := strings.Cut(p, ":"); ok && !strings.Contains(name, "/") {
		if name == MainTree {
			return MainTree, rest
		}
		if _, found := w.FindTree(name); found {
			return name, rest
		}
	}
	return MainTree, p
}

// TreePath renders rel of tree as the CLI writes it: plain in the primary
// tree, NAME:rel in another.
func TreePath(tree, rel string) string {
	if tree == "" || tree == MainTree {
		return rel
	}
	return tree + ":" + rel
}

// TreesDir holds the layers of a World's extra overlay trees.
func (p Paths) TreesDir(name string) string { return filepath.Join(p.World(name), "trees") }

// Tree is the directory of one extra tree: upper/, work/, merged/, bases/.
func (p Paths) Tree(name, tree string) string { return TreeDirIn(p.World(name), tree) }

// TreeDirIn is the directory of tree in the World directory worldDir (a
// staged one, before it has its name).
func TreeDirIn(worldDir, tree string) string { return filepath.Join(worldDir, "trees", tree) }

// UpperOf is the upper of the tree w stands for (see TreeView).
func (p Paths) UpperOf(w *World) string {
	if w.View == "" {
		return p.Upper(w.Name)
	}
	return filepath.Join(p.Tree(w.Name, w.View), "upper")
}

// WorkOf is the overlay work dir of the tree w stands for.
func (p Paths) WorkOf(w *World) string {
	if w.View == "" {
		return p.Work(w.Name)
	}
	return filepath.Join(p.Tree(w.Name, w.View), "work")
}

// MergedOf is the host mount point of the tree w stands for.
func (p Paths) MergedOf(w *World) string {
	if w.View == "" {
		return p.Merged(w.Name)
	}
	return filepath.Join(p.Tree(w.Name, w.View), "merged")
}

// BasesOf is the base index dir of the tree w stands for.
func (p Paths) BasesOf(w *World) string {
	if w.View == "" {
		return filepath.Join(p.World(w.Name), "bases")
	}
	return filepath.Join(p.Tree(w.Name, w.View), "bases")
}
