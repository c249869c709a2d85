package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
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

// ErrUnsupportedUpper means the upper uses an overlay feature whose meaning
// lives outside the upper (redirect_dir, metacopy), so it cannot be frozen.
var ErrUnsupportedUpper = errors.New("upper layer cannot be snapshotted")

// CaptureStats counts what one capture saw and did.
type CaptureStats struct {
	Files, Dirs, Symlinks, Whiteouts, Opaque, Other int
	Hashed                                          int   // files read and hashed (stat cache misses)
	BuildState                                      int   // top-most build-state entries left out (CaptureOptions.BuildState)
	NewObjects                                      int   // objects the store did not have
	NewBytes                                        int64 // bytes of those objects
	Duration                                        time.Duration
	// Unsynced are the new objects CaptureOptions.DeferSync left for the
	// caller to make durable (Store.SyncObjects) before a record names them.
	Unsynced []ObjectID
}

// racyWindow (a var only so tests can widen it): a file whose ctime is this close to the moment it was read
// is not trusted by the stat cache next time. On kernels with coarse
// timestamps a second write within the same clock tick keeps size, mtime
// and ctime, and the cache would miss it (git's "racily clean" problem).
var racyWindow = 10 * time.Millisecond

// StatCache remembers, per upper path, the stat of a file when it was last
// hashed and the object it became, so a capture reads only files whose
// size, mtime, inode or ctime changed. Keep one per upper layer. It is not
// safe for concurrent use.
type StatCache struct {
	entries map[string]statCacheEntry
}

type statCacheEntry struct {
	Size, MTime, CTime int64
	Ino                uint64
	Object             ObjectID
}

// NewStatCache returns an empty cache.
func NewStatCache() *StatCache { return &StatCache{entries: make(map[string]statCacheEntry)} }

// Len is the number of cached files.
func (c *StatCache) Len() int { return len(c.entries) }

const statCacheMagic = "strata-statcache 1"

// LoadStatCache reads a cache saved by Save. A missing file gives an empty
// cache. A damaged one gives an error wrapping *CorruptManifestError; the
// cache is only an accelerator, so callers may log it and use NewStatCache.
func LoadStatCache(path string) (*StatCache, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewStatCache(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("load stat cache: %w", err)
	}
	corrupt := func(reason string) error {
		return fmt.Errorf("load stat cache: %w", &CorruptManifestError{Path: path, Reason: reason})
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, corrupt("truncated")
	}
	cut := bytes.LastIndexByte(data[:len(data)-1], '\n')
	trailer := strings.Fields(string(data[cut+1 : len(data)-1]))
	body := data[:cut+1]
	sum := sha256.Sum256(body)
	if len(trailer) != 3 || trailer[0] != "sum" || trailer[2] != hex.EncodeToString(sum[:]) {
		return nil, corrupt("checksum mismatch or missing (truncated?)")
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if lines[0] != statCacheMagic {
		return nil, corrupt("not a strata stat cache")
	}
	c := &StatCache{entries: make(map[string]statCacheEntry, len(lines))}
	for _, line := range lines[1:] {
		f := strings.SplitN(line, " ", 6)
		if len(f) != 6 {
			return nil, corrupt("short line")
		}
		var e statCacheEntry
		var errs [4]error
		e.Size, errs[0] = strconv.ParseInt(f[0], 10, 64)
		e.MTime, errs[1] = strconv.ParseInt(f[1], 10, 64)
		e.Ino, errs[2] = strconv.ParseUint(f[2], 10, 64)
		e.CTime, errs[3] = strconv.ParseInt(f[3], 10, 64)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, corrupt(err.Error())
		}
		e.Object = ObjectID(f[4])
		p, err := strconv.Unquote(f[5])
		if err != nil || !e.Object.Valid() {
			return nil, corrupt("bad entry")
		}
		c.entries[p] = e
	}
	return c, nil
}

// Save writes the cache atomically.
func (c *StatCache) Save(path string) error {
	var b bytes.Buffer
	b.WriteString(statCacheMagic + "\n")
	for p, e := range c.entries {
		fmt.Fprintf(&b, "%d %d %d %d %s %s\n", e.Size, e.MTime, e.Ino, e.CTime, e.Object, strconv.Quote(p))
	}
	sum := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, "sum %d %s\n", len(c.entries), hex.EncodeToString(sum[:]))
	// No fsync: the cache only saves rehashing. A cache lost or reverted by
	// a crash is either caught by its checksum or still consistent, since an
	// entry is trusted only while size, mtime, inode and ctime all match.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save stat cache %s: %w", path, err)
	}
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("save stat cache %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save stat cache %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save stat cache %s: %w", path, err)
	}
	return nil
}

func statKey(st *unix.Stat_t) statCacheEntry {
	return statCacheEntry{Size: st.Size, MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(), Ino: st.Ino}
}

// CaptureUpper freezes the upper layer at upper, written in dialect d
// (DialectAuto: DetectDialect), into
// a manifest whose file contents are in store. Cost is O(entries in the
// upper); only files that cache (may be nil) does not vouch for are read.
// cache is updated in place; save it after writing the manifest. New
// objects are made durable (Store.Sync) before CaptureUpper returns unless
// the store fsyncs each object. The upper must be quiescent (World paused or
// unmounted); a file that changes while read is retried once, then fails
// with ErrFileChanged. Callers that run GC concurrently hold
// store.LockShared until the manifest is written.
func CaptureUpper(ctx context.Context, store *Store, upper string, d overlay.Dialect, cache *StatCache) (*Manifest, CaptureStats, error) {
	return CaptureUpperWith(ctx, store, upper, d, cache, CaptureOptions{})
}

// CaptureOptions tunes CaptureUpperWith.
type CaptureOptions struct {
	// BuildState matches the paths that are build state (a World's ignore
	// and build patterns): an entry it matches, and everything under it,
	// is left out of the manifest without being read, hashed or descended
	// into, so a snapshot's cost follows the source changes, not the build
	// outputs. A whiteout is matched as a file and as a directory. nil
	// captures everything.
	BuildState *overlay.Ignore
	// DeferSync leaves the new objects unsynced and lists them in
	// CaptureStats.Unsynced, so the caller can make them durable at the same
	// time as the manifest that names them (one fsync round, not two). The
	// caller must call Store.SyncObjects before that manifest is renamed
	// into place.
	DeferSync bool
}

// CaptureUpperWith is CaptureUpper with options.
func CaptureUpperWith(ctx context.Context, store *Store, upper string, d overlay.Dialect, cache *StatCache, opts CaptureOptions) (*Manifest, CaptureStats, error) {
	start := time.Now()
	var stats CaptureStats
	if d == overlay.DialectAuto {
		detected, err := overlay.DetectDialect(upper)
		if err != nil {
			return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
		}
		d = detected
	}
	if err := restoreCheckDialect(d); err != nil {
		return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
	}
	r, err := overlay.RulesFor(d)
	if err != nil {
		return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
	}
	sc := &snapScanner{upper: upper, d: d, r: r, index: make(map[string]int), build: opts.BuildState}
	rootSt, err := sc.lstat("")
	if err != nil {
		return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
	}
	if rootSt.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, stats, fmt.Errorf("capture upper %s: not a directory", upper)
	}
	root, err := sc.entryFor("", &rootSt)
	if err != nil {
		return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
	}
	if err := sc.scanDir(ctx, "", &root); err != nil {
		return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
	}
	if d == overlay.DialectUnionfs {
		if err := sc.scanUnionfsMeta(); err != nil {
			return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
		}
	}
	entries := sc.finish()
	stats.BuildState = sc.buildSkipped

	if cache == nil {
		cache = NewStatCache()
	}
	seen := make(map[string]struct{}, len(cache.entries))
	var jobs []int
	for i := range entries {
		e := &entries[i]
		switch e.Kind {
		case EntryFile:
			stats.Files++
			seen[e.Path] = struct{}{}
			key := sc.stats[e.Path]
			if c, ok := cache.entries[e.Path]; ok && c.Size == key.Size && c.MTime == key.MTime && c.CTime == key.CTime && c.Ino == key.Ino && store.Has(c.Object) {
				e.Object = c.Object
				continue
			}
			jobs = append(jobs, i)
		case EntryDir:
			stats.Dirs++
			if e.Opaque {
				stats.Opaque++
			}
		case EntrySymlink:
			stats.Symlinks++
		case EntryWhiteout:
			stats.Whiteouts++
		case EntryOther:
			stats.Other++
		}
	}
	for p := range cache.entries {
		if _, ok := seen[p]; !ok {
			delete(cache.entries, p)
		}
	}

	type result struct {
		created bool
		size    int64
		st      unix.Stat_t
		err     error
	}
	results := make([]result, len(jobs))
	workers := min(runtime.GOMAXPROCS(0), 4, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				e := &entries[jobs[j]]
				id, n, created, st, err := putDeepFile(store, upper, e.Path)
				e.Object = id
				results[j] = result{created: created, size: n, st: st, err: err}
			}
		}()
	}
feed:
	for j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
	}
	for j, r := range results {
		e := &entries[jobs[j]]
		if r.err != nil {
			return nil, stats, fmt.Errorf("capture upper %s: %w", upper, r.err)
		}
		stats.Hashed++
		if r.created {
			stats.NewObjects++
			stats.NewBytes += r.size
		}
		// The entry describes the content that was read, so take size and
		// times from the stat that bracketed the read.
		e.Size, e.MTime = r.st.Size, r.st.Mtim.Nano()
		e.Mode = r.st.Mode & 0o7777
		e.UID, e.GID = int(r.st.Uid), int(r.st.Gid)
		key := statKey(&r.st)
		key.Object = e.Object
		if time.Unix(0, key.CTime).Before(start.Add(-racyWindow)) {
			cache.entries[e.Path] = key
		} else {
			delete(cache.entries, e.Path)
		}
	}
	if stats.NewObjects > 0 && !store.SyncEach {
		var created []ObjectID
		for j, r := range results {
			if r.created {
				created = append(created, entries[jobs[j]].Object)
			}
		}
		if opts.DeferSync {
			stats.Unsynced = created
		} else if err := store.syncObjects(created); err != nil {
			return nil, stats, fmt.Errorf("capture upper %s: %w", upper, err)
		}
	}
	stats.Duration = time.Since(start)
	return &Manifest{Version: ManifestVersion, Dialect: d, Root: root, Entries: entries}, stats, nil
}

// putDeepFile stores the file rel of upper, however deep it lies.
func putDeepFile(store *Store, upper, rel string) (ObjectID, int64, bool, unix.Stat_t, error) {
	p, release, err := overlay.ShortPathBeneath(upper, rel)
	if err != nil {
		return "", 0, false, unix.Stat_t{}, fmt.Errorf("store %s: %w", rel, err)
	}
	defer release()
	return store.putFileStat(p)
}

// snapScanner walks one upper and turns its entries into dialect-neutral form.
type snapScanner struct {
	upper   string
	d       overlay.Dialect
	r       overlay.Rules // d's vocabulary
	entries []ManifestEntry
	index   map[string]int            // path -> position in entries
	stats   map[string]statCacheEntry // file path -> stat seen by the walk
	// markers found by name (.wh.NAME, _HIDDEN~): path -> marker was a dir
	whiteouts map[string]bool
	// open: the directories being scanned -> their names for syscalls
	open map[string]string
	// build matches build state, left out (nil: none); buildSkipped counts it
	build        *overlay.Ignore
	buildSkipped int
}

// isBuildState says whether rel is build state; a whiteout (isDir unknown)
// is tried both ways.
func (sc *snapScanner) isBuildState(rel string, isDir, whiteout bool) bool {
	if sc.build == nil {
		return false
	}
	if sc.build.Match(rel, isDir) || whiteout && sc.build.Match(rel, !isDir) {
		sc.buildSkipped++
		return true
	}
	return false
}

// abs names rel for syscalls: under the directory being scanned, through
// its (maybe anchored, see anchorDir) name, so a deep tree never hands a
// syscall a path longer than PATH_MAX.
func (sc *snapScanner) abs(rel string) string {
	if rel == "" {
		return sc.upper
	}
	parent, base := overlay.SplitRel(rel)
	if parent == "." {
		parent = ""
	}
	if dir, ok := sc.open[parent]; ok {
		return dir + "/" + base
	}
	return filepath.Join(sc.upper, filepath.FromSlash(rel))
}

func (sc *snapScanner) lstat(rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Lstat(sc.abs(rel), &st); err != nil {
		return st, &fs.PathError{Op: "lstat", Path: sc.abs(rel), Err: err}
	}
	return st, nil
}

func (sc *snapScanner) addWhiteoutMarker(rel string, isDir bool) {
	if sc.isBuildState(rel, isDir, true) {
		return
	}
	if sc.whiteouts == nil {
		sc.whiteouts = make(map[string]bool)
	}
	sc.whiteouts[rel] = isDir
}

func (sc *snapScanner) scanDir(ctx context.Context, rel string, dir *ManifestEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dirPath, release, err := overlay.AnchorDir(sc.abs(rel))
	if err != nil {
		return fmt.Errorf("read dir %s: %w", rel, err)
	}
	defer release()
	if sc.open == nil {
		sc.open = make(map[string]string)
	}
	sc.open[rel] = dirPath
	defer delete(sc.open, rel)
	names, err := readDirNames(dirPath)
	if err != nil {
		return fmt.Errorf("read dir %s: %w", sc.abs(rel), err)
	}
	slices.Sort(names)
	for _, name := range names {
		child := name
		if rel != "" {
			child = rel + "/" + name
		}
		switch kind, hidden := sc.r.ClassifyName(name, rel == ""); kind {
		case overlay.MarkerSkip:
			continue
		case overlay.MarkerOpaque:
			dir.Opaque = true
			continue
		case overlay.MarkerWhiteout:
			sc.addWhiteoutMarker(overlay.JoinRel(rel, hidden), false)
			continue
		}
		st, err := sc.lstat(child)
		if errors.Is(err, unix.ENOENT) {
			continue // gone since readdir; the upper should be quiescent, but do not fail on it
		}
		if err != nil {
			return err
		}
		isCharWhiteout := sc.r.IsWhiteoutDev(st.Mode, st.Rdev)
		if sc.isBuildState(child, st.Mode&unix.S_IFMT == unix.S_IFDIR, isCharWhiteout) {
			continue
		}
		e, err := sc.entryFor(child, &st)
		if err != nil {
			return err
		}
		if isCharWhiteout {
			e = ManifestEntry{Path: child, Kind: EntryWhiteout, UID: int(st.Uid), GID: int(st.Gid), MTime: st.Mtim.Nano()}
		}
		sc.index[child] = len(sc.entries)
		sc.entries = append(sc.entries, e)
		if e.Kind == EntryFile {
			if sc.stats == nil {
				sc.stats = make(map[string]statCacheEntry)
			}
			sc.stats[child] = statKey(&st)
		}
		if e.Kind == EntryDir {
			// entries may grow while scanning the subtree: re-find by index.
			i := len(sc.entries) - 1
			sub := sc.entries[i]
			if err := sc.scanDir(ctx, child, &sub); err != nil {
				return err
			}
			sc.entries[i].Opaque = sub.Opaque
		}
	}
	return nil
}

// entryFor describes the entry at rel from its lstat, reading xattrs for
// dirs and files (opaque marks, xattr whiteouts, user attributes).
func (sc *snapScanner) entryFor(rel string, st *unix.Stat_t) (ManifestEntry, error) {
	e := ManifestEntry{
		Path:  rel,
		Mode:  st.Mode & 0o7777,
		UID:   int(st.Uid),
		GID:   int(st.Gid),
		MTime: st.Mtim.Nano(),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Kind, e.Size = EntryFile, st.Size
	case unix.S_IFDIR:
		e.Kind = EntryDir
	case unix.S_IFLNK:
		e.Kind = EntrySymlink
		target, err := os.Readlink(sc.abs(rel))
		if err != nil {
			return e, err
		}
		e.Target = target
		return e, nil
	default:
		e.Kind = EntryOther
		e.Mode = st.Mode & (unix.S_IFMT | 0o7777)
		e.Rdev = st.Rdev
		return e, nil
	}
	xattrs, err := snapReadXattrs(sc.abs(rel))
	if err != nil {
		return e, err
	}
	for name, value := range xattrs {
		switch sc.r.ClassifyXattr(name) {
		case overlay.MarkerRedirect, overlay.MarkerMetacopy:
			return e, fmt.Errorf("%s carries %s: %w (mount without redirect_dir and metacopy)", sc.abs(rel), name, ErrUnsupportedUpper)
		case overlay.MarkerOpaque:
			if e.Kind == EntryDir && overlay.IsOpaqueValue(value) {
				e.Opaque = true
			}
		case overlay.MarkerWhiteout:
			if e.Kind == EntryFile && st.Size == 0 {
				return ManifestEntry{Path: rel, Kind: EntryWhiteout, UID: e.UID, GID: e.GID, MTime: e.MTime}, nil
			}
		}
		if snapKeepXattr(name) {
			if e.Xattrs == nil {
				e.Xattrs = make(map[string][]byte)
			}
			e.Xattrs[name] = value
		}
	}
	return e, nil
}

// snapKeepXattr says whether an xattr belongs to the user's file rather than
// to an overlay's bookkeeping or to the host's security labelling.
func snapKeepXattr(name string) bool {
	if overlay.IsOverlayXattr(name) {
		return false
	}
	for _, skip := range []string{"security.selinux", "security.apparmor"} {
		if strings.HasPrefix(name, skip) {
			return false
		}
	}
	return true
}

func snapReadXattrs(p string) (map[string][]byte, error) {
	var buf [1024]byte
	list := buf[:]
	n, err := unix.Llistxattr(p, list)
	if errors.Is(err, unix.ERANGE) {
		size, err2 := unix.Llistxattr(p, nil)
		if err2 != nil {
			return nil, fmt.Errorf("list xattrs of %s: %w", p, err2)
		}
		list = make([]byte, size)
		n, err = unix.Llistxattr(p, list)
	}
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs of %s: %w", p, err)
	}
	if n == 0 {
		return nil, nil
	}
	out := make(map[string][]byte)
	for _, name := range strings.Split(strings.TrimRight(string(list[:n]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		value, err := snapGetXattr(p, name)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read xattr %s of %s: %w", name, p, err)
		}
		out[name] = value
	}
	return out, nil
}

func snapGetXattr(p, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, name, buf)
		if errors.Is(err, unix.ERANGE) {
			size, err := unix.Lgetxattr(p, name, nil)
			if err != nil {
				return nil, err
			}
			buf = make([]byte, size+1)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n:n], nil
	}
}

// scanUnionfsMeta reads unionfs-fuse's meta tree: a PATH_HIDDEN~ file or dir
// under .unionfs-fuse/ (or .unionfs/) marks PATH deleted.
func (sc *snapScanner) scanUnionfsMeta() error {
	for _, meta := range overlay.UnionfsMetaDirs {
		base := filepath.Join(sc.upper, meta)
		if st, err := os.Lstat(base); err != nil || !st.IsDir() {
			continue
		}
		err := filepath.WalkDir(base, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := de.Name()
			target, ok := overlay.UnionfsHiddenTarget(name)
			if p == base || !ok {
				return nil
			}
			rel, err := filepath.Rel(base, p)
			if err != nil {
				return err
			}
			sc.addWhiteoutMarker(strings.TrimSuffix(filepath.ToSlash(rel), name)+target, de.IsDir())
			if de.IsDir() {
				return fs.SkipDir
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read unionfs meta %s: %w", base, err)
		}
	}
	return nil
}

// finish merges name-marker whiteouts into the entries, drops entries that
// cannot exist (anything below a whiteout or a non-directory), and sorts.
func (sc *snapScanner) finish() []ManifestEntry {
	for p := range sc.whiteouts {
		if i, ok := sc.index[p]; ok {
			// A marker next to a real entry: the layer's own entry wins and,
			// for a directory, the lower's one stays hidden (OCI: a whiteout
			// applies to lower layers; unionfs: a leftover _HIDDEN~ dir).
			if sc.entries[i].Kind == EntryDir {
				sc.entries[i].Opaque = true
			}
			continue
		}
		sc.index[p] = len(sc.entries)
		sc.entries = append(sc.entries, ManifestEntry{Path: p, Kind: EntryWhiteout})
	}
	slices.SortFunc(sc.entries, func(a, b ManifestEntry) int { return strings.Compare(a.Path, b.Path) })
	out := sc.entries[:0]
	for _, e := range sc.entries {
		if parent := path.Dir(e.Path); parent != "." {
			if !snapParentAllows(out, parent) {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// snapParentAllows reports whether out (sorted, filtered so far) lets a
// child live under parent: parent is either a dir entry or absent (a
// whiteout in a directory the layer does not hold, e.g. unionfs).
func snapParentAllows(out []ManifestEntry, parent string) bool {
	i, ok := slices.BinarySearchFunc(out, parent, func(e ManifestEntry, p string) int { return strings.Compare(e.Path, p) })
	if ok {
		return out[i].Kind == EntryDir
	}
	// Absent parent: its own parent must allow it too (a marker for a/b/c
	// under a whiteout a is dropped).
	if up := path.Dir(parent); up != "." {
		return snapParentAllows(out, up)
	}
	return true
}
