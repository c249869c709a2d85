package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

// RestoreOptions tunes RestoreUpperWith and RestorePathsWith.
type RestoreOptions struct {
	// UserXattr writes kernel opaque marks as user.overlay.opaque, for
	// overlays mounted with -o userxattr (rootless).
	UserXattr bool
	// Lower, when set, supplies mode, owner and times for directories the
	// restore must create but the manifest does not describe (a whiteout
	// captured from a unionfs or OCI layer that lacks its parent dirs).
	// Without it they get 0755, root, and the current time.
	Lower string
	// Verify is kept for callers written when only sizes were checked by
	// default: every object is now hashed while it is copied, so it changes
	// nothing.
	Verify bool
	// DeferCleanup leaves the replaced upper at upper+".restore-tmp" for the
	// caller to remove with RemoveRestoreLeftovers once the World is
	// mounted again, keeping the removal off a rollback's critical path.
	DeferCleanup bool
	// NoSync skips the syncfs that makes the new upper durable before it
	// replaces the old one. Only for uppers nobody needs after a crash.
	NoSync bool
}

// restoreTmpSuffix names the sibling directory a restore builds in;
// restorePathsTmpSuffix the one RestorePaths stages file contents in.
const (
	restoreTmpSuffix      = ".restore-tmp"
	restorePathsTmpSuffix = ".restore-paths-tmp"
)

// RestoreUpper recreates the upper layer at upper exactly as m froze it,
// in dialect d, replacing whatever is there. See RestoreUpperWith.
func RestoreUpper(ctx context.Context, store *Store, m *Manifest, upper string, d overlay.Dialect) error {
	return RestoreUpperWith(ctx, store, m, upper, d, RestoreOptions{})
}

// RestoreUpperWith recreates the upper layer at upper exactly as m froze it,
// spelling whiteouts and opaque dirs in dialect d: StageUpper, then Swap.
// The overlay must not be mounted.
func RestoreUpperWith(ctx context.Context, store *Store, m *Manifest, upper string, d overlay.Dialect, opts RestoreOptions) error {
	su, err := StageUpper(ctx, store, m, upper, d, opts)
	if err != nil {
		return err
	}
	return su.Swap()
}

// StagedUpper is a new upper layer built completely, every file verified
// against its object id, in the sibling directory of the upper it is to
// replace. Nothing of the live upper has changed until Swap.
type StagedUpper struct {
	upper, tmp string
	opts       RestoreOptions
}

// StageUpper builds the upper m froze in the sibling upper+".restore-tmp"
// (the World may still be mounted and running meanwhile: the live upper is
// not touched) and syncs it. A missing or corrupt object fails here, with
// the half-built tree removed. File contents are copied from the store,
// never hard-linked: the overlay writes upper files in place, and a link
// would let the World change the snapshot.
func StageUpper(ctx context.Context, store *Store, m *Manifest, upper string, d overlay.Dialect, opts RestoreOptions) (*StagedUpper, error) {
	if err := restoreCheckDialect(d); err != nil {
		return nil, fmt.Errorf("restore upper %s: %w (restore needs a concrete dialect)", upper, err)
	}
	upper = filepath.Clean(upper)
	tmp := upper + restoreTmpSuffix
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("restore upper %s: remove leftover %s: %w", upper, tmp, err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("restore upper %s: %w", upper, err)
	}
	w := &snapWriter{store: store, root: tmp, d: d, opts: opts}
	defer w.closeDeep()
	build := func() error {
		if err := w.applyAttrs("", &m.Root, true); err != nil {
			return err
		}
		// Everything but file contents first, in order (parents before
		// children); then the files, which are independent, in parallel.
		var files []*ManifestEntry
		for i := range m.Entries {
			if i%64 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			e := &m.Entries[i]
			if e.Kind == EntryFile {
				if err := validManifestPath(e.Path); err != nil {
					return err
				}
				if err := w.ensureParent(path.Dir(e.Path)); err != nil {
					return err
				}
				files = append(files, e)
				continue
			}
			if err := w.create(e); err != nil {
				return err
			}
		}
		if err := w.createFiles(ctx, files, func(e *ManifestEntry) string { return w.abs(e.Path) }); err != nil {
			return err
		}
		return w.finishDirTimes()
	}
	if err := build(); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("restore upper %s: %w", upper, err)
	}
	if !opts.NoSync {
		if err := syncFSOf(tmp); err != nil {
			_ = os.RemoveAll(tmp)
			return nil, fmt.Errorf("restore upper %s: %w", upper, err)
		}
	}
	return &StagedUpper{upper: upper, tmp: tmp, opts: opts}, nil
}

// Swap puts the staged upper in place of the live one in one
// renameat2(RENAME_EXCHANGE); the old tree, now at the temp name, is then
// removed (unless DeferCleanup). A crash at any point leaves upper either
// wholly old or wholly new; the temp directory it may leave is removed by
// the next restore (or RemoveRestoreLeftovers). The overlay must not be
// mounted.
func (su *StagedUpper) Swap() error {
	upper, tmp := su.upper, su.tmp
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, upper, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.ENOENT) {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, upper, unix.RENAME_NOREPLACE)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("restore upper %s: swap in %s: %w", upper, tmp, err)
	}
	if su.opts.DeferCleanup {
		return nil
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("restore upper %s: remove old upper at %s: %w", upper, tmp, err)
	}
	return nil
}

// Dir is where the staged upper is being built, for a caller that adds to
// it before Swap (CarryBuildState, TouchRestored).
func (su *StagedUpper) Dir() string { return su.tmp }

// Discard removes the staged upper without touching the live one.
func (su *StagedUpper) Discard() error {
	if err := os.RemoveAll(su.tmp); err != nil {
		return fmt.Errorf("discard staged upper %s: %w", su.tmp, err)
	}
	return nil
}

// RemoveRestoreLeftovers removes what an interrupted restore of upper left
// behind (the half-built new tree or the not yet removed old one).
func RemoveRestoreLeftovers(upper string) error {
	for _, suffix := range []string{restoreTmpSuffix, restorePathsTmpSuffix} {
		tmp := filepath.Clean(upper) + suffix
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("remove restore leftovers %s: %w", tmp, err)
		}
	}
	return nil
}

func restoreCheckDialect(d overlay.Dialect) error {
	switch d {
	case overlay.DialectKernel, overlay.DialectFuseOverlayfs, overlay.DialectUnionfs, overlay.DialectOCI:
		return nil
	}
	return fmt.Errorf("unknown dialect %q", d)
}

func syncFSOf(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// RestorePaths brings the given paths (and everything under them) of the
// upper back to what m froze: content, metadata, "deleted" (a whiteout) and
// "not in the upper" (the path falls back to the lower: its upper entry and
// any whiteout are removed). The overlay must not be mounted. Ancestors the
// current upper lacks are created; an ancestor the current upper holds as
// a whiteout or non-directory becomes an opaque directory, so the rest of
// what was deleted stays deleted. The parents' mtimes are kept.
func RestorePaths(ctx context.Context, store *Store, m *Manifest, upper string, d overlay.Dialect, paths []string) error {
	return RestorePathsWith(ctx, store, m, upper, d, paths, RestoreOptions{})
}

// RestorePathsWith is RestorePaths with options.
func RestorePathsWith(ctx context.Context, store *Store, m *Manifest, upper string, d overlay.Dialect, paths []string, opts RestoreOptions) error {
	if err := restoreCheckDialect(d); err != nil {
		return fmt.Errorf("restore paths in %s: %w", upper, err)
	}
	clean := make([]string, 0, len(paths))
	for _, p := range paths {
		c := strings.Trim(path.Clean("/"+filepath.ToSlash(p)), "/")
		if err := validManifestPath(c); err != nil {
			return fmt.Errorf("restore paths in %s: %w", upper, err)
		}
		clean = append(clean, c)
	}
	slices.Sort(clean)
	var roots []string
	for _, p := range clean {
		if !slices.ContainsFunc(roots, func(q string) bool { return p == q || strings.HasPrefix(p, q+"/") }) {
			roots = append(roots, p)
		}
	}
	w := &snapWriter{store: store, root: filepath.Clean(upper), d: d, opts: opts}
	defer w.closeDeep()
	// Every file's content is copied out of the store and verified before
	// anything in the upper changes, so a missing or corrupt object fails
	// with the live upper untouched; the staged files are then renamed over
	// their targets.
	stage := filepath.Clean(upper) + restorePathsTmpSuffix
	if err := os.RemoveAll(stage); err != nil {
		return fmt.Errorf("restore paths in %s: remove leftover %s: %w", upper, stage, err)
	}
	if err := os.Mkdir(stage, 0o700); err != nil {
		return fmt.Errorf("restore paths in %s: %w", upper, err)
	}
	defer func() { _ = os.RemoveAll(stage) }()
	var files []*ManifestEntry
	for _, p := range roots {
		for _, e := range subtree(m, p) {
			if e.Kind == EntryFile {
				files = append(files, e)
			}
		}
	}
	w.staged = make(map[string]string, len(files))
	for i, e := range files {
		w.staged[e.Path] = filepath.Join(stage, strconv.Itoa(i))
	}
	if err := w.createFiles(ctx, files, func(e *ManifestEntry) string { return w.staged[e.Path] }); err != nil {
		if _, ok := errors.AsType[*CorruptObjectError](err); ok {
			return fmt.Errorf("restore paths in %s: %w", upper, err)
		}
		return fmt.Errorf("restore paths in %s: %w (the upper was not changed)", upper, err)
	}
	if !opts.NoSync && len(files) > 0 {
		if err := syncFSOf(stage); err != nil {
			return fmt.Errorf("restore paths in %s: %w", upper, err)
		}
	}
	for _, p := range roots {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("restore paths in %s: %w", upper, err)
		}
		if err := w.restoreOnePath(m, p); err != nil {
			return fmt.Errorf("restore %q in %s: %w", p, upper, err)
		}
	}
	if err := w.finishDirTimes(); err != nil {
		return fmt.Errorf("restore paths in %s: %w", upper, err)
	}
	if !opts.NoSync {
		if err := syncFSOf(upper); err != nil {
			return fmt.Errorf("restore paths in %s: %w", upper, err)
		}
	}
	return nil
}

func (w *snapWriter) restoreOnePath(m *Manifest, p string) error {
	// Ancestors, top down.
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		a := strings.Join(parts[:i], "/")
		var st unix.Stat_t
		err := unix.Lstat(w.abs(a), &st)
		switch {
		case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
			continue
		case err == nil:
			// A whiteout or a non-dir hides the lower's directory now; keep
			// the rest of it hidden.
			if err := w.removeCurrent(a); err != nil {
				return err
			}
			if err := w.mkdirAncestor(m, a, true); err != nil {
				return err
			}
		case errors.Is(err, unix.ENOENT):
			hidden, herr := w.hasNameWhiteout(a)
			if herr != nil {
				return herr
			}
			if hidden {
				if err := w.removeNameWhiteout(a); err != nil {
					return err
				}
			}
			if err := w.mkdirAncestor(m, a, hidden); err != nil {
				return err
			}
		default:
			return fmt.Errorf("lstat %s: %w", w.abs(a), err)
		}
	}
	parent := path.Dir(p)
	if parent == "." {
		parent = ""
	}
	var pst unix.Stat_t
	if err := unix.Lstat(w.abs(parent), &pst); err != nil {
		return fmt.Errorf("lstat %s: %w", w.abs(parent), err)
	}
	// A file coming back over a non-directory is one rename, which
	// replaces the live entry atomically: it is never missing in between.
	if e := m.Lookup(p); e != nil && e.Kind == EntryFile {
		var cur unix.Stat_t
		err := unix.Lstat(w.abs(p), &cur)
		if err == nil && cur.Mode&unix.S_IFMT == unix.S_IFDIR || err != nil && !errors.Is(err, unix.ENOENT) {
			if err := w.removeCurrent(p); err != nil {
				return err
			}
		}
		if err := w.createFile(e); err != nil {
			return err
		}
		if err := w.removeNameWhiteout(p); err != nil {
			return err
		}
		if err := w.removeMetaSubtree(p); err != nil {
			return err
		}
		w.dirTimes = append(w.dirTimes, dirTime{rel: parent, atime: pst.Atim, mtime: pst.Mtim})
		return nil
	}
	if err := w.removeCurrent(p); err != nil {
		return err
	}
	for _, e := range subtree(m, p) {
		if err := w.create(e); err != nil {
			return err
		}
	}
	w.dirTimes = append(w.dirTimes, dirTime{rel: parent, atime: pst.Atim, mtime: pst.Mtim})
	return nil
}

// subtree lists m's entries at p and under it, in order.
func subtree(m *Manifest, p string) []*ManifestEntry {
	var out []*ManifestEntry
	i, _ := slices.BinarySearchFunc(m.Entries, p, func(e ManifestEntry, q string) int { return strings.Compare(e.Path, q) })
	for ; i < len(m.Entries); i++ {
		q := m.Entries[i].Path
		if q == p || strings.HasPrefix(q, p+"/") {
			out = append(out, &m.Entries[i])
			continue
		}
		if q > p+"/" {
			break
		}
		// a sibling sorting between p and p/ (e.g. "p-x")
	}
	return out
}

// removeCurrent removes whatever the upper holds for p in w's dialect: the
// entry itself and any whiteout or meta marker naming it.
func (w *snapWriter) removeCurrent(p string) error {
	w.forgetDeep(p)
	if err := os.RemoveAll(w.abs(p)); err != nil {
		return err
	}
	if err := w.removeNameWhiteout(p); err != nil {
		return err
	}
	return w.removeMetaSubtree(p)
}

// removeMetaSubtree removes the markers a unionfs-fuse meta tree keeps for
// paths below p.
func (w *snapWriter) removeMetaSubtree(p string) error {
	if w.d != overlay.DialectUnionfs {
		return nil
	}
	for _, meta := range overlay.UnionfsMetaDirs {
		if err := os.RemoveAll(filepath.Join(w.root, meta, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	return nil
}

// nameWhiteoutPaths lists where dialect d may keep a marker for p that is
// not at p itself.
func (w *snapWriter) nameWhiteoutPaths(p string) []string {
	var out []string
	for _, m := range overlay.DeletionMarkers(w.d, p) {
		out = append(out, w.markerAbs(m))
	}
	return out
}

// markerAbs names the upper-relative marker path m for syscalls: a meta-tree
// marker under the root, any other through abs (deep paths stay short).
func (w *snapWriter) markerAbs(m string) string {
	if overlay.InMetaTree(w.d, m) {
		return filepath.Join(w.root, filepath.FromSlash(m))
	}
	return w.abs(m)
}

func (w *snapWriter) hasNameWhiteout(p string) (bool, error) {
	for _, m := range w.nameWhiteoutPaths(p) {
		var st unix.Stat_t
		err := unix.Lstat(m, &st)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
			return false, fmt.Errorf("lstat %s: %w", m, err)
		}
	}
	return false, nil
}

func (w *snapWriter) removeNameWhiteout(p string) error {
	for _, m := range w.nameWhiteoutPaths(p) {
		if err := os.RemoveAll(m); err != nil {
			return err
		}
	}
	return nil
}

// mkdirAncestor creates directory a, described by its manifest entry when
// the manifest has it as a dir, else by the lower or defaults.
func (w *snapWriter) mkdirAncestor(m *Manifest, a string, opaque bool) error {
	e := m.Lookup(a)
	if e == nil || e.Kind != EntryDir {
		return w.mkdirImplied(a, opaque)
	}
	de := *e
	de.Opaque = opaque
	return w.create(&de)
}

// snapWriter creates manifest entries under root in one dialect.
type snapWriter struct {
	store    *Store
	root     string
	d        overlay.Dialect
	opts     RestoreOptions
	dirTimes []dirTime

	// deep: directories of a tree deeper than PATH_MAX held open, so abs
	// names their entries /proc/self/fd/N/NAME (see anchorDir).
	deepMu sync.Mutex
	deep   map[string]int
	// staged maps a file entry's path to its verified content, copied out
	// of the store ahead (RestorePaths); createFile renames it into place.
	staged map[string]string
}

// closeDeep releases the directories abs held open; forget drops those at
// or under rel (about to be removed, so a descriptor would go stale).
func (w *snapWriter) closeDeep() { w.forgetDeep("") }

func (w *snapWriter) forgetDeep(rel string) {
	w.deepMu.Lock()
	defer w.deepMu.Unlock()
	for d, fd := range w.deep {
		if rel == "" || d == rel || strings.HasPrefix(d, rel+"/") {
			overlay.CloseFd(fd)
			delete(w.deep, d)
		}
	}
}

// deepDir returns a descriptor for the directory rel of the tree being
// written, opened one component at a time from its closest held ancestor.
func (w *snapWriter) deepDir(rel string) (int, error) {
	w.deepMu.Lock()
	defer w.deepMu.Unlock()
	if fd, ok := w.deep[rel]; ok {
		return fd, nil
	}
	rootFd, err := overlay.OpenRootFd(w.root)
	if err != nil {
		return -1, err
	}
	defer overlay.CloseFd(rootFd)
	fd, err := overlay.OpenBeneathFd(rootFd, rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	if w.deep == nil {
		w.deep = make(map[string]int)
	}
	w.deep[rel] = fd
	return fd, nil
}

type dirTime struct {
	rel          string
	atime, mtime unix.Timespec
}

func (w *snapWriter) abs(rel string) string {
	if rel == "" {
		return w.root
	}
	full := filepath.Join(w.root, filepath.FromSlash(rel))
	if len(full) < overlay.AnchorAt {
		return full
	}
	// Deeper than a syscall takes: name it through its parent's descriptor.
	parent, base := overlay.SplitRel(rel)
	fd, err := w.deepDir(parent)
	if err != nil {
		return full // the syscall then fails with ENAMETOOLONG, naming the path
	}
	return overlay.FdPath(fd) + "/" + base
}

// create makes e at its path; its parent must exist or be creatable.
func (w *snapWriter) create(e *ManifestEntry) error {
	if err := validManifestPath(e.Path); err != nil {
		return err
	}
	if err := w.ensureParent(path.Dir(e.Path)); err != nil {
		return err
	}
	p := w.abs(e.Path)
	switch e.Kind {
	case EntryDir:
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
		return w.applyAttrs(e.Path, e, true)
	case EntryFile:
		return w.createFile(e)
	case EntrySymlink:
		if err := os.Symlink(e.Target, p); err != nil {
			return err
		}
		return w.applyAttrs(e.Path, e, false)
	case EntryWhiteout:
		return w.createWhiteout(e)
	case EntryOther:
		if err := unix.Mknod(p, e.Mode, int(e.Rdev)); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
		return w.applyAttrs(e.Path, e, false)
	}
	return fmt.Errorf("%s: unknown entry kind %d", e.Path, e.Kind)
}

// createFile puts a file entry at its path: its staged copy renamed into
// place when there is one, else a copy from the store made there.
func (w *snapWriter) createFile(e *ManifestEntry) error {
	p := w.abs(e.Path)
	if sp, ok := w.staged[e.Path]; ok {
		if err := os.Rename(sp, p); err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		return nil
	}
	return w.copyFileTo(e, p)
}

// copyFileTo copies a file entry's content from the store to p, verifying
// it against the object id, and sets its owner, mode, xattrs and times;
// p's parent must exist. Safe to call concurrently for different entries.
func (w *snapWriter) copyFileTo(e *ManifestEntry, p string) error {
	fd, err := w.store.createCopy(e.Object, p, e.Size)
	if err != nil {
		if ce, ok := errors.AsType[*CorruptObjectError](err); ok && ce.File == "" {
			ce.File = e.Path
			return err
		}
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	defer func() { _ = unix.Close(fd) }()
	if !w.opts.NoSync {
		// Start the writeback now; the syncfs before the swap then mostly
		// waits for I/O already under way.
		_ = unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	}
	if err := unix.Fchown(fd, e.UID, e.GID); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	if err := unix.Fchmod(fd, e.Mode&0o7777); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	for name, value := range e.Xattrs {
		if err := unix.Fsetxattr(fd, name, value, 0); err != nil {
			return fmt.Errorf("set xattr %s on %s: %w", name, p, err)
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.MTime), unix.NsecToTimespec(e.MTime)}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", p, err)
	}
	return nil
}

// createFiles runs copyFileTo over files, each to dst(e), with a few workers.
func (w *snapWriter) createFiles(ctx context.Context, files []*ManifestEntry, dst func(*ManifestEntry) string) error {
	workers := min(runtime.GOMAXPROCS(0), 4, len(files))
	if workers <= 1 {
		for _, e := range files {
			if err := w.copyFileTo(e, dst(e)); err != nil {
				return err
			}
		}
		return nil
	}
	next := make(chan *ManifestEntry)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range next {
				if err := w.copyFileTo(e, dst(e)); err != nil {
					errs <- err
					for range next {
					}
					return
				}
			}
		}()
	}
	var err error
feed:
	for _, e := range files {
		select {
		case next <- e:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs
	}
	return err
}

func (w *snapWriter) createWhiteout(e *ManifestEntry) error {
	node, file := overlay.WhiteoutSpelling(w.d, e.Path)
	if node {
		p := w.abs(e.Path)
		if err := overlay.MknodWhiteout(p); err != nil {
			return fmt.Errorf("mknod whiteout %s: %w", p, err)
		}
		if err := unix.Lchown(p, e.UID, e.GID); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
		return w.setTimes(p, e.MTime)
	}
	marker := w.markerAbs(file)
	if overlay.InMetaTree(w.d, file) {
		if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create whiteout marker: %w", err)
	}
	return f.Close()
}

// markOpaque spells "this directory hides the lower's" in w's dialect.
func (w *snapWriter) markOpaque(rel string) error {
	p := w.abs(rel)
	sp := overlay.OpaqueSpellingFor(w.d, rel, w.opts.UserXattr)
	for _, name := range sp.Xattrs {
		if err := unix.Lsetxattr(p, name, []byte(overlay.OpaqueValue), 0); err != nil {
			return fmt.Errorf("set %s on %s: %w", name, p, err)
		}
	}
	for _, name := range sp.Nodes {
		if err := overlay.MknodWhiteout(filepath.Join(p, name)); err != nil {
			return fmt.Errorf("mark %s opaque: %w", p, err)
		}
	}
	for _, name := range sp.Files {
		if err := touchEmpty(filepath.Join(p, name)); err != nil {
			return err
		}
	}
	if sp.MetaDir != "" {
		if err := os.MkdirAll(filepath.Join(w.root, filepath.FromSlash(sp.MetaDir)), 0o755); err != nil {
			return fmt.Errorf("mark %s opaque: %w", p, err)
		}
	}
	return nil
}

func touchEmpty(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// applyAttrs sets owner, mode, xattrs and (for non-dirs) times of the
// entry just created at rel; directory times wait until their children exist.
func (w *snapWriter) applyAttrs(rel string, e *ManifestEntry, isDir bool) error {
	p := w.abs(rel)
	if err := unix.Lchown(p, e.UID, e.GID); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	if e.Kind != EntrySymlink {
		// chmod after chown: chown clears setuid and setgid.
		if err := unix.Chmod(p, e.Mode&0o7777); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	for name, value := range e.Xattrs {
		if err := unix.Lsetxattr(p, name, value, 0); err != nil {
			return fmt.Errorf("set xattr %s on %s: %w", name, p, err)
		}
	}
	if isDir {
		if e.Opaque {
			if err := w.markOpaque(rel); err != nil {
				return err
			}
		}
		ts := unix.NsecToTimespec(e.MTime)
		w.dirTimes = append(w.dirTimes, dirTime{rel: rel, atime: ts, mtime: ts})
		return nil
	}
	return w.setTimes(p, e.MTime)
}

func (w *snapWriter) setTimes(p string, mtime int64) error {
	ts := []unix.Timespec{unix.NsecToTimespec(mtime), unix.NsecToTimespec(mtime)}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", p, err)
	}
	return nil
}

// ensureParent creates parent directories the manifest does not list
// (whiteouts captured from layers that lack them).
func (w *snapWriter) ensureParent(dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	var st unix.Stat_t
	err := unix.Lstat(w.abs(dir), &st)
	if err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("%s is not a directory", w.abs(dir))
		}
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("lstat %s: %w", w.abs(dir), err)
	}
	if err := w.ensureParent(path.Dir(dir)); err != nil {
		return err
	}
	return w.mkdirImplied(dir, false)
}

// mkdirImplied creates a directory the manifest does not describe, with the
// lower's attributes when RestoreOptions.Lower is set.
func (w *snapWriter) mkdirImplied(rel string, opaque bool) error {
	e := ManifestEntry{Path: rel, Kind: EntryDir, Mode: 0o755, Opaque: opaque}
	e.MTime = time.Now().UnixNano()
	if w.opts.Lower != "" {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(w.opts.Lower, filepath.FromSlash(rel)), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			e.Mode = st.Mode & 0o7777
			e.UID, e.GID = int(st.Uid), int(st.Gid)
			e.MTime = st.Mtim.Nano()
		}
	}
	if err := w.ensureParent(path.Dir(rel)); err != nil {
		return err
	}
	if err := os.Mkdir(w.abs(rel), 0o700); err != nil {
		return err
	}
	return w.applyAttrs(rel, &e, true)
}

// finishDirTimes sets directory times, deepest first, once nothing more
// will be created inside them.
func (w *snapWriter) finishDirTimes() error {
	for i := len(w.dirTimes) - 1; i >= 0; i-- {
		dt := w.dirTimes[i]
		p := w.abs(dt.rel)
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{dt.atime, dt.mtime}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("set times of %s: %w", p, err)
		}
	}
	w.dirTimes = w.dirTimes[:0]
	return nil
}
