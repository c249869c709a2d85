package local

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/provlog"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/store"
)

// SessionWatch tells a session's init which World layers to watch while the
// command runs (DESIGN.md, Evidence). All paths are absolute host paths; the
// init opens them before it hides the state root and reaches them through its
// own descriptors afterwards.
type SessionWatch struct {
	Upper      string          `json:"upper"`
	Lower      string          `json:"lower"` // the source: bases are read from it
	Objects    string          `json:"objects"`
	Bases      string          `json:"bases"`
	Provenance string          `json:"provenance"` // dir of <session>.jsonl files
	Dialect    overlay.Dialect `json:"dialect"`
	Ignore     []string        `json:"ignore,omitempty"` // besides .git/
	// MaxWatches bounds the directories watched; 0 = DefaultMaxWatches.
	MaxWatches int `json:"max_watches,omitempty"`
}

// DefaultMaxWatches bounds the inotify watches of one session: deeper or later
// directories past it are still covered by the walk at session end, only not
// within milliseconds.
const DefaultMaxWatches = 8192

const (
	watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
		unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_EXCL_UNLINK | unix.IN_ONLYDIR
	// provFlushInterval bounds how stale provenance on disk is while a session runs.
	provFlushInterval = 500 * time.Millisecond
	// CtimeSlack: file times come from a coarse clock (a tick behind), so the
	// end walk also takes entries stamped a little before the session began.
	CtimeSlack = 10 * time.Millisecond
)

// upperWatcher runs in the session init: it watches the World's upper layer
// with inotify, captures the base of every path the moment it is copied up
// (while the source still holds it) and records which paths the session wrote.
type upperWatcher struct {
	session string
	spec    SessionWatch
	started time.Time

	clones          []int  // detached mounts and fds kept open for the whole session
	upper, lower    string // /proc/self/fd/N paths
	upperFD         int    // the upper's detached mount (one of clones)
	provFD          int
	store           *store.Store
	idx             BaseIndex
	ign             *overlay.Ignore
	maxWatches      int
	ino             int
	wakeR, wakeW    int
	storeErr, igErr error

	// Touched only by the loop goroutine (and by finish after it stopped).
	wds      map[int]string // watch descriptor -> dir, relative ("" = the upper root)
	dirs     map[string]int
	limitHit bool
	based    map[string]bool // bases known to exist
	prov     *os.File

	mu     sync.Mutex
	recs   map[string]*provlog.Record
	dirty  map[string]bool
	warned map[string]bool
	done   chan struct{}
	stop   chan struct{}
	// finishing: the session's processes are gone and finish's walk will
	// look at every directory; the initial watch walk stops where it is
	// (for a short command it would otherwise finish first, O(upper)).
	finishing atomic.Bool
}

// openUpperWatch prepares the watcher before the init changes its mounts: the
// layer dirs are opened (writable ones as detached mount clones, so strict
// isolation's read-only remount of the host neither blocks on them nor
// covers them) and the upper root is watched, so no event of the command is
// lost; the rest happens in start, off the session's start path.
func openUpperWatch(spec SessionWatch, session string) (_ *upperWatcher, err error) {
	w := &upperWatcher{
		session: session, spec: spec, started: time.Now(), provFD: -1, upperFD: -1, ino: -1, wakeR: -1, wakeW: -1,
		wds: map[int]string{}, dirs: map[string]int{}, based: map[string]bool{},
		recs: map[string]*provlog.Record{}, dirty: map[string]bool{}, warned: map[string]bool{},
		done: make(chan struct{}), stop: make(chan struct{}),
	}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	w.maxWatches = spec.MaxWatches
	if w.maxWatches <= 0 {
		w.maxWatches = DefaultMaxWatches
	}
	for _, d := range []string{spec.Objects, spec.Bases, spec.Provenance} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
	}
	clone := func(p string) (string, int, error) {
		if n, ok := strings.CutPrefix(p, "/proc/self/fd/"); ok {
			// Already a clone, held by a resident init for every session.
			if fd, err := strconv.Atoi(n); err == nil {
				return p, fd, nil
			}
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return "", -1, fmt.Errorf("watch: clone %s: %w", p, err)
		}
		w.clones = append(w.clones, fd)
		return "/proc/self/fd/" + strconv.Itoa(fd), fd, nil
	}
	if w.upper, w.upperFD, err = clone(spec.Upper); err != nil {
		return nil, err
	}
	objects, _, err := clone(spec.Objects)
	if err != nil {
		return nil, err
	}
	bases, _, err := clone(spec.Bases)
	if err != nil {
		return nil, err
	}
	if _, w.provFD, err = clone(spec.Provenance); err != nil {
		return nil, err
	}
	// The source is only read: a plain descriptor, taken before the World's
	// view is bound over its path.
	lowerFD, err := unix.Open(spec.Lower, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("watch: open source %s: %w", spec.Lower, err)
	}
	w.clones = append(w.clones, lowerFD)
	w.lower = "/proc/self/fd/" + strconv.Itoa(lowerFD)
	w.idx = BaseIndex{Dir: bases}
	// Opening the store touches only its root; the fan-out dirs exist.
	w.store, w.storeErr = store.OpenStore(objects)
	if w.ino, err = unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err != nil {
		return nil, fmt.Errorf("watch: inotify: %w", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	w.wakeR, w.wakeW = p[0], p[1]
	if !w.addWatch("") {
		return nil, errors.New("watch: cannot watch the upper root")
	}
	return w, nil
}

// start runs the watcher until finish.
func (w *upperWatcher) start() { go w.loop() }

func (w *upperWatcher) close() {
	for _, fd := range []int{w.ino, w.wakeR, w.wakeW} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	w.ino, w.wakeR, w.wakeW = -1, -1, -1
	if w.prov != nil {
		w.prov.Close()
		w.prov = nil
	}
	for _, fd := range w.clones {
		unix.Close(fd)
	}
	w.clones = nil
	w.upperFD = -1
}

// full is the host-visible path of rel in the upper.
func (w *upperWatcher) full(rel string) string {
	if rel == "" {
		return w.upper
	}
	return w.upper + "/" + rel
}

func (w *upperWatcher) warn(key, format string, a ...any) {
	w.mu.Lock()
	seen := w.warned[key]
	w.warned[key] = true
	w.mu.Unlock()
	if !seen {
		fmt.Fprintf(os.Stderr, "session watcher: "+format+"\n", a...)
	}
}

// addWatch watches one upper directory; false when the bound is reached or
// the dir is gone.
func (w *upperWatcher) addWatch(rel string) bool {
	if _, ok := w.dirs[rel]; ok {
		return true
	}
	if len(w.dirs) >= w.maxWatches {
		if !w.limitHit {
			w.limitHit = true
			w.warn("limit", "watch limit of %d directories reached: changes deeper down are recorded at session end", w.maxWatches)
		}
		return false
	}
	wd, err := unix.InotifyAddWatch(w.ino, w.full(rel), watchMask)
	if err == nil {
		// A directory renamed within the upper keeps its inode and so its
		// watch: the watch now stands for the new path.
		if old, ok := w.wds[wd]; ok && old != rel {
			delete(w.dirs, old)
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			w.limitHit = true
			w.warn("enospc", "out of inotify watches (fs.inotify.max_user_watches): changes deeper down are recorded at session end")
		}
		return false
	}
	w.wds[wd] = rel
	w.dirs[rel] = wd
	return true
}

func (w *upperWatcher) ignored(rel string, isDir bool) bool {
	if rel == "" {
		return false
	}
	if w.ign == nil && w.igErr == nil {
		w.ign, w.igErr = overlay.NewIgnore(append([]string{".git/"}, w.spec.Ignore...)...)
		if w.igErr != nil {
			w.warn("ignore", "ignore patterns: %v", w.igErr)
		}
	}
	if overlay.InMetaTree(w.spec.Dialect, rel) {
		return false // the meta tree is classified, not ignored
	}
	return w.ign.Match(rel, isDir)
}

// loop: walk the existing dirs to watch them, then handle events until stop.
func (w *upperWatcher) loop() {
	defer close(w.done)
	w.watchTree("", false)
	buf := make([]byte, 64<<10)
	lastFlush := time.Now()
	for {
		fds := []unix.PollFd{{Fd: int32(w.ino), Events: unix.POLLIN}, {Fd: int32(w.wakeR), Events: unix.POLLIN}}
		_, err := unix.Poll(fds, int(provFlushInterval/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			w.warn("poll", "poll: %v", err)
			return
		}
		w.drain(buf)
		if time.Since(lastFlush) >= provFlushInterval {
			w.flush()
			lastFlush = time.Now()
		}
		if fds[1].Revents != 0 {
			return
		}
	}
}

// drain reads every queued event, coalesced by path, and handles each path once.
func (w *upperWatcher) drain(buf []byte) {
	type pending struct{ mask uint32 }
	for {
		n, err := unix.Read(w.ino, buf)
		if n <= 0 || err != nil {
			return
		}
		batch := map[string]*pending{}
		var order []string
		overflow := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				overflow = true
				continue
			}
			dir, ok := w.wds[int(ev.Wd)]
			if !ok {
				continue
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(w.wds, int(ev.Wd))
				delete(w.dirs, dir)
				continue
			}
			name := cString(nameBytes)
			rel := dir
			if name != "" {
				rel = joinRel(dir, name)
			}
			if rel == "" {
				continue // the upper root's own xattrs (overlay bookkeeping)
			}
			p := batch[rel]
			if p == nil {
				p = &pending{}
				batch[rel] = p
				order = append(order, rel)
			}
			p.mask |= ev.Mask
		}
		for _, rel := range order {
			p := batch[rel]
			if p.mask&(unix.IN_CREATE|unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO) == 0 {
				w.gone(rel, time.Now()) // gone from the upper
				continue
			}
			w.handle(rel, time.Now(), p.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0)
		}
		if overflow {
			w.warn("overflow", "inotify queue overflowed: rescanning the upper")
			w.walkChanged("", w.started.Add(-CtimeSlack))
		}
	}
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// watchTree watches dir and every directory under it (up to the bound). With
// record, what it finds was made by this session (a new directory whose
// content may have arrived before its watch) and is handled as written.
func (w *upperWatcher) watchTree(dir string, record bool) {
	if w.ignored(dir, true) || !record && w.finishing.Load() {
		return // the end walk covers what is left unwatched
	}
	w.addWatch(dir)
	ents, err := os.ReadDir(w.full(dir))
	if err != nil {
		return
	}
	for _, d := range ents {
		rel := joinRel(dir, d.Name())
		if record {
			w.handle(rel, time.Now(), false)
		}
		if d.IsDir() && !w.limitHit {
			w.watchTree(rel, record)
		}
	}
}

// walkChanged handles every upper entry changed (ctime) since `since` that
// was not seen yet: what inotify missed (a directory written before its
// watch was added, a queue overflow, the watch bound).
func (w *upperWatcher) walkChanged(dir string, since time.Time) {
	at, name := unix.AT_FDCWD, w.full(dir)
	if w.upperFD >= 0 {
		at, name = w.upperFD, "."
		if dir != "" {
			name = dir
		}
	}
	fd, err := unix.Openat(at, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	w.walkChangedAt(fd, dir, since)
}

// walkChangedAt is walkChanged of the directory open on fd (which it
// closes): entries are stat'ed and opened relative to their directory's
// descriptor, not by a path resolved from /proc/self/fd each time.
func (w *upperWatcher) walkChangedAt(fd int, dir string, since time.Time) {
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return
	}
	for _, d := range ents {
		rel := joinRel(dir, d.Name())
		if w.ignored(rel, d.IsDir()) {
			continue
		}
		w.mu.Lock()
		_, seen := w.recs[rel]
		w.mu.Unlock()
		if !seen {
			var st unix.Stat_t
			if unix.Fstatat(fd, d.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && !time.Unix(st.Ctim.Unix()).Before(since) {
				// A directory's ctime moves when entries are added to it: only one
				// this session made (absent from the source) counts as written.
				if !d.IsDir() || w.lowerType(rel) == 0 {
					w.handle(rel, time.Unix(st.Ctim.Unix()), false)
				}
			}
		}
		if d.IsDir() {
			if cfd, err := unix.Openat(fd, d.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
				w.walkChangedAt(cfd, rel, since)
			}
		}
	}
}

// gone records the removal of a path this session had created: it leaves
// no whiteout (the source never had it), only its absence, and its blame
// must not end on "create".
func (w *upperWatcher) gone(rel string, at time.Time) {
	var st unix.Stat_t
	if unix.Lstat(w.full(rel), &st) == nil || w.lowerType(rel) != 0 {
		return
	}
	w.mu.Lock()
	r := w.recs[rel]
	known := r != nil && r.Op != provlog.OpDelete
	w.mu.Unlock()
	if known {
		w.record(rel, provlog.OpDelete, at)
	}
}

// lowerType is the source's type of rel (0 = absent).
func (w *upperWatcher) lowerType(rel string) overlay.FileType {
	st, err := overlay.LstatBeneath(w.lower, rel)
	if err != nil {
		return 0
	}
	return overlay.FileTypeOf(st.Mode())
}

// handle classifies one upper entry that was created or changed, captures its
// base and records the write. A directory that just appeared (created) is
// watched and its content handled too, since that may predate the watch.
func (w *upperWatcher) handle(rel string, at time.Time, created bool) {
	target, op, isDir, ok := w.classify(rel)
	if !ok {
		w.gone(rel, at) // written, then removed before we looked
		return
	}
	if w.ignored(target, isDir) {
		return
	}
	if !w.based[target] {
		if w.store == nil {
			w.warn("store", "bases not captured: %v", w.storeErr)
		} else if _, err := CaptureBase(w.store, w.idx, w.lower, w.upper, target); err != nil {
			w.warn("capture:"+target, "capture base of %s: %v", target, err)
		} else {
			w.based[target] = true
		}
	}
	w.record(target, op, at)
	if created && isDir {
		w.watchTree(rel, true)
	}
}

// classify maps an upper entry to the source path it changes and how:
// whiteouts (of every dialect) are deletions of the path they hide, markers
// and bookkeeping are nothing.
func (w *upperWatcher) classify(rel string) (target, op string, isDir, ok bool) {
	m, err := overlay.ClassifyUpperEntry(w.spec.Dialect, w.upper, rel)
	switch {
	case err != nil:
		return "", "", false, false // already gone (a temp file renamed away)
	case m.Marker == overlay.MarkerWhiteout:
		return m.Target, provlog.OpDelete, false, true
	case m.Marker != overlay.MarkerPlain:
		return "", "", false, false // an opaque mark or bookkeeping
	}
	isDir = m.IsDir
	if w.lowerType(rel) == 0 {
		return rel, provlog.OpCreate, isDir, true
	}
	return rel, provlog.OpWrite, isDir, true
}

func (w *upperWatcher) record(rel, op string, at time.Time) {
	at = at.UTC()
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.recs[rel]
	if r == nil {
		r = &provlog.Record{Path: rel, Op: op, First: at, Last: at}
		w.recs[rel] = r
	} else {
		if at.After(r.Last) {
			r.Last = at
		}
		if at.Before(r.First) {
			r.First = at
		}
		// A path the session created stays "create" however often it is
		// written; a deletion (or a re-creation after one) replaces the op.
		if op == provlog.OpDelete || r.Op == provlog.OpDelete || r.Op == "" {
			r.Op = op
		}
	}
	w.dirty[rel] = true
}

// flush appends the records written since the last flush, one write(2).
func (w *upperWatcher) flush() {
	w.mu.Lock()
	if len(w.dirty) == 0 {
		w.mu.Unlock()
		return
	}
	var b []byte
	for rel := range w.dirty {
		line, err := provlog.JSONLine(w.recs[rel])
		if err == nil {
			b = append(b, line...)
		}
	}
	w.dirty = map[string]bool{}
	w.mu.Unlock()
	if w.prov == nil {
		fd, err := unix.Openat(w.provFD, w.session+".jsonl", unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err != nil {
			w.warn("prov", "record provenance: %v", err)
			return
		}
		w.prov = os.NewFile(uintptr(fd), w.session+".jsonl")
	}
	if _, err := w.prov.Write(b); err != nil {
		w.warn("provw", "record provenance: %v", err)
	}
}

// finish stops the loop once the command and everything it started are gone:
// it handles what is still queued, walks the upper for what inotify missed,
// and writes the provenance out. It returns the number
// of paths the session wrote.
func (w *upperWatcher) finish() int {
	w.finishing.Store(true)
	_, _ = unix.Write(w.wakeW, []byte{0})
	<-w.done
	w.drain(make([]byte, 64<<10))
	w.walkChanged("", w.started.Add(-CtimeSlack))
	w.flush()
	if w.prov != nil {
		_ = w.prov.Sync()
	}
	w.mu.Lock()
	n := len(w.recs)
	w.mu.Unlock()
	// The inotify descriptor is left to the init's exit: closing it waits for
	// a kernel grace period (5-40 ms) that would delay the recorded end.
	return n
}
