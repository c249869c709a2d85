package publish

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/store"
)

// PublishPathError is a publication that failed making one path's new
// entry (before the commit: the tree is untouched), so that a caller can
// name the path, e.g. when the source's file system is full.
type PublishPathError struct {
	Kind OpKind
	Root string // the tree published to
	Path string // relative to Root
	Err  error
}

func (e *PublishPathError) Error() string { return fmt.Sprintf("%s %s: %v", e.Kind, e.Path, e.Err) }
func (e *PublishPathError) Unwrap() error { return e.Err }

// OpKind is what a PublishOp does to its path.
type OpKind uint8

const (
	OpWrite   OpKind = iota + 1 // write a regular file (Data or SourceFile)
	OpSymlink                   // create a symlink to Target
	OpMkdir                     // create a directory (or set an existing one's mode)
	OpDelete                    // remove a file or symlink
	OpRmdir                     // remove a directory emptied by this publication's other ops
)

var opKindNames = [...]string{OpWrite: "write", OpSymlink: "symlink", OpMkdir: "mkdir", OpDelete: "delete", OpRmdir: "rmdir"}

func (k OpKind) String() string {
	if int(k) < len(opKindNames) && opKindNames[k] != "" {
		return opKindNames[k]
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

func (k OpKind) removes() bool { return k == OpDelete || k == OpRmdir }

// PublishOp is one change to publish. A path may carry at most two ops: one
// removal (OpDelete/OpRmdir) and one creation, which together change its type.
type PublishOp struct {
	Path string // slash-separated, relative to the root
	Kind OpKind
	// Data is the content of an OpWrite, unless SourceFile names a regular
	// file (opened without following a symlink) to copy it from.
	// A SourceFile is copied sparsely: its holes and all-zero blocks stay
	// unallocated in the new file.
	Data       []byte
	SourceFile string
	Mode       fs.FileMode // permission (and setuid/setgid/sticky) bits; 0 means 0644 / 0755
	Target     string      // OpSymlink
	// ExpectHash, when set, is the sha256 hex Path must hold at publication
	// time (a file's content, a symlink's target string), else the whole
	// publication fails with *StaleError. ExpectAbsent demands Path not exist.
	ExpectHash   string
	ExpectAbsent bool
	// ContentHash, when set, is the sha256 hex an OpWrite's new file must
	// hold: the staged temp is read back and hashed before the commit, and a
	// mismatch (a SourceFile that changed since the caller hashed it) fails
	// the whole publication with *ContentError; nothing is written.
	ContentHash string
}

// SyncMode chooses how a publication makes its files durable.
type SyncMode uint8

const (
	// SyncPerFile fsyncs each new file and each touched directory, several
	// at a time. Its cost is bounded by the publication's own data; measured
	// as fast as or faster than SyncFS for 1,000 files (BenchmarkPublish1000).
	SyncPerFile SyncMode = iota
	// SyncFS calls syncfs once on the root's filesystem before the commit and
	// once after the renames; it also flushes whatever else is dirty there
	// (other Worlds' builds), so its cost is not the publication's to bound.
	SyncFS
)

// PublishOptions tunes Publish; the zero value is the production setting.
type PublishOptions struct {
	Sync SyncMode
	// DirMode is the mode of parent directories created implicitly (0: 0755).
	DirMode fs.FileMode
}

// PublishResult counts what a publication changed.
type PublishResult struct {
	ID       string
	Written  int // files written
	Linked   int // symlinks created
	MadeDirs int // directories created or re-moded
	Deleted  int // files and symlinks removed
	RmDirs   int // directories removed
	// Unchanged lists op paths needing nothing (removing an absent path).
	Unchanged []string
	// Recovered reports earlier unfinished publications to the root that
	// were completed first.
	Recovered []RecoveryReport
}

// StaleError rejects a publication whose ExpectHash/ExpectAbsent checks
// failed: the source changed since the caller looked. Nothing was written.
type StaleError struct {
	Paths []StalePath
}

// StalePath is one failed expectation; Got is "absent", "dir" or a hash.
type StalePath struct {
	Path, Want, Got string
}

func (e *StaleError) Error() string {
	parts := make([]string, 0, len(e.Paths))
	for _, p := range e.Paths {
		parts = append(parts, fmt.Sprintf("%s (want %s, found %s)", p.Path, store.ShortHash(p.Want), store.ShortHash(p.Got)))
	}
	return "source changed since it was read: " + strings.Join(parts, "; ")
}

// publishHook is called with a running step count at every durable step of a
// publication or recovery; nil in production, set by the crash tests.
var publishHook func(step int)

// publishTestHook is called at named stages ("validated", "planned", "created",
// "prepared", "committed") so tests can change the tree at a precise moment.
var publishTestHook func(stage string)

func testStage(stage string) {
	if h := publishTestHook; h != nil {
		h(stage)
	}
}

// Publish applies ops to the tree at root as one unit: after Publish returns,
// or after Recover following a crash, the tree holds either none or all of
// them. New contents are written beside their targets (new directories are
// built whole under a temp name), made durable, listed in a journal in
// journalDir whose fsynced appearance is the commit, then renamed into place.
// Nothing is read or written through a symlink or outside root. A failure
// before the commit leaves the tree untouched; after it, the error wraps
// ErrIncomplete and Recover completes the publication. Unfinished earlier
// publications to the root are completed first (PublishResult.Recovered).
func Publish(ctx context.Context, root, journalDir string, ops []PublishOp, opts PublishOptions) (*PublishResult, error) {
	root, err := fsx.CanonicalDir(root)
	if err != nil {
		return nil, fmt.Errorf("publish: root: %w", err)
	}
	if err := os.MkdirAll(journalDir, 0o700); err != nil {
		return nil, fmt.Errorf("publish: journal dir: %w", err)
	}
	journalDir, err = fsx.CanonicalDir(journalDir)
	if err != nil {
		return nil, fmt.Errorf("publish: journal dir: %w", err)
	}
	byPath, err := validateOps(root, journalDir, ops)
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", root, err)
	}
	unlock, err := LockRoot(ctx, RootLockPath(journalDir, root))
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", root, err)
	}
	defer unlock()

	step := newStepper()
	res := &PublishResult{}
	// An earlier publication that died must finish before this one looks at
	// the tree, or this one's expectations would be checked against a mix.
	res.Recovered, err = recoverRootLocked(ctx, journalDir, root, step)
	if err != nil {
		return res, fmt.Errorf("publish to %s: finish earlier publication: %w", root, err)
	}
	testStage("validated")
	if len(ops) == 0 {
		return res, nil
	}

	p := &publication{
		ctx: ctx, root: root, journalDir: journalDir, ops: ops, byPath: byPath, opts: opts, res: res, step: step,
		dirs: map[string]*pubDir{}, missing: map[string]*newDir{}, absent: map[string]bool{},
	}
	if p.opts.DirMode == 0 {
		p.opts.DirMode = 0o755
	}
	p.id, err = newPublicationID(root)
	if err != nil {
		return res, err
	}
	res.ID = p.id
	defer p.closeDirs()
	if err := p.run(); err != nil {
		return res, fmt.Errorf("publish to %s: %w", root, err)
	}
	return res, nil
}

func newPublicationID(root string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("publication id: %w", err)
	}
	return rootHash(root) + "-" + hex.EncodeToString(b[:]), nil
}

// pathOps is what the ops say about one path.
type pathOps struct {
	remove, create *PublishOp
}

// validateOps checks the op set without touching the tree: paths, kinds,
// duplicates and whether ops on a path and its ancestors fit together.
func validateOps(root, journalDir string, ops []PublishOp) (map[string]*pathOps, error) {
	journalRel := ""
	if rel, err := filepath.Rel(root, journalDir); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		journalRel = filepath.ToSlash(rel) // the journal lives inside the root
	}
	byPath := make(map[string]*pathOps, len(ops))
	for i := range ops {
		op := &ops[i]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("op %d (%s %q): %s", i, op.Kind, op.Path, fmt.Sprintf(format, args...))
		}
		if err := overlay.ValidateRelPath(op.Path); err != nil {
			return nil, fmt.Errorf("op %d (%s): %w", i, op.Kind, err)
		}
		for _, comp := range strings.Split(op.Path, "/") {
			if strings.HasPrefix(comp, pubTempPrefix) {
				return nil, fmt.Errorf("op %d (%s): %w %q: %s* names are reserved for publication temps", i, op.Kind, overlay.ErrInvalidPath, op.Path, pubTempPrefix)
			}
		}
		if journalRel != "" && (journalRel == "." || op.Path == journalRel || strings.HasPrefix(op.Path, journalRel+"/") || strings.HasPrefix(journalRel, op.Path+"/")) {
			return nil, fmt.Errorf("op %d (%s): %w %q: touches the journal directory", i, op.Kind, overlay.ErrInvalidPath, op.Path)
		}
		switch op.Kind {
		case OpWrite, OpMkdir, OpDelete, OpRmdir:
		case OpSymlink:
			if op.Target == "" || strings.IndexByte(op.Target, 0) >= 0 {
				return nil, bad("symlink target empty or contains NUL")
			}
		default:
			return nil, bad("unknown op kind")
		}
		if op.Mode&^fsx.PermBits != 0 {
			return nil, bad("mode %v has type bits", op.Mode)
		}
		if op.ExpectAbsent && op.ExpectHash != "" {
			return nil, bad("both ExpectHash and ExpectAbsent")
		}
		po := byPath[op.Path]
		if po == nil {
			po = &pathOps{}
			byPath[op.Path] = po
		}
		slot := &po.create
		if op.Kind.removes() {
			slot = &po.remove
		}
		if *slot != nil {
			return nil, bad("duplicate path (already %s)", (*slot).Kind)
		}
		*slot = op
		if po.remove != nil && po.create != nil && po.remove.Kind == OpRmdir && po.create.Kind == OpMkdir {
			return nil, bad("rmdir and mkdir of the same directory")
		}
	}
	for p, po := range byPath {
		for a := parentRel(p); a != "."; a = parentRel(a) {
			anc := byPath[a]
			if anc == nil {
				continue
			}
			if po.create == nil && !anc.holdsOldDir() {
				return nil, fmt.Errorf("%w: %q is removed but its ancestor %q is not a directory here", overlay.ErrInvalidPath, p, a)
			}
			if po.create != nil && !anc.holdsNewDir() {
				return nil, fmt.Errorf("%w: %q is created but its ancestor %q will not be a directory", overlay.ErrInvalidPath, p, a)
			}
			if po.remove != nil && po.create != nil && anc.remove != nil && anc.remove.Kind == OpRmdir {
				return nil, fmt.Errorf("%w: %q is recreated inside %q, which is removed", overlay.ErrInvalidPath, p, a)
			}
		}
	}
	return byPath, nil
}

// holdsOldDir reports whether a path with these ops is, during the
// removals, the directory its removed descendants are in.
func (po *pathOps) holdsOldDir() bool {
	if po.remove != nil {
		return po.remove.Kind == OpRmdir
	}
	return po.create == nil || po.create.Kind == OpMkdir
}

// holdsNewDir reports whether a path with these ops is, afterwards, a
// directory its created descendants can live in.
func (po *pathOps) holdsNewDir() bool {
	if po.create != nil {
		return po.create.Kind == OpMkdir
	}
	return po.remove == nil || po.remove.Kind == OpDelete
}

func parentRel(rel string) string {
	d, _ := overlay.SplitRel(rel)
	return d
}

func relDepth(rel string) int { return strings.Count(rel, "/") }

// pubDir is an existing directory of the tree held open for the publication.
type pubDir struct {
	fd       int
	dev, ino uint64
	gotTemps bool // temps were created in it (synced before commit in SyncPerFile)
}

// newDir is a directory the publication creates: a stage root is built under
// a temp name in an existing parent and renamed into place whole; the
// directories below it are built inside it under their final names.
type newDir struct {
	rel   string
	mode  fs.FileMode
	stage *newDir // the stage root it is built in (itself for a stage root)
	temp  string  // stage root: temp path beside rel
	fd    int
}

type publication struct {
	ctx              context.Context
	root, journalDir string
	id               string
	ops              []PublishOp
	byPath           map[string]*pathOps
	opts             PublishOptions
	res              *PublishResult
	step             func()

	rootFd  int
	dirs    map[string]*pubDir // existing directories, by rel ("." = root)
	missing map[string]*newDir // directories to create, by rel
	absent  map[string]bool    // directories found not to exist
	temps   []intentTemp
	tempN   int
	steps   []journalStep
	created []createdEntry // for undo
}

type createdEntry struct {
	dirFd int
	name  string
}

func (p *publication) closeDirs() {
	for _, d := range p.dirs {
		if d.fd != p.rootFd {
			overlay.CloseFd(d.fd)
		}
	}
	for _, nd := range p.missing {
		if nd.fd > 0 {
			overlay.CloseFd(nd.fd)
		}
	}
	if p.rootFd > 0 {
		overlay.CloseFd(p.rootFd)
	}
}

func (p *publication) run() error {
	fd, err := overlay.OpenRootFd(p.root)
	if err != nil {
		return err
	}
	p.rootFd = fd
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat root: %w", err)
	}
	p.dirs["."] = &pubDir{fd: fd, dev: st.Dev, ino: st.Ino}

	plan, err := p.plan()
	if err != nil {
		return err
	}
	testStage("planned")
	if err := p.writeIntent(); err != nil {
		return err
	}
	p.step()
	if err := p.create(plan); err != nil {
		return p.undo(err)
	}
	testStage("created")
	if err := p.syncBeforeCommit(); err != nil {
		return p.undo(err)
	}
	p.step()
	testStage("prepared")
	if err := p.ctx.Err(); err != nil {
		return p.undo(err) // the last moment a cancellation can still mean "nothing"
	}
	if err := p.verifyDirs(); err != nil {
		return p.undo(err)
	}
	if err := p.commit(); err != nil {
		return p.undo(err)
	}
	testStage("committed")
	body := &journalBody{Version: journalVersion, ID: p.id, Root: p.root, Steps: p.steps}
	if _, err := completeJournal(p.ctx, body, p.opts.Sync, true, p.step); err != nil {
		return fmt.Errorf("%w (journal %s): %w", ErrIncomplete, filepath.Join(p.journalDir, p.id+journalSuffix), err)
	}
	if err := retirePublication(p.journalDir, p.id); err != nil {
		return fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	p.step()
	return nil
}

// plannedOp is a creation op placed: into an existing directory through a
// temp, or straight into a directory being built.
type plannedOp struct {
	op       *PublishOp
	parent   string
	base     string
	existing *unix.Stat_t // the entry being replaced, if any
	temp     string       // temp beside the target; "" when built in a new directory
}

// plan resolves every directory the ops touch, checks expectations and
// removals against the tree, and decides where each new entry is built.
// It changes nothing.
func (p *publication) plan() ([]plannedOp, error) {
	paths := make([]string, 0, len(p.byPath))
	for path := range p.byPath {
		paths = append(paths, path)
	}
	slices.SortFunc(paths, func(a, b string) int {
		if d := relDepth(a) - relDepth(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var stale []StalePath
	var creations []plannedOp
	var deletes, rmdirs []string
	var chmods []journalStep
	for _, path := range paths {
		po := p.byPath[path]
		parent, base := overlay.SplitRel(path)
		dir, err := p.dir(parent)
		if err != nil {
			return nil, err
		}
		var cur *unix.Stat_t
		if dir != nil {
			var st unix.Stat_t
			err := unix.Fstatat(dir.fd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
			switch {
			case err == nil:
				cur = &st
			case !errors.Is(err, unix.ENOENT):
				return nil, fmt.Errorf("stat %s: %w", path, err)
			}
		}
		for _, op := range []*PublishOp{po.remove, po.create} {
			if op == nil || (op.ExpectHash == "" && !op.ExpectAbsent) {
				continue
			}
			got, err := currentHash(dir, base, cur)
			if err != nil {
				return nil, fmt.Errorf("check %s: %w", path, err)
			}
			want := op.ExpectHash
			if op.ExpectAbsent {
				want = "absent"
			}
			if got != want {
				stale = append(stale, StalePath{Path: path, Want: want, Got: got})
			}
		}
		curType := uint32(0)
		if cur != nil {
			curType = cur.Mode & unix.S_IFMT
		}
		if po.remove != nil {
			switch {
			case cur == nil:
				p.res.Unchanged = append(p.res.Unchanged, path)
			case po.remove.Kind == OpDelete && curType == unix.S_IFDIR:
				return nil, fmt.Errorf("delete %s: is a directory", path)
			case po.remove.Kind == OpDelete:
				deletes = append(deletes, path)
				p.res.Deleted++
			case curType != unix.S_IFDIR:
				return nil, fmt.Errorf("rmdir %s: not a directory", path)
			default:
				if err := p.checkEmptied(path); err != nil {
					return nil, err
				}
				rmdirs = append(rmdirs, path)
				p.res.RmDirs++
			}
			if cur != nil {
				cur, curType = nil, 0 // gone by the time the creation lands
			}
		}
		op := po.create
		if op == nil {
			continue
		}
		switch op.Kind {
		case OpMkdir:
			mode := op.Mode
			if mode == 0 {
				mode = 0o755
			}
			if curType == unix.S_IFDIR {
				if op.Mode != 0 && cur.Mode&0o7777 != fsx.UnixMode(op.Mode) {
					chmods = append(chmods, journalStep{Op: stepChmod, Path: path, Mode: fsx.UnixMode(op.Mode)})
					p.res.MadeDirs++
				} else {
					p.res.Unchanged = append(p.res.Unchanged, path)
				}
				continue
			}
			if cur != nil {
				return nil, fmt.Errorf("mkdir %s: exists and is not a directory", path)
			}
			p.addMissing(path, mode)
			p.res.MadeDirs++
		case OpWrite, OpSymlink:
			if curType == unix.S_IFDIR {
				return nil, fmt.Errorf("%s %s: is a directory", op.Kind, path)
			}
			if dir == nil {
				p.addMissing(parent, 0)
			}
			creations = append(creations, plannedOp{op: op, parent: parent, base: base, existing: cur})
			if op.Kind == OpWrite {
				p.res.Written++
			} else {
				p.res.Linked++
			}
		}
	}
	if len(stale) > 0 {
		return nil, &StaleError{Paths: stale}
	}
	// Removals before creations; directories emptied deepest first.
	for _, d := range deletes {
		p.steps = append(p.steps, journalStep{Op: stepDelete, Path: d})
	}
	slices.SortStableFunc(rmdirs, func(a, b string) int { return relDepth(b) - relDepth(a) })
	for _, d := range rmdirs {
		p.steps = append(p.steps, journalStep{Op: stepRmdir, Path: d})
	}
	// Temps: stage roots and files/links placed in existing directories.
	for _, nd := range p.sortedMissing() {
		if nd.stage == nd {
			nd.temp = p.newTemp(nd.rel, true)
		}
	}
	for i := range creations {
		c := &creations[i]
		if _, ok := p.missing[c.parent]; !ok {
			c.temp = p.newTemp(c.op.Path, false)
		}
	}
	p.steps = append(p.steps, chmods...)
	return creations, nil
}

// dir returns the held existing directory rel, nil if it does not exist (it
// will be created), or an error if it cannot be a directory to write in.
func (p *publication) dir(rel string) (*pubDir, error) {
	if d, ok := p.dirs[rel]; ok {
		return d, nil
	}
	if p.absent[rel] {
		return nil, nil
	}
	parent, base := overlay.SplitRel(rel)
	pd, err := p.dir(parent)
	if err != nil || pd == nil {
		return nil, err
	}
	fd, err := overlay.OpenBeneathFd(pd.fd, base, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		// A file or link this publication deletes is no obstacle: a new
		// directory takes its place. Anything else is not walked through.
		if po := p.byPath[rel]; po != nil && po.remove != nil && po.remove.Kind == OpDelete &&
			(errors.Is(err, unix.ENOTDIR) || errors.Is(err, overlay.ErrUnsafePath)) {
			err = unix.ENOENT
		}
	}
	if errors.Is(err, unix.ENOENT) {
		p.absent[rel] = true
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		overlay.CloseFd(fd)
		return nil, fmt.Errorf("stat directory %s: %w", rel, err)
	}
	d := &pubDir{fd: fd, dev: st.Dev, ino: st.Ino}
	p.dirs[rel] = d
	return d, nil
}

// addMissing records rel (and its missing ancestors) as directories to build.
func (p *publication) addMissing(rel string, mode fs.FileMode) {
	if nd, ok := p.missing[rel]; ok {
		if mode != 0 {
			nd.mode = mode
		}
		return
	}
	if mode == 0 {
		mode = p.opts.DirMode
	}
	nd := &newDir{rel: rel, mode: mode}
	p.missing[rel] = nd
	parent := parentRel(rel)
	if _, exists := p.dirs[parent]; exists && parent != rel {
		nd.stage = nd
		return
	}
	p.addMissing(parent, 0)
	nd.stage = p.missing[parent].stage
}

func (p *publication) sortedMissing() []*newDir {
	out := make([]*newDir, 0, len(p.missing))
	for _, nd := range p.missing {
		out = append(out, nd)
	}
	slices.SortFunc(out, func(a, b *newDir) int {
		if d := relDepth(a.rel) - relDepth(b.rel); d != 0 {
			return d
		}
		return strings.Compare(a.rel, b.rel)
	})
	return out
}

func (p *publication) newTemp(target string, dir bool) string {
	p.tempN++
	temp := parentRel(target) + "/" + pubTempPrefix + p.id + "-" + strconv.Itoa(p.tempN)
	temp = strings.TrimPrefix(temp, "./")
	p.temps = append(p.temps, intentTemp{Path: temp, Dir: dir})
	return temp
}

// checkEmptied verifies every entry of the directory rel is removed by this
// publication, so its rmdir cannot fail after the commit.
func (p *publication) checkEmptied(rel string) error {
	d, err := p.dir(parentRel(rel))
	if err != nil || d == nil {
		return fmt.Errorf("rmdir %s: parent: %v", rel, err)
	}
	_, base := overlay.SplitRel(rel)
	fd, err := overlay.OpenBeneathFd(d.fd, base, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("rmdir %s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer overlay.CloseQuiet(f)
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("rmdir %s: list: %w", rel, err)
	}
	for _, name := range names {
		if po := p.byPath[rel+"/"+name]; po == nil || po.remove == nil {
			return fmt.Errorf("rmdir %s: %q stays in it", rel, name)
		}
	}
	return nil
}

// currentHash is what ExpectHash is compared with: "absent", "dir", a file's
// content hash or a symlink's target hash.
func currentHash(dir *pubDir, base string, cur *unix.Stat_t) (string, error) {
	if cur == nil {
		return "absent", nil
	}
	h := sha256.New()
	switch cur.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "dir", nil
	case unix.S_IFLNK:
		link, err := overlay.Readlinkat(dir.fd, base)
		if err != nil {
			return "", err
		}
		h.Write([]byte(link))
	case unix.S_IFREG:
		fd, err := overlay.OpenatRetry(dir.fd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return "", err
		}
		f := os.NewFile(uintptr(fd), base)
		defer overlay.CloseQuiet(f)
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
	default:
		return "special", nil
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeIntent lists every temp before any exists, so a crash before the
// commit can be cleaned up. It need not be durable: losing it to a power
// cut leaves only .strata-pub-* names, never a half-visible change.
func (p *publication) writeIntent() error {
	data, err := json.Marshal(intentFile{Version: journalVersion, ID: p.id, Root: p.root, Temps: p.temps})
	if err != nil {
		return err
	}
	if err := writeFileDurably(filepath.Join(p.journalDir, p.id+intentSuffix), data, false); err != nil {
		return fmt.Errorf("write intent: %w", err)
	}
	return nil
}

// create builds every new directory and writes every new file and link.
func (p *publication) create(plan []plannedOp) error {
	nds := p.sortedMissing()
	for _, nd := range nds {
		var parentFd int
		var name string
		if nd.stage == nd {
			parentFd = p.dirs[parentRel(nd.rel)].fd
			_, name = overlay.SplitRel(nd.temp)
		} else {
			parentFd = p.missing[parentRel(nd.rel)].fd
			_, name = overlay.SplitRel(nd.rel)
		}
		// 0700 while it is filled: the final mode may forbid writing into it.
		if err := unix.Mkdirat(parentFd, name, 0o700); err != nil {
			return fmt.Errorf("create directory %s: %w", nd.rel, err)
		}
		if nd.stage == nd {
			p.created = append(p.created, createdEntry{dirFd: parentFd, name: name})
		}
		fd, err := overlay.OpenatRetry(parentFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return fmt.Errorf("open new directory %s: %w", nd.rel, err)
		}
		nd.fd = fd
		if nd.stage == nd {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return fmt.Errorf("stat new directory %s: %w", nd.rel, err)
			}
			p.steps = append(p.steps, journalStep{Op: stepRename, Path: nd.rel, Temp: nd.temp, Type: entryTypeDir, Ino: st.Ino})
		}
		p.step()
	}
	type result struct {
		step    journalStep
		dirFd   int
		name    string
		created bool
	}
	results := make([]result, len(plan))
	for i, c := range plan {
		r := &results[i]
		if c.temp != "" {
			d := p.dirs[c.parent]
			d.gotTemps = true
			r.dirFd = d.fd
			_, r.name = overlay.SplitRel(c.temp)
		} else {
			r.dirFd, r.name = p.missing[c.parent].fd, c.base
		}
	}
	err := forEachParallel(len(plan), func(i int) error {
		r, c := &results[i], plan[i]
		var err error
		r.step, r.created, err = p.createEntry(r.dirFd, r.name, c)
		if err != nil {
			return &PublishPathError{Kind: c.op.Kind, Root: p.root, Path: c.op.Path, Err: err}
		}
		p.step()
		return nil
	})
	for i, r := range results {
		if r.created {
			p.created = append(p.created, createdEntry{dirFd: r.dirFd, name: r.name})
		}
		if err == nil && plan[i].temp != "" {
			r.step.Temp = plan[i].temp
			p.steps = append(p.steps, r.step)
		}
	}
	if err != nil {
		return err
	}
	// Final directory modes, deepest first so a read-only parent is set last.
	for i := len(nds) - 1; i >= 0; i-- {
		if err := unix.Fchmod(nds[i].fd, fsx.UnixMode(nds[i].mode)); err != nil {
			return fmt.Errorf("chmod new directory %s: %w", nds[i].rel, err)
		}
	}
	return nil
}

// createEntry writes one new file or link named name in dirFd and returns
// the rename step describing it (Path, Type, Ino, SHA256, Link), and whether
// it created anything for an undo to remove. It runs on several goroutines.
func (p *publication) createEntry(dirFd int, name string, c plannedOp) (journalStep, bool, error) {
	st := journalStep{Op: stepRename, Path: c.op.Path}
	if c.op.Kind == OpSymlink {
		if err := unix.Symlinkat(c.op.Target, dirFd, name); err != nil {
			return st, false, err
		}
		var s unix.Stat_t
		if err := unix.Fstatat(dirFd, name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return st, true, err
		}
		st.Type, st.Ino, st.Link = entryTypeLink, s.Ino, c.op.Target
		return st, true, nil
	}
	fd, err := overlay.OpenatRetry(dirFd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return st, false, err
	}
	f := os.NewFile(uintptr(fd), name)
	err = p.fillFile(f, fd, c, &st)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return st, true, err
}

func (p *publication) fillFile(f *os.File, fd int, c plannedOp, st *journalStep) error {
	var sum string
	if c.op.SourceFile != "" {
		src, err := overlay.OpenSourceFile(c.op.SourceFile)
		if err != nil {
			return err
		}
		info, err := src.Stat()
		if err == nil {
			_, err = store.CopySparse(f, src, info.Size())
		}
		_ = src.Close()
		if errors.Is(err, store.ErrShrank) && c.op.ContentHash != "" {
			return &store.ContentError{Path: c.op.Path, Want: c.op.ContentHash, Got: "a file that shrank while it was copied"}
		}
		if err != nil {
			return fmt.Errorf("copy from %s: %w", c.op.SourceFile, err)
		}
	} else {
		if _, err := f.Write(c.op.Data); err != nil {
			return err
		}
		if c.op.ContentHash == "" {
			h := sha256.Sum256(c.op.Data)
			sum = hex.EncodeToString(h[:])
		}
	}
	if sum == "" {
		// What the journal promises and the caller checked is what the
		// staged file holds, read back from it.
		got, _, err := store.HashFile(f)
		if err != nil {
			return err
		}
		if c.op.ContentHash != "" && got != c.op.ContentHash {
			return &store.ContentError{Path: c.op.Path, Want: c.op.ContentHash, Got: got}
		}
		sum = got
	}
	mode := c.op.Mode
	if mode == 0 {
		mode = 0o644
	}
	if c.existing != nil && c.existing.Mode&unix.S_IFMT == unix.S_IFREG {
		// Keep the replaced file's owner; only root may, and failing is fine.
		_ = unix.Fchown(fd, int(c.existing.Uid), int(c.existing.Gid))
	}
	if err := unix.Fchmod(fd, fsx.UnixMode(mode)); err != nil { // after chown, which clears setuid
		return err
	}
	var s unix.Stat_t
	if err := unix.Fstat(fd, &s); err != nil {
		return err
	}
	st.Type, st.Ino, st.SHA256 = entryTypeFile, s.Ino, sum
	if p.opts.Sync == SyncPerFile {
		return f.Sync()
	}
	return nil
}

// syncBeforeCommit makes every temp and built directory durable: the journal
// may only promise renames of temps that will survive a power cut.
func (p *publication) syncBeforeCommit() error {
	if p.opts.Sync == SyncFS {
		if err := unix.Syncfs(p.rootFd); err != nil {
			return fmt.Errorf("syncfs: %w", err)
		}
		return nil
	}
	type dirToSync struct {
		rel string
		fd  int
	}
	var toSync []dirToSync
	for _, nd := range p.sortedMissing() {
		toSync = append(toSync, dirToSync{nd.rel, nd.fd})
		if nd.stage == nd {
			p.dirs[parentRel(nd.rel)].gotTemps = true
		}
	}
	for rel, d := range p.dirs {
		if d.gotTemps {
			toSync = append(toSync, dirToSync{rel, d.fd})
		}
	}
	return forEachParallel(len(toSync), func(i int) error {
		if err := unix.Fsync(toSync[i].fd); err != nil {
			return fmt.Errorf("sync directory %s: %w", toSync[i].rel, err)
		}
		return nil
	})
}

// verifyDirs checks, just before the commit, that every directory held open
// is still the one its path names beneath the root: one moved away or
// swapped for a symlink since it was opened fails the publication.
func (p *publication) verifyDirs() error {
	for rel, d := range p.dirs {
		if rel == "." {
			continue
		}
		fd, err := overlay.OpenBeneathFd(p.rootFd, rel, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("directory %s changed during publication: %w", rel, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		overlay.CloseFd(fd)
		if err != nil {
			return fmt.Errorf("stat directory %s: %w", rel, err)
		}
		if st.Dev != d.dev || st.Ino != d.ino {
			return fmt.Errorf("%w: directory %s was replaced during publication", overlay.ErrUnsafePath, rel)
		}
	}
	return nil
}

// commit writes the journal durably: from here on the publication completes.
func (p *publication) commit() error {
	// Order: removals, then renames (stage roots before entries in existing
	// dirs is irrelevant: they never nest), then chmods.
	rank := func(op string) int {
		switch op {
		case stepDelete:
			return 0
		case stepRmdir:
			return 1
		case stepRename:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(p.steps, func(a, b journalStep) int { return rank(a.Op) - rank(b.Op) })
	body := &journalBody{Version: journalVersion, ID: p.id, Root: p.root, Created: time.Now().UTC(), Steps: p.steps}
	data, err := encodeJournal(body)
	if err != nil {
		return fmt.Errorf("encode journal: %w", err)
	}
	path := filepath.Join(p.journalDir, p.id+journalSuffix)
	if err := writeFileDurably(path, data, true); err != nil {
		// A journal renamed into place but not synced may still be seen by
		// recovery; remove it so the undo that follows is the only outcome.
		_ = os.Remove(path)
		return fmt.Errorf("write journal: %w", err)
	}
	p.step()
	return nil
}

// undo removes everything the publication created, before its commit.
func (p *publication) undo(cause error) error {
	var errs []error
	for i := len(p.created) - 1; i >= 0; i-- {
		c := p.created[i]
		if _, err := removeAllAt(c.dirFd, c.name); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.name, err))
		}
	}
	if len(errs) == 0 {
		if err := retirePublication(p.journalDir, p.id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (undo incomplete, Recover will finish it: %w)", cause, errors.Join(errs...))
	}
	return cause
}
