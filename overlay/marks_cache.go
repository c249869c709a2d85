package overlay

import (
	"io/fs"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// llistxattrCalls counts llistxattr calls, for tests.
var llistxattrCalls atomic.Int64

// A diff resolves every changed path through the layers one component at a
// time, and each upper directory on the way had its xattrs listed again:
// nine llistxattr a path for a three-deep tree. The marks of a directory
// (opaque, redirect) and its opaque marker file are kept here instead,
// keyed by the directory's identity and trusted only while its ctime, which
// every xattr or entry change moves, is what it was and older than the
// clock's coarse tick (the racily-clean case).

type marksKey struct {
	dev, ino uint64
	dialect  Dialect
}

type marksEntry struct {
	ctime      int64
	marks      dirMarks
	opaqueFile bool
}

// marksCacheMax bounds the cache (a long-lived TUI over many Worlds);
// reaching it starts over.
const marksCacheMax = 1 << 17

// marksTrustAge is how old a directory's ctime must be before its marks are
// cached: a change within the same timestamp tick would not move it.
const marksTrustAge = time.Second

var marksCache = struct {
	sync.Mutex
	m map[marksKey]marksEntry
}{m: map[marksKey]marksEntry{}}

// dirMarksCached is readMarks and hasOpaqueFile of an upper directory, from
// the cache when the directory has not changed since they were read.
func (r Rules) dirMarksCached(full string, info fs.FileInfo) (dirMarks, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || !info.IsDir() {
		return r.readMarks(full, info), r.hasOpaqueFile(full)
	}
	key := marksKey{dev: st.Dev, ino: st.Ino, dialect: r.dialect}
	ctime := st.Ctim.Nano()
	marksCache.Lock()
	e, hit := marksCache.m[key]
	marksCache.Unlock()
	if hit && e.ctime == ctime {
		return e.marks, e.opaqueFile
	}
	m, opaque := r.readMarks(full, info), r.hasOpaqueFile(full)
	if time.Since(time.Unix(0, ctime)) > marksTrustAge {
		marksCache.Lock()
		if len(marksCache.m) >= marksCacheMax {
			marksCache.m = map[marksKey]marksEntry{}
		}
		marksCache.m[key] = marksEntry{ctime: ctime, marks: m, opaqueFile: opaque}
		marksCache.Unlock()
	}
	return m, opaque
}
