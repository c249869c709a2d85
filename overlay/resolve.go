package overlay

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// ErrCrossesSymlink is returned when a path given to Layers resolution has a
// symlink as an intermediate component. Resolution never follows symlinks:
// following one inside a layer could leave the layer roots, and following it
// in the World's view would need the World's absolute path, which Layers
// does not know.
var ErrCrossesSymlink = errors.New("path crosses a symlink")

// node is one resolved path of the World's view.
type node struct {
	rel       string
	upper     string // the entry in the upper, "" if the lower serves it
	upperInfo fs.FileInfo
	marks     dirMarks
	lower     string // the entry in the lower, when the lower serves it
	lowerInfo fs.FileInfo
	content   string // where a file's bytes live (a metacopy upper reads the lower)
	view      string // dirs: the lower dir whose entries show through, "" when none
	viewRel   string
	lowerRel  string // where lower is, relative to the lower root
	// hold closes the descriptors deep paths were anchored to (anchorDir):
	// upper, lower, view and content stay valid until it runs.
	hold *[]func()
}

// close releases what resolving the node held open.
func (n *node) close() {
	if n == nil || n.hold == nil {
		return
	}
	for _, r := range *n.hold {
		r()
	}
	*n.hold = nil
}

// sysPath is where the entry is, as a name for syscalls (maybe anchored).
func (n *node) sysPath() string {
	if n.upperInfo != nil {
		return n.upper
	}
	return n.lower
}

func (n *node) info() fs.FileInfo {
	if n.upperInfo != nil {
		return n.upperInfo
	}
	return n.lowerInfo
}

func (n *node) entry(l Layers) Entry {
	info := n.info()
	e := Entry{
		Path: n.rel, Name: path.Base(n.rel), Type: FileTypeOf(info.Mode()), Mode: info.Mode(),
		Size: info.Size(), ModTime: info.ModTime(), Layer: LayerLower, RealPath: joinReal(l.Lower, n.lowerRel),
	}
	if n.rel == "" {
		e.Name = ""
	}
	if n.upperInfo != nil {
		e.Layer, e.RealPath = LayerUpper, joinReal(l.Upper, n.rel)
	}
	if e.Type == TypeDir {
		e.Size = 0
	}
	if e.Type == TypeSymlink {
		e.Target, _ = os.Readlink(n.sysPath())
	}
	return e
}

func joinReal(root, rel string) string {
	if rel == "" {
		return root
	}
	return root + "/" + rel
}

func (l Layers) rules() (Rules, error) {
	d := l.Dialect
	if d == DialectAuto {
		var err error
		if d, err = DetectDialect(l.Upper); err != nil {
			return Rules{}, err
		}
	}
	r, err := RulesFor(d)
	r.noFileMarks = l.NoFileMarks
	return r, err
}

// cleanWorldPath turns a path of the World's view ("a/b", "/a/b", "." or "")
// into a clean root-relative one, refusing ones that climb out.
func cleanWorldPath(p string) (string, error) {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q leaves the layer root", p)
		}
	}
	return c, nil
}

// resolve walks p through the layers one component at a time with lstat, so
// no symlink is ever followed.
func (l Layers) resolve(op, p string) (*node, Rules, error) {
	r, err := l.rules()
	if err != nil {
		return nil, r, &fs.PathError{Op: op, Path: p, Err: err}
	}
	rel, err := cleanWorldPath(p)
	if err != nil {
		return nil, r, &fs.PathError{Op: op, Path: p, Err: err}
	}
	rootInfo, err := os.Lstat(l.Upper)
	if err != nil {
		return nil, r, &fs.PathError{Op: op, Path: p, Err: err}
	}
	lowerInfo, err := os.Lstat(l.Lower)
	if err != nil {
		return nil, r, &fs.PathError{Op: op, Path: p, Err: err}
	}
	hold := &[]func(){}
	rootMarks, rootOpaqueFile := r.dirMarksCached(l.Upper, rootInfo)
	cur := &node{upper: l.Upper, upperInfo: rootInfo, lower: l.Lower, lowerInfo: lowerInfo, marks: rootMarks, hold: hold}
	if !cur.marks.opaque && !rootOpaqueFile {
		cur.view = l.Lower
	}
	if rel == "" {
		return cur, r, nil
	}
	fail := func(err error) (*node, Rules, error) {
		cur.close()
		return nil, r, &fs.PathError{Op: op, Path: p, Err: err}
	}
	parts := strings.Split(rel, "/")
	for i, name := range parts {
		child, err := l.lookup(r, cur, name)
		if err != nil {
			return fail(err)
		}
		if child == nil {
			return fail(fs.ErrNotExist)
		}
		child.hold = hold
		if i < len(parts)-1 {
			mode := child.info().Mode()
			switch {
			case mode&fs.ModeSymlink != 0:
				return fail(ErrCrossesSymlink)
			case !mode.IsDir():
				return fail(syscall.ENOTDIR)
			}
			// A deep path: name the directories by descriptor from here on.
			for _, dir := range []*string{&child.upper, &child.view} {
				a, release, err := AnchorDir(*dir)
				if err != nil {
					return fail(err)
				}
				*dir = a
				*hold = append(*hold, release)
			}
		}
		cur = child
	}
	return cur, r, nil
}

func (r Rules) hasOpaqueFile(dir string) bool {
	if !r.whNames {
		return false
	}
	for _, name := range []string{whOpaqueFile, whOpaqueChar} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// unionfsHidden reports whether the unionfs-fuse meta tree hides rel.
func (l Layers) unionfsHidden(rel string) bool {
	for _, meta := range UnionfsMetaDirs {
		if _, err := os.Lstat(filepath.Join(l.Upper, filepath.FromSlash(UnionfsHiddenPath(meta, rel)))); err == nil {
			return true
		}
	}
	return false
}

// lookup finds name in the resolved dir parent; nil when the view lacks it.
func (l Layers) lookup(r Rules, parent *node, name string) (*node, error) {
	if kind, _ := r.ClassifyName(name, parent.rel == ""); kind != MarkerPlain {
		return nil, nil // markers and meta trees are not part of the view
	}
	rel := JoinRel(parent.rel, name)
	hidden := r.unionfs && l.unionfsHidden(rel)
	var up fs.FileInfo
	if parent.upper != "" && parent.upperInfo != nil && parent.upperInfo.IsDir() {
		full := filepath.Join(parent.upper, name)
		info, err := lstatMaybe(full)
		if err != nil {
			return nil, err
		}
		if info != nil && r.isWhiteoutNode(full, info) {
			hidden, info = true, nil
		}
		if r.whNames {
			if _, err := os.Lstat(filepath.Join(parent.upper, whiteoutName(name))); err == nil {
				hidden = true
			}
		}
		up = info
	}
	n := &node{rel: rel}
	if up != nil {
		n.upper, n.upperInfo = filepath.Join(parent.upper, name), up
		opaqueFile := false
		if up.IsDir() {
			n.marks, opaqueFile = r.dirMarksCached(n.upper, up)
		} else {
			n.marks = r.readMarks(n.upper, up)
		}
		n.content = n.upper
		origin := ""
		if n.marks.hasRedirect {
			origin = redirectOrigin(parent.rel, parent.view, parent.viewRel, n.marks.redirect)
		}
		var lowerSame string
		if parent.view != "" {
			lowerSame = filepath.Join(parent.view, name)
		}
		switch {
		case up.IsDir():
			switch {
			case n.marks.opaque || hidden || opaqueFile:
			case origin != "" && relInsideRoot(origin):
				if full, info := lowerOrigin(l.Lower, origin); info != nil && info.IsDir() {
					n.view, n.viewRel = full, origin
				}
			case lowerSame != "":
				if info, _ := lstatMaybe(lowerSame); info != nil && info.IsDir() {
					n.view, n.viewRel = lowerSame, JoinRel(parent.viewRel, name)
				}
			}
		case n.marks.metacopy:
			switch {
			case origin != "" && relInsideRoot(origin):
				if full, info := lowerOrigin(l.Lower, origin); info != nil && info.Mode().IsRegular() {
					n.content = full
				} else {
					n.content = "" // the data is gone; opening fails
				}
			case lowerSame != "":
				n.content = lowerSame
			}
		}
		return n, nil
	}
	if hidden || parent.view == "" {
		return nil, nil
	}
	full := filepath.Join(parent.view, name)
	info, err := lstatMaybe(full)
	if err != nil || info == nil {
		return nil, err
	}
	n.lower, n.lowerInfo, n.content, n.lowerRel = full, info, full, JoinRel(parent.viewRel, name)
	if info.IsDir() {
		n.view, n.viewRel = full, JoinRel(parent.viewRel, name)
	}
	return n, nil
}

// Stat resolves path in the World's view from the layers alone, as a mounted
// overlay would: upper first, whiteouts and opaque dirs hiding the lower.
// It has Lstat semantics: a final symlink is described, not followed. A path
// hidden or absent fails with fs.ErrNotExist inside an *fs.PathError; one
// whose intermediate component is a symlink fails with ErrCrossesSymlink.
func (l Layers) Stat(path string) (Entry, error) {
	n, _, err := l.resolve("stat", path)
	if err != nil {
		return Entry{}, err
	}
	defer n.close()
	return n.entry(l), nil
}

// Lstat is Stat: neither follows a final symlink.
func (l Layers) Lstat(path string) (Entry, error) {
	n, _, err := l.resolve("lstat", path)
	if err != nil {
		return Entry{}, err
	}
	defer n.close()
	return n.entry(l), nil
}

// Open opens a file or directory of the World's view for reading. A
// metacopy file is opened at its lower origin, where its data lives. A
// symlink is not followed: opening one fails with ELOOP.
func (l Layers) Open(path string) (*os.File, error) {
	n, _, err := l.resolve("open", path)
	if err != nil {
		return nil, err
	}
	defer n.close()
	info := n.info()
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ELOOP}
	}
	real := n.content
	if info.IsDir() {
		real = n.sysPath()
	}
	if real == "" {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("metacopy data missing from the lower: %w", fs.ErrNotExist)}
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s in world view: %w", path, err)
	}
	return f, nil
}

// ReadFile reads a whole file of the World's view.
func (l Layers) ReadFile(path string) ([]byte, error) {
	f, err := l.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s in world view: %w", path, err)
	}
	return data, nil
}

// Readlink returns the target of a symlink of the World's view.
func (l Layers) Readlink(path string) (string, error) {
	n, _, err := l.resolve("readlink", path)
	if err != nil {
		return "", err
	}
	defer n.close()
	e := n.entry(l)
	if e.Type != TypeSymlink {
		return "", &fs.PathError{Op: "readlink", Path: path, Err: syscall.EINVAL}
	}
	return e.Target, nil
}

// ReadDir lists a directory of the World's view: the upper's entries, then
// the lower's that no whiteout or opaque dir hides, sorted by name, with
// every marker left out.
func (l Layers) ReadDir(path string) ([]Entry, error) {
	n, r, err := l.resolve("readdir", path)
	if err != nil {
		return nil, err
	}
	defer n.close()
	if !n.info().IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: path, Err: syscall.ENOTDIR}
	}
	var entries []Entry
	seen := map[string]bool{}
	whiteouts := map[string]bool{}
	if n.upper != "" {
		ul, err := r.readUpper(n.upper, n.rel == "")
		if err != nil {
			return nil, err
		}
		for name := range ul.whiteouts {
			whiteouts[name] = true
		}
		for _, e := range ul.entries {
			child, err := l.lookup(r, n, e.name)
			if err != nil {
				return nil, fmt.Errorf("readdir %s: %w", path, err)
			}
			if child != nil {
				entries = append(entries, child.entry(l))
				seen[e.name] = true
			}
		}
	}
	if n.view != "" {
		names, err := listLowerNames(n.view)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if seen[name] || whiteouts[name] {
				continue
			}
			child, err := l.lookup(r, n, name)
			if err != nil {
				return nil, fmt.Errorf("readdir %s: %w", path, err)
			}
			if child != nil {
				entries = append(entries, child.entry(l))
			}
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, nil
}
