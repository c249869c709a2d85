package overlay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/stratahq/strata/fsx"
)

// ReadOptions tune ReadChanges.
type ReadOptions struct {
	Ignore         *Ignore // nil means DefaultIgnore()
	IncludeIgnored bool    // report ignored paths with Change.Ignored set
	SkipCompare    bool    // don't byte-compare copied-up files with the lower: faster, but no-op copy-ups are reported as Modified
}

// changeModeBits are the permission bits a change compares and replays.
const changeModeBits = fsx.PermBits

// ReadChanges reads the upper layer of l into the sorted set of changes
// between the World's view and the lower tree. Its cost grows with the upper
// layer: the lower is only looked up for the paths the upper names, except
// under a directory that hides lower content (opaque, deleted, redirected,
// or a dir that became a file), whose hidden lower paths are listed one by
// one as Deleted so a reviewer sees every file that disappears.
//
// A copied-up file whose type, mode and content equal the lower's is not a
// change, nor is a copied-up directory that only holds changes; a mode-only
// change is Modified. Whiteout markers, meta trees, .fuse_hidden* files and
// bookkeeping xattrs are never reported.
func ReadChanges(ctx context.Context, l Layers, opts ReadOptions) (*ChangeSet, error) {
	dialect := l.Dialect
	if dialect == DialectAuto {
		d, err := DetectDialect(l.Upper)
		if err != nil {
			return nil, fmt.Errorf("read changes: %w", err)
		}
		dialect = d
	}
	r, err := RulesFor(dialect)
	if err != nil {
		return nil, fmt.Errorf("read changes of %s: %w", l.Upper, err)
	}
	r.noFileMarks = l.NoFileMarks
	rd := &reader{ctx: ctx, l: l, rules: r, opts: opts, ignore: opts.Ignore, workers: make(chan struct{}, max(0, runtime.GOMAXPROCS(0)-1))}
	if rd.ignore == nil {
		rd.ignore = DefaultIgnore()
	}
	rootInfo, err := os.Lstat(l.Upper)
	if err != nil {
		return nil, fmt.Errorf("read upper %s: %w", l.Upper, err)
	}
	if !rootInfo.IsDir() {
		return nil, fmt.Errorf("read upper %s: %w", l.Upper, syscall.ENOTDIR)
	}
	if info, err := os.Lstat(l.Lower); err != nil {
		return nil, fmt.Errorf("read lower %s: %w", l.Lower, err)
	} else if !info.IsDir() {
		return nil, fmt.Errorf("read lower %s: %w", l.Lower, syscall.ENOTDIR)
	}
	if r.unionfs {
		if err := rd.loadUnionfsHidden(); err != nil {
			return nil, err
		}
	}
	marks := r.readMarks(l.Upper, rootInfo)
	root := dirCtx{upper: l.Upper, view: l.Lower, base: l.Lower, forceOpaque: marks.opaque}
	if _, err := rd.walk(root); err != nil {
		return nil, err
	}
	sort.Slice(rd.changes, func(i, j int) bool { return rd.changes[i].Path < rd.changes[j].Path })
	for i := 1; i < len(rd.changes); i++ {
		if rd.changes[i].Path == rd.changes[i-1].Path {
			return nil, fmt.Errorf("read changes of %s: path %q reported twice", l.Upper, rd.changes[i].Path)
		}
	}
	return &ChangeSet{Dialect: dialect, Changes: rd.changes}, nil
}

type reader struct {
	ctx    context.Context
	l      Layers
	rules  Rules
	opts   ReadOptions
	ignore *Ignore

	// unionfs-fuse: dir -> hidden name -> the marker is a dir; and
	// dir -> child dir names with markers somewhere below.
	hidden      map[string]map[string]bool
	hiddenBelow map[string]map[string]bool

	changes    []Change
	bufA, bufB []byte

	// workers are the tokens of the extra goroutines that walk sibling
	// directories at once (GOMAXPROCS-1: the walk is mostly lstat and
	// listxattr, a syscall per entry, so a 100,000-change upper is CPU
	// bound in the kernel). Shared by every sub-reader of one ReadChanges.
	workers chan struct{}
}

// sub is a reader for one subtree walked on another goroutine: the same
// layers, rules and read-only maps, its own changes and buffers.
func (rd *reader) sub() *reader {
	return &reader{
		ctx: rd.ctx, l: rd.l, rules: rd.rules, opts: rd.opts, ignore: rd.ignore,
		hidden: rd.hidden, hiddenBelow: rd.hiddenBelow, workers: rd.workers,
	}
}

// dirCtx is one directory of the World's view during the walk.
type dirCtx struct {
	rel         string // "" for the root
	upper       string // the dir in the upper layer, "" when the upper has none
	view        string // the lower dir whose entries show through, "" when none
	viewRel     string // view relative to the lower root
	base        string // the lower dir at rel, "" when the lower has none
	forceOpaque bool   // hides the lower whatever the dir's own markers say
	opaque      bool   // changes here lie under a replaced directory
	ignored     bool   // rel is ignored
}

type walkResult struct {
	opaque bool // the dir hides its lower content
	hidden int  // lower entries it hides, listed as Deleted
}

// upperList is one upper directory with the markers taken out.
type upperList struct {
	entries   []upperEntry
	names     map[string]bool
	whiteouts map[string]bool
	opaque    bool
}

type upperEntry struct {
	name  string
	full  string
	info  fs.FileInfo
	marks dirMarks
}

func (r Rules) readUpper(dir string, atRoot bool) (upperList, error) {
	ul := upperList{names: map[string]bool{}, whiteouts: map[string]bool{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ul, fmt.Errorf("read upper dir %s: %w", dir, err)
	}
	for _, e := range entries {
		kind, name := r.ClassifyName(e.Name(), atRoot)
		switch kind {
		case MarkerSkip:
			continue
		case MarkerOpaque:
			ul.opaque = true
			continue
		case MarkerWhiteout:
			ul.whiteouts[name] = true
			continue
		}
		full := fsJoin(dir, name)
		info, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return ul, fmt.Errorf("read upper entry: %w", err)
		}
		if r.isWhiteoutNode(full, info) {
			ul.whiteouts[name] = true
			continue
		}
		ul.entries = append(ul.entries, upperEntry{name: name, full: full, info: info, marks: r.readMarks(full, info)})
		ul.names[name] = true
	}
	return ul, nil
}

func JoinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// lstatMaybe is Lstat that reads a missing path as nil.
func lstatMaybe(p string) (fs.FileInfo, error) {
	if p == "" {
		return nil, nil
	}
	info, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	return info, err
}

func (rd *reader) emit(c Change, ignored bool) {
	if ignored {
		if !rd.opts.IncludeIgnored {
			return
		}
		c.Ignored = true
	}
	rd.changes = append(rd.changes, c)
}

// viewEntry is one entry of the World's view inside a directory: from the
// upper, or showing through from the view's lower dir.
type viewEntry struct {
	name      string
	full      string
	info      fs.FileInfo
	fromUpper bool
	marks     dirMarks
	whiteout  bool // the upper also holds a whiteout for this name (same-layer delete and recreate)
}

func (rd *reader) walk(dc dirCtx) (walkResult, error) {
	var res walkResult
	if err := rd.ctx.Err(); err != nil {
		return res, err
	}
	release, err := anchorDirCtx(&dc)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", dc.rel, err)
	}
	defer release()
	var ul upperList
	if dc.upper != "" {
		var err error
		if ul, err = rd.rules.readUpper(dc.upper, dc.rel == ""); err != nil {
			return res, err
		}
	} else {
		ul = upperList{names: map[string]bool{}, whiteouts: map[string]bool{}}
	}
	for name := range rd.hidden[dc.rel] {
		ul.whiteouts[name] = true
	}
	if ul.opaque || dc.forceOpaque {
		res.opaque = true
		dc.view, dc.viewRel = "", ""
		if dc.base != "" {
			dc.opaque = true
		}
	}

	entries := make([]viewEntry, 0, len(ul.entries))
	for _, e := range ul.entries {
		entries = append(entries, viewEntry{name: e.name, full: e.full, info: e.info, fromUpper: true, marks: e.marks, whiteout: ul.whiteouts[e.name]})
	}
	same := dc.view == dc.base
	if !same && dc.view != "" {
		names, err := listLowerNames(dc.view)
		if err != nil {
			return res, err
		}
		for _, name := range names {
			if ul.names[name] || ul.whiteouts[name] {
				continue
			}
			full := fsJoin(dc.view, name)
			info, err := lstatMaybe(full)
			if err != nil {
				return res, fmt.Errorf("read lower entry: %w", err)
			}
			if info != nil {
				entries = append(entries, viewEntry{name: name, full: full, info: info})
			}
		}
	}

	if same {
		// The lower shows through unchanged except where the upper says otherwise.
		for name := range ul.whiteouts {
			if ul.names[name] || dc.base == "" {
				continue
			}
			full := fsJoin(dc.base, name)
			info, err := lstatMaybe(full)
			if err != nil {
				return res, fmt.Errorf("read lower entry: %w", err)
			}
			if info != nil {
				rel := JoinRel(dc.rel, name)
				if err := rd.emitDeleted(rel, full, info, true, dc.opaque, rd.ignored(dc, rel, info.IsDir())); err != nil {
					return res, err
				}
			}
		}
		for name := range rd.hiddenBelow[dc.rel] {
			if ul.names[name] || ul.whiteouts[name] || dc.base == "" {
				continue
			}
			full := fsJoin(dc.base, name)
			info, err := lstatMaybe(full)
			if err != nil {
				return res, fmt.Errorf("read lower entry: %w", err)
			}
			if info == nil || !info.IsDir() {
				continue
			}
			rel := JoinRel(dc.rel, name)
			ignored := rd.ignored(dc, rel, true)
			if ignored && !rd.opts.IncludeIgnored {
				continue
			}
			child := dirCtx{rel: rel, view: full, viewRel: JoinRel(dc.viewRel, name), base: full, opaque: dc.opaque, ignored: ignored}
			if _, err := rd.walk(child); err != nil {
				return res, err
			}
		}
	} else if dc.base != "" {
		// The lower at this path is hidden, in part or whole: each lower
		// entry the view lacks is deleted.
		inView := make(map[string]bool, len(entries))
		for _, e := range entries {
			inView[e.name] = true
		}
		names, err := listLowerNames(dc.base)
		if err != nil {
			return res, err
		}
		for _, name := range names {
			if inView[name] {
				continue
			}
			full := fsJoin(dc.base, name)
			info, err := lstatMaybe(full)
			if err != nil {
				return res, fmt.Errorf("read lower entry: %w", err)
			}
			if info == nil {
				continue
			}
			res.hidden++
			rel := JoinRel(dc.rel, name)
			if err := rd.emitDeleted(rel, full, info, ul.whiteouts[name], dc.opaque, rd.ignored(dc, rel, info.IsDir())); err != nil {
				return res, err
			}
		}
	}

	// Directories go to a free worker when there is one, else are walked
	// here; changes are sorted at the end, so their order does not matter.
	var wg sync.WaitGroup
	var subs []*reader
	errs := make([]error, len(entries))
	for i, e := range entries {
		if e.info.IsDir() {
			select {
			case rd.workers <- struct{}{}:
				sub := rd.sub()
				subs = append(subs, sub)
				wg.Add(1)
				go func() {
					defer func() { <-rd.workers; wg.Done() }()
					errs[i] = sub.compare(dc, e)
				}()
				continue
			default:
			}
		}
		if errs[i] = rd.compare(dc, e); errs[i] != nil {
			break
		}
	}
	wg.Wait()
	for _, sub := range subs {
		rd.changes = append(rd.changes, sub.changes...)
	}
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// anchorDirCtx re-anchors the directories of a deep dirCtx (see
// AnchorDir). view and base stay equal when they were: the walk compares them.
func anchorDirCtx(dc *dirCtx) (func(), error) {
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	anchor := func(p *string) error {
		a, r, err := AnchorDir(*p)
		if err != nil {
			return err
		}
		*p = a
		releases = append(releases, r)
		return nil
	}
	same := dc.view == dc.base
	for _, p := range []*string{&dc.upper, &dc.view, &dc.base} {
		if p == &dc.base && same {
			dc.base = dc.view
			continue
		}
		if err := anchor(p); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}

func (rd *reader) ignored(dc dirCtx, rel string, isDir bool) bool {
	return dc.ignored || rd.ignore.matchOne(rel, isDir)
}

func listLowerNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("read lower dir: %w", err)
	}
	defer func() { _ = f.Close() }()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read lower dir %s: %w", dir, err)
	}
	sort.Strings(names)
	return names, nil
}

// compare reports one view entry against the lower entry at the same path.
func (rd *reader) compare(dc dirCtx, e viewEntry) error {
	rel := JoinRel(dc.rel, e.name)
	isDir := e.info.IsDir()
	ignored := rd.ignored(dc, rel, isDir)
	if ignored && !rd.opts.IncludeIgnored {
		return nil
	}
	basePath := ""
	if dc.base != "" {
		basePath = fsJoin(dc.base, e.name)
	}
	baseInfo, err := lstatMaybe(basePath)
	if err != nil {
		return fmt.Errorf("read lower entry: %w", err)
	}
	c := Change{
		Path:   rel,
		Type:   FileTypeOf(e.info.Mode()),
		Mode:   e.info.Mode(),
		Size:   e.info.Size(),
		Opaque: dc.opaque,
	}
	if baseInfo != nil {
		c.LowerType = FileTypeOf(baseInfo.Mode())
	}
	if c.Type == TypeDir {
		c.Size = 0
	}
	if c.Type == TypeSymlink {
		target, err := os.Readlink(e.full)
		if err != nil {
			return fmt.Errorf("read symlink: %w", err)
		}
		c.Target = target
	}
	if e.fromUpper && e.marks.hasRedirect {
		c.Note = "moved from " + rd.redirectOrigin(dc, e.marks.redirect) + " (overlay redirect)"
	}

	switch {
	case baseInfo == nil:
		c.Kind = Added
	case c.Type != c.LowerType:
		c.Kind = TypeChanged
		if baseInfo.IsDir() {
			// The lower dir and all below it are gone from the view.
			if err := rd.emitChildrenDeleted(rel, basePath, e.whiteout, dc.opaque, ignored); err != nil {
				return err
			}
		}
	}

	if isDir {
		child := dirCtx{rel: rel, opaque: dc.opaque, ignored: ignored}
		if e.fromUpper {
			child.upper = e.full
			_, unionHidden := rd.hidden[dc.rel][e.name]
			child.forceOpaque = e.marks.opaque || e.whiteout || unionHidden
		}
		switch {
		case e.fromUpper && e.marks.hasRedirect:
			origin := rd.redirectOrigin(dc, e.marks.redirect)
			if full, info := lowerOrigin(rd.l.Lower, origin); info != nil && info.IsDir() {
				child.view, child.viewRel = full, origin
			}
		case dc.view != "":
			full := fsJoin(dc.view, e.name)
			switch {
			case !e.fromUpper:
				child.view, child.viewRel = full, JoinRel(dc.viewRel, e.name)
			case dc.view == dc.base:
				if baseInfo != nil && baseInfo.IsDir() {
					child.view, child.viewRel = full, JoinRel(dc.viewRel, e.name)
				}
			default:
				if info, _ := lstatMaybe(full); info != nil && info.IsDir() {
					child.view, child.viewRel = full, JoinRel(dc.viewRel, e.name)
				}
			}
		}
		if baseInfo != nil && baseInfo.IsDir() {
			child.base = basePath
		}
		res, err := rd.walk(child)
		if err != nil {
			return err
		}
		if c.Kind == 0 {
			replaced := res.opaque && child.base != ""
			if replaced {
				c.Opaque = true
			}
			switch {
			case e.info.Mode()&changeModeBits != baseInfo.Mode()&changeModeBits:
				c.Kind = Modified
			case replaced && res.hidden > 0:
				c.Kind, c.Note = Modified, "replaced: lower contents hidden (opaque)"
			case c.Note != "":
				c.Kind = Modified
			}
		}
		if c.Kind != 0 {
			rd.emit(c, ignored)
		}
		return nil
	}

	if c.Kind == 0 {
		changed, err := rd.sameTypeChanged(dc, e, basePath, baseInfo, c.Target)
		if err != nil {
			return err
		}
		if !changed && c.Note == "" {
			return nil
		}
		c.Kind = Modified
	}
	rd.emit(c, ignored)
	return nil
}

// sameTypeChanged compares a non-dir view entry with a lower entry of the
// same type.
func (rd *reader) sameTypeChanged(dc dirCtx, e viewEntry, basePath string, baseInfo fs.FileInfo, target string) (bool, error) {
	switch FileTypeOf(e.info.Mode()) {
	case TypeSymlink:
		baseTarget, err := os.Readlink(basePath)
		if err != nil {
			return false, fmt.Errorf("read lower symlink: %w", err)
		}
		return baseTarget != target, nil
	case TypeOther:
		if e.info.Mode() != baseInfo.Mode() {
			return true, nil
		}
		a, okA := e.info.Sys().(*syscall.Stat_t)
		b, okB := baseInfo.Sys().(*syscall.Stat_t)
		return okA && okB && a.Rdev != b.Rdev, nil
	}
	if e.info.Mode()&changeModeBits != baseInfo.Mode()&changeModeBits || e.info.Size() != baseInfo.Size() {
		return true, nil
	}
	content := e.full
	if e.fromUpper && e.marks.metacopy {
		// Data still lives in the lower: at the redirect origin, else at
		// the same path in the view's lower dir.
		switch {
		case e.marks.hasRedirect:
			full, info := lowerOrigin(rd.l.Lower, rd.redirectOrigin(dc, e.marks.redirect))
			if info == nil || !info.Mode().IsRegular() {
				return true, nil // the data is gone: report it rather than guess
			}
			content = full
		case dc.view != "":
			content = fsJoin(dc.view, e.name)
			if info, _ := lstatMaybe(content); info == nil || !info.Mode().IsRegular() {
				return true, nil
			}
		}
	}
	if content == basePath {
		return false, nil
	}
	if e.fromUpper && rd.opts.SkipCompare {
		return true, nil
	}
	same, err := rd.sameContent(content, basePath)
	return !same, err
}

// redirectOrigin turns an overlay.redirect value into a lower-relative path:
// absolute values count from the layer root, relative ones from the lower
// dir the parent shows.
func (rd *reader) redirectOrigin(dc dirCtx, value string) string {
	return redirectOrigin(dc.rel, dc.view, dc.viewRel, value)
}

func redirectOrigin(parentRel, parentView, parentViewRel, value string) string {
	if strings.HasPrefix(value, "/") {
		return strings.Trim(path.Clean(value), "/")
	}
	parent := parentViewRel
	if parentView == "" {
		parent = parentRel
	}
	return strings.Trim(path.Clean(JoinRel(parent, value)), "/")
}

// lowerOrigin finds a redirect origin in the lower without following any
// symlink on the way, as the kernel does; a nil info means there is none.
func lowerOrigin(lower, rel string) (string, fs.FileInfo) {
	if !relInsideRoot(rel) {
		return "", nil
	}
	full := lower
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		full = fsJoin(full, part)
		info, err := os.Lstat(full)
		if err != nil {
			return "", nil
		}
		if i == len(parts)-1 {
			return full, info
		}
		if !info.IsDir() {
			return "", nil
		}
	}
	return "", nil
}

func relInsideRoot(rel string) bool {
	return rel != "" && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !strings.HasPrefix(rel, "/")
}

func (rd *reader) sameContent(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, fmt.Errorf("compare with lower: %w", err)
	}
	defer func() { _ = fa.Close() }()
	fb, err := os.Open(b)
	if err != nil {
		return false, fmt.Errorf("compare with lower: %w", err)
	}
	defer func() { _ = fb.Close() }()
	if rd.bufA == nil {
		rd.bufA, rd.bufB = make([]byte, 64<<10), make([]byte, 64<<10)
	}
	for {
		na, errA := io.ReadFull(fa, rd.bufA)
		nb, errB := io.ReadFull(fb, rd.bufB)
		if na != nb || !bytes.Equal(rd.bufA[:na], rd.bufB[:nb]) {
			return false, nil
		}
		endA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		endB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		if errA != nil && !endA {
			return false, fmt.Errorf("compare %s: %w", a, errA)
		}
		if errB != nil && !endB {
			return false, fmt.Errorf("compare %s: %w", b, errB)
		}
		if endA || endB {
			return endA == endB, nil
		}
	}
}

// emitDeleted reports a lower path as Deleted, and for a dir every lower path
// under it too.
func (rd *reader) emitDeleted(rel, full string, info fs.FileInfo, whiteout, opaque, ignored bool) error {
	if ignored && !rd.opts.IncludeIgnored {
		return nil
	}
	c := Change{
		Path: rel, Kind: Deleted, Type: FileTypeOf(info.Mode()), LowerType: FileTypeOf(info.Mode()),
		Mode: info.Mode(), Size: info.Size(), Whiteout: whiteout, Opaque: opaque,
	}
	if c.Type == TypeDir {
		c.Size = 0
	}
	if c.Type == TypeSymlink {
		c.Target, _ = os.Readlink(full)
	}
	rd.emit(c, ignored)
	if info.IsDir() {
		return rd.emitChildrenDeleted(rel, full, whiteout, opaque, ignored)
	}
	return nil
}

func (rd *reader) emitChildrenDeleted(rel, full string, whiteout, opaque, ignored bool) error {
	if err := rd.ctx.Err(); err != nil {
		return err
	}
	full, release, err := AnchorDir(full)
	if err != nil {
		return fmt.Errorf("read lower dir %s: %w", rel, err)
	}
	defer release()
	names, err := listLowerNames(full)
	if err != nil {
		return err
	}
	for _, name := range names {
		childFull := fsJoin(full, name)
		info, err := lstatMaybe(childFull)
		if err != nil {
			return fmt.Errorf("read lower entry: %w", err)
		}
		if info == nil {
			continue
		}
		childRel := JoinRel(rel, name)
		childIgnored := ignored || rd.ignore.matchOne(childRel, info.IsDir())
		if err := rd.emitDeleted(childRel, childFull, info, whiteout, opaque, childIgnored); err != nil {
			return err
		}
	}
	return nil
}

// loadUnionfsHidden reads the unionfs-fuse meta trees: PATH_HIDDEN~ files
// hide a file, dirs hide a dir (and make it opaque when the upper holds it).
func (rd *reader) loadUnionfsHidden() error {
	rd.hidden = map[string]map[string]bool{}
	rd.hiddenBelow = map[string]map[string]bool{}
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("read unionfs meta dir %s: %w", dir, err)
		}
		for _, e := range entries {
			name := e.Name()
			if target, ok := UnionfsHiddenTarget(name); ok {
				if rd.hidden[rel] == nil {
					rd.hidden[rel] = map[string]bool{}
				}
				rd.hidden[rel][target] = rd.hidden[rel][target] || e.IsDir()
				rd.markHiddenBelow(rel)
				continue
			}
			if e.IsDir() {
				if err := walk(filepath.Join(dir, name), JoinRel(rel, name)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, meta := range UnionfsMetaDirs {
		dir := filepath.Join(rd.l.Upper, meta)
		if info, err := os.Lstat(dir); err == nil && info.IsDir() {
			if err := walk(dir, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

func (rd *reader) markHiddenBelow(rel string) {
	for rel != "" {
		parent, name := "", rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			parent, name = rel[:i], rel[i+1:]
		}
		if rd.hiddenBelow[parent] == nil {
			rd.hiddenBelow[parent] = map[string]bool{}
		}
		rd.hiddenBelow[parent][name] = true
		rel = parent
	}
}

// String renders a change in one stable line, the format of the test
// corpora's expected.txt: kind letter, type, octal mode, size, quoted path,
// then the target, lower type, flags and note when present.
func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %04o %d %s", c.Kind.Letter(), c.Type, fsx.UnixMode(c.Mode), c.Size, strconv.Quote(c.Path))
	if c.Type == TypeSymlink {
		b.WriteString(" -> " + strconv.Quote(c.Target))
	}
	if c.Kind == TypeChanged {
		b.WriteString(" from=" + c.LowerType.String())
	}
	if c.Whiteout {
		b.WriteString(" whiteout")
	}
	if c.Opaque {
		b.WriteString(" opaque")
	}
	if c.Ignored {
		b.WriteString(" ignored")
	}
	if c.Note != "" {
		b.WriteString(" note=" + strconv.Quote(c.Note))
	}
	return b.String()
}

// fsJoin appends one name to a dir path. Names from a directory listing are
// single components, so the cleaning filepath.Join does is wasted in the hot
// loop.
func fsJoin(dir, name string) string { return dir + "/" + name }
