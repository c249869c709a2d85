package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/fsx"
)

// ObjectID names a blob in the Store: the lowercase hex SHA-256 of its content.
type ObjectID string

// ParseObjectID checks that s is 64 lowercase hex digits; only such ids
// ever become part of a path.
func ParseObjectID(s string) (ObjectID, error) {
	if !validObjectID(s) {
		return "", fmt.Errorf("invalid object id %q", s)
	}
	return ObjectID(s), nil
}

// Valid reports whether id is 64 lowercase hex digits.
func (id ObjectID) Valid() bool { return validObjectID(string(id)) }

func validObjectID(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ErrFileChanged means a file kept changing while it was being stored.
var ErrFileChanged = errors.New("file changed while it was being read")

// CorruptObjectError says an object's content no longer matches its id (or
// it cannot be read back whole).
type CorruptObjectError struct {
	ID     ObjectID
	Path   string // the object's file in the store
	Reason string
	File   string // when restoring: the manifest path the object was for
	Err    error  // the underlying error, if any (fs.ErrNotExist for a missing object)
}

func (e *CorruptObjectError) Error() string {
	if e.File != "" {
		what := "is corrupt (" + e.Reason + ")"
		if errors.Is(e.Err, fs.ErrNotExist) {
			what = "is missing from the store"
		}
		return fmt.Sprintf("snapshot object %s… for %s %s; store file %s; strata gc --verify lists damaged objects", shortID(e.ID), e.File, what, e.Path)
	}
	return fmt.Sprintf("corrupt object %s (%s): %s", e.ID, e.Path, e.Reason)
}

func (e *CorruptObjectError) Unwrap() error { return e.Err }

func shortID(id ObjectID) string {
	if len(id) > 12 {
		return string(id[:12])
	}
	return string(id)
}

// DefaultGCGrace is how old an unreferenced object must be before GC removes it.
const DefaultGCGrace = 10 * time.Minute

// smallObjectLimit: files up to this size are read into memory once, hashed,
// and written only if the store lacks them; bigger ones are streamed.
const smallObjectLimit = 1 << 20

// Store is a content-addressed blob store shared by every World and snapshot.
// Layout under Root: <xx>/<remaining 62 hex digits> for objects (0444),
// .tmp/ for objects being written, .lock for the GC lock.
//
// Durability: by default Put does not fsync each object. Whoever is about to
// write a record that references new objects (a manifest) calls Sync first,
// which is one syncfs(2) of the store's file system: after it returns, every
// object put before it is on disk, so a manifest on disk never names an
// object that a crash could lose. An object put but never synced may be
// lost or truncated by a crash; no manifest names it, and Put replaces an
// existing object whose size is wrong instead of trusting it. Set SyncEach
// to fsync every object before it is renamed into place instead (slower for
// many small files; see bench_snapshot_test.go).
//
// Concurrency and GC: every method is safe for concurrent use, from several
// processes too. A snapshotter holds LockShared from its first Put until its
// manifest is durable and discoverable by the live-set function GC is given;
// GC holds LockExclusive while it lists the live set and deletes. As a second
// line of defence for writers that do not lock, GC never deletes an object
// modified less than GCGrace ago, and Put refreshes the mtime of an object it
// finds already present.
type Store struct {
	root string

	// SyncEach makes Put fsync every object before renaming it into place.
	SyncEach bool
	// GCGrace overrides DefaultGCGrace when non-zero (a negative value means no grace).
	GCGrace time.Duration

	fanout    sync.Map     // "xx" -> struct{}: fan-out dirs known to exist
	noReflink atomic.Bool  // FICLONE failed once: use copy_file_range only
	reflinked atomic.Int64 // objects made by FICLONE (Reflinked)
	noTmpfile atomic.Bool  // O_TMPFILE unsupported: use named temp files
}

// OpenStore opens (creating it if needed) the object store rooted at root,
// the state root's objects directory.
func OpenStore(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open object store %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("open object store %s: %w", root, err)
	}
	s := &Store{root: abs}
	err = os.Mkdir(filepath.Join(abs, ".tmp"), 0o755)
	if errors.Is(err, fs.ErrExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open object store %s: %w", root, err)
	}
	// A new store: make the 256 fan-out dirs now, so the first snapshot
	// does not pay for them.
	for i := range 256 {
		fan := fmt.Sprintf("%02x", i)
		if err := os.Mkdir(filepath.Join(abs, fan), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("open object store %s: %w", root, err)
		}
		s.fanout.Store(fan, struct{}{})
	}
	return s, nil
}

// Root is the store's directory.
func (s *Store) Root() string { return s.root }

// Path is the file holding id, or "" when id is not a valid object id.
func (s *Store) Path(id ObjectID) string {
	if !id.Valid() {
		return ""
	}
	return filepath.Join(s.root, string(id[:2]), string(id[2:]))
}

func (s *Store) objectPath(id ObjectID) (string, error) {
	if !id.Valid() {
		return "", fmt.Errorf("invalid object id %q", string(id))
	}
	return filepath.Join(s.root, string(id[:2]), string(id[2:])), nil
}

// Has reports whether the store holds id.
func (s *Store) Has(id ObjectID) bool {
	p := s.Path(id)
	if p == "" {
		return false
	}
	var st unix.Stat_t
	return unix.Stat(p, &st) == nil
}

// Open opens id for reading.
func (s *Store) Open(id ObjectID) (*os.File, error) {
	p, err := s.objectPath(id)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open object %s: %w", id, err)
	}
	return f, nil
}

// ReadAll returns the content of id.
func (s *Store) ReadAll(id ObjectID) ([]byte, error) {
	p, err := s.objectPath(id)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read object %s: %w", id, err)
	}
	return b, nil
}

// Verify rehashes id; a mismatch or short read gives *CorruptObjectError.
func (s *Store) Verify(id ObjectID) error {
	p, err := s.objectPath(id)
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("verify object %s: %w", id, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return &CorruptObjectError{ID: id, Path: p, Reason: err.Error()}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != string(id) {
		return &CorruptObjectError{ID: id, Path: p, Reason: "hash mismatch: content hashes to " + got}
	}
	return nil
}

// Delete removes id; removing a missing object is not an error.
func (s *Store) Delete(id ObjectID) error {
	p, err := s.objectPath(id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete object %s: %w", id, err)
	}
	return nil
}

// Walk calls fn for every object in the store, in no particular order.
// Files that are not objects (temp files, the lock) are skipped.
func (s *Store) Walk(fn func(ObjectID) error) error {
	fans, err := os.ReadDir(s.root)
	if err != nil {
		return fmt.Errorf("walk object store %s: %w", s.root, err)
	}
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 {
			continue
		}
		names, err := readDirNames(filepath.Join(s.root, fan.Name()))
		if err != nil {
			return fmt.Errorf("walk object store %s: %w", s.root, err)
		}
		for _, n := range names {
			id := ObjectID(fan.Name() + n)
			if !id.Valid() {
				continue
			}
			if err := fn(id); err != nil {
				return err
			}
		}
	}
	return nil
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return f.Readdirnames(-1)
}

// Sync makes every object put so far durable with one syncfs(2) of the
// store's file system. Call it before writing a manifest that names them.
func (s *Store) Sync() error {
	fd, err := unix.Open(s.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sync object store %s: %w", s.root, err)
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("sync object store %s: %w", s.root, err)
	}
	return nil
}

// syncEachLimit is where one syncfs becomes cheaper than an fsync per new
// object. Below it, fsyncing the objects themselves (their writeback was
// started as they were written) also avoids flushing every other writer's
// dirty data on the same file system, the World's own upper included,
// which is what syncfs does.
const syncEachLimit = 1024

// SyncObjects makes the given new objects durable (what a capture with
// CaptureOptions.DeferSync left undone): an fsync of each (four at a time)
// and of their fan-out directories, or one syncfs for many.
func (s *Store) SyncObjects(ids []ObjectID) error { return s.syncObjects(ids) }

// syncObjects makes the given new objects durable: an fsync of each (four
// at a time) and of their fan-out directories, or one syncfs for many.
func (s *Store) syncObjects(ids []ObjectID) error {
	if len(ids) == 0 {
		return nil
	}
	if len(ids) > syncEachLimit {
		return s.Sync()
	}
	dirs := map[string]bool{}
	paths := make([]string, 0, len(ids))
	for _, id := range ids {
		if p := s.Path(id); p != "" {
			paths = append(paths, p)
			dirs[filepath.Dir(p)] = true
		}
	}
	for d := range dirs {
		paths = append(paths, d)
	}
	errs := make(chan error, len(paths))
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(4, len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if err := fsx.FsyncPath(p); err != nil {
					errs <- fmt.Errorf("sync %s: %w", p, err)
				}
			}
		}()
	}
	for _, p := range paths {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// PutBytes stores b.
func (s *Store) PutBytes(b []byte) (ObjectID, int64, bool, error) {
	sum := sha256.Sum256(b)
	id := ObjectID(hex.EncodeToString(sum[:]))
	created, err := s.putVerified(id, int64(len(b)), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return "", 0, false, fmt.Errorf("put object: %w", err)
	}
	return id, int64(len(b)), created, nil
}

// Put stores everything read from r. It streams through a temp file, so r
// may be larger than memory.
func (s *Store) Put(r io.Reader) (ObjectID, int64, bool, error) {
	id, n, created, err := s.putStream(r)
	if err != nil {
		return "", 0, false, fmt.Errorf("put object: %w", err)
	}
	return id, n, created, nil
}

// PutFile stores the content of the file at path (never following a final
// symlink). A file whose size or times change while it is read is read once
// more; if it changes again the error wraps ErrFileChanged.
func (s *Store) PutFile(path string) (ObjectID, int64, bool, error) {
	id, n, created, _, err := s.putFileStat(path)
	return id, n, created, err
}

// putFileStat is PutFile that also returns the file's stat taken before the
// read that produced the object (the stat cache keys on it).
func (s *Store) putFileStat(path string) (ObjectID, int64, bool, unix.Stat_t, error) {
	for attempt := 0; ; attempt++ {
		id, n, created, st, err := s.putFileOnce(path)
		if errors.Is(err, ErrFileChanged) && attempt == 0 {
			continue
		}
		if err != nil {
			return "", 0, false, st, fmt.Errorf("store %s: %w", path, err)
		}
		return id, n, created, st, nil
	}
}

func (s *Store) putFileOnce(path string) (ObjectID, int64, bool, unix.Stat_t, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", 0, false, unix.Stat_t{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer func() { _ = f.Close() }()
	return s.putOpenOnce(f)
}

// PutOpen is PutFile of a regular file the caller opened (beneath a root,
// say): the same clone where the file systems share extents, holes kept as
// holes, and a second read if the file changed during the first. Put of the
// same file would stream it, copying every byte: a World's 1-byte edit to a
// 1 GB source file stored a 1 GB base even on XFS.
func (s *Store) PutOpen(f *os.File) (ObjectID, int64, bool, error) {
	for attempt := 0; ; attempt++ {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", 0, false, fmt.Errorf("store %s: %w", f.Name(), err)
		}
		id, n, created, _, err := s.putOpenOnce(f)
		if errors.Is(err, ErrFileChanged) && attempt == 0 {
			continue
		}
		if err != nil {
			return "", 0, false, fmt.Errorf("store %s: %w", f.Name(), err)
		}
		return id, n, created, nil
	}
}

func (s *Store) putOpenOnce(f *os.File) (ObjectID, int64, bool, unix.Stat_t, error) {
	var before unix.Stat_t
	path := f.Name()
	fd := int(f.Fd())
	if err := unix.Fstat(fd, &before); err != nil {
		return "", 0, false, before, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if before.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", 0, false, before, fmt.Errorf("%s: not a regular file", path)
	}
	changed := func(n int64) error {
		var after unix.Stat_t
		if err := unix.Fstat(fd, &after); err != nil {
			return &fs.PathError{Op: "fstat", Path: path, Err: err}
		}
		if n != before.Size || after.Size != before.Size || after.Mtim != before.Mtim || after.Ctim != before.Ctim {
			return ErrFileChanged
		}
		return nil
	}
	var (
		id      ObjectID
		n       int64
		created bool
	)
	if before.Size <= smallObjectLimit {
		buf := make([]byte, before.Size+1)
		m, err := io.ReadFull(f, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return "", 0, false, before, fmt.Errorf("read %s: %w", path, err)
		}
		if err := changed(int64(m)); err != nil {
			return "", 0, false, before, err
		}
		buf = buf[:m]
		sum := sha256.Sum256(buf)
		id = ObjectID(hex.EncodeToString(sum[:]))
		n = int64(m)
		created, err = s.putVerified(id, n, func(w io.Writer) error {
			_, err := w.Write(buf)
			return err
		})
		if err != nil {
			return "", 0, false, before, err
		}
		return id, n, created, before, nil
	}
	id, n, created, err := s.putSparse(fd, before.Size)
	if err != nil {
		return "", 0, false, before, err
	}
	if err := changed(n); err != nil {
		return "", 0, false, before, err
	}
	return id, n, created, before, nil
}

// putVerified stores content whose id and size are already known: when a
// good copy exists it only refreshes its mtime (so GC's grace covers it).
func (s *Store) putVerified(id ObjectID, size int64, write func(io.Writer) error) (bool, error) {
	dst, err := s.objectPath(id)
	if err != nil {
		return false, err
	}
	if s.presentAndTouch(dst, size) {
		return false, nil
	}
	tmp, err := s.createTemp()
	if err != nil {
		return false, err
	}
	if err := write(tmp); err != nil {
		s.dropTemp(tmp)
		return false, err
	}
	return s.commitTemp(tmp, dst, id)
}

func (s *Store) putStream(r io.Reader) (ObjectID, int64, bool, error) {
	tmp, err := s.createTemp()
	if err != nil {
		return "", 0, false, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err != nil {
		s.dropTemp(tmp)
		return "", 0, false, err
	}
	id := ObjectID(hex.EncodeToString(h.Sum(nil)))
	dst, _ := s.objectPath(id)
	if s.presentAndTouch(dst, n) {
		s.dropTemp(tmp)
		return id, n, false, nil
	}
	created, err := s.commitTemp(tmp, dst, id)
	if err != nil {
		return "", 0, false, err
	}
	return id, n, created, nil
}

// putSparse stores the first size bytes of the open file fd through a temp
// file, keeping its holes (SEEK_DATA/SEEK_HOLE) as holes: a sparse file
// costs the store only its data. Where the store's file system shares
// extents with fd's (XFS with reflink, btrfs: a World's upper under the
// same state root), the temp file is a reflink of fd (FICLONE) and only
// read back to hash it: the object costs no space and no writes until the
// World changes the file. Elsewhere the bytes are copied as they are hashed.
func (s *Store) putSparse(fd int, size int64) (ObjectID, int64, bool, error) {
	tmp, err := s.createTemp()
	if err != nil {
		return "", 0, false, err
	}
	sum, err := s.fillTemp(tmp, fd, size)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = ErrFileChanged // it shrank while read
	}
	if err != nil {
		s.dropTemp(tmp)
		return "", 0, false, err
	}
	id := ObjectID(sum)
	dst, _ := s.objectPath(id)
	if s.presentAndTouch(dst, size) {
		s.dropTemp(tmp)
		return id, size, false, nil
	}
	created, err := s.commitTemp(tmp, dst, id)
	if err != nil {
		return "", 0, false, err
	}
	return id, size, created, nil
}

// fillTemp puts the first size bytes of fd into the empty temp file and
// returns the hex SHA-256 of what the temp file holds.
func (s *Store) fillTemp(tmp *os.File, fd int, size int64) (string, error) {
	if size > 0 && !s.noReflink.Load() {
		if err := unix.IoctlFileClone(int(tmp.Fd()), fd); err == nil {
			s.reflinked.Add(1)
			// The clone is of the whole file: a file that grew since its
			// stat is cut back to size (and the caller's stat check fails).
			if err := tmp.Truncate(size); err != nil {
				return "", err
			}
			return hashSparse(int(tmp.Fd()), -1, size)
		}
		s.noReflink.Store(true)
		if err := tmp.Truncate(0); err != nil {
			return "", err
		}
	}
	return hashSparse(fd, int(tmp.Fd()), size)
}

// Reflinked counts the objects this Store made as reflinks of the file
// stored (Put of a file, CaptureUpper), since it was opened.
func (s *Store) Reflinked() int64 { return s.reflinked.Load() }

// presentAndTouch reports whether a plausible copy of the object (right
// size) exists, refreshing its mtime so a concurrent GC's grace period
// protects it. A wrong-sized copy (a crash before Sync) is replaced.
func (s *Store) presentAndTouch(dst string, size int64) bool {
	var st unix.Stat_t
	if unix.Stat(dst, &st) != nil || st.Size != size {
		return false
	}
	now := time.Now()
	// A failure means a GC not held off by the lock removed it just now.
	return os.Chtimes(dst, now, now) == nil
}

// createTemp opens a new, unnamed object file (O_TMPFILE in .tmp): a crash
// before commit leaves nothing behind. File systems without O_TMPFILE get
// a named temp file in .tmp, which GC removes once abandoned.
func (s *Store) createTemp() (*os.File, error) {
	dir := filepath.Join(s.root, ".tmp")
	if !s.noTmpfile.Load() {
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o444)
		if err == nil {
			return os.NewFile(uintptr(fd), ""), nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
			return nil, &fs.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
		}
		s.noTmpfile.Store(true)
	}
	return os.CreateTemp(dir, "put-*")
}

func (s *Store) dropTemp(tmp *os.File) {
	_ = tmp.Close()
	if tmp.Name() != "" {
		_ = os.Remove(tmp.Name())
	}
}

// commitTemp makes the finished temp file read-only and gives it its name,
// dst. A racing Put of the same content may have named it first: that
// copy is as good, unless its size is wrong (a crash before Sync), in
// which case it is replaced. created is false when the racer won.
func (s *Store) commitTemp(tmp *os.File, dst string, id ObjectID) (created bool, err error) {
	if err := tmp.Chmod(0o444); err != nil { // whatever the umask
		s.dropTemp(tmp)
		return false, err
	}
	if s.SyncEach {
		if err := tmp.Sync(); err != nil {
			s.dropTemp(tmp)
			return false, err
		}
	} else {
		// Start writing the object back now, without waiting: the Sync (or
		// fsync) that makes a snapshot durable then finds most of the data
		// already on its way, overlapped with hashing the next files.
		_ = unix.SyncFileRange(int(tmp.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	}
	fan := string(id[:2])
	if _, ok := s.fanout.Load(fan); !ok {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			s.dropTemp(tmp)
			return false, err
		}
		s.fanout.Store(fan, struct{}{})
	}
	created = true
	if tmp.Name() == "" {
		created, err = s.linkTemp(tmp, dst)
	} else {
		err = os.Rename(tmp.Name(), dst)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if tmp.Name() != "" {
			_ = os.Remove(tmp.Name())
		}
		return false, err
	}
	if s.SyncEach && created {
		if d, err := os.Open(filepath.Dir(dst)); err == nil {
			err = d.Sync()
			_ = d.Close()
			if err != nil {
				return false, err
			}
		}
	}
	return created, nil
}

// linkTemp names an O_TMPFILE file; linked is false when a good copy
// already had the name.
func (s *Store) linkTemp(tmp *os.File, dst string) (linked bool, err error) {
	proc := "/proc/self/fd/" + strconv.Itoa(int(tmp.Fd()))
	for attempt := 0; ; attempt++ {
		err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, dst, unix.AT_SYMLINK_FOLLOW)
		if !errors.Is(err, unix.EEXIST) {
			if err != nil {
				return false, &fs.PathError{Op: "link", Path: dst, Err: err}
			}
			return true, nil
		}
		var mine, theirs unix.Stat_t
		if unix.Fstat(int(tmp.Fd()), &mine) == nil && unix.Stat(dst, &theirs) == nil && mine.Size == theirs.Size {
			return false, nil
		}
		if attempt > 0 {
			return false, &fs.PathError{Op: "link", Path: dst, Err: err}
		}
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
}

// CopyTo creates dst (which must not exist) with the content of id and
// permission bits mode, copying in the kernel (FICLONE where the file system
// shares extents, else copy_file_range). The copy is independent of the
// object: writing dst never changes the store.
func (s *Store) CopyTo(id ObjectID, dst string, mode fs.FileMode) error {
	fd, err := s.createCopy(id, dst, -1)
	if err != nil {
		return err
	}
	if err := unix.Fchmod(fd, fsx.UnixMode(mode)); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("copy object %s to %s: %w", id, dst, err)
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("copy object %s to %s: %w", id, dst, err)
	}
	return nil
}

// createCopy creates dst with id's content and returns its open fd. When
// wantSize >= 0 the object's size must match it. The content is hashed as
// it is copied (or, after a reflink, as the clone is read back): an object
// whose bytes no longer match its id gives *CorruptObjectError and dst is
// removed, so nothing ever restores unverified content. Holes in the
// object stay holes in dst.
func (s *Store) createCopy(id ObjectID, dst string, wantSize int64) (int, error) {
	src, err := s.objectPath(id)
	if err != nil {
		return -1, err
	}
	in, err := unix.Open(src, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return -1, &CorruptObjectError{ID: id, Path: src, Reason: "missing", Err: &fs.PathError{Op: "open", Path: src, Err: err}}
	}
	if err != nil {
		return -1, fmt.Errorf("open object %s: %w", id, &fs.PathError{Op: "open", Path: src, Err: err})
	}
	defer func() { _ = unix.Close(in) }()
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil {
		return -1, fmt.Errorf("open object %s: %w", id, err)
	}
	if wantSize >= 0 && st.Size != wantSize {
		return -1, &CorruptObjectError{ID: id, Path: src, Reason: fmt.Sprintf("size %d, manifest says %d", st.Size, wantSize)}
	}
	out, err := unix.Open(dst, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, fmt.Errorf("copy object %s: %w", id, &fs.PathError{Op: "create", Path: dst, Err: err})
	}
	fail := func(err error) (int, error) {
		_ = unix.Close(out)
		_ = os.Remove(dst)
		return -1, err
	}
	sum, err := s.copyFD(out, in, st.Size)
	if err != nil {
		return fail(fmt.Errorf("copy object %s to %s: %w", id, dst, err))
	}
	if sum != string(id) {
		return fail(&CorruptObjectError{ID: id, Path: src, Reason: "hash mismatch: content hashes to " + sum})
	}
	return out, nil
}

// copyFD copies size bytes of in to the empty file out and returns the hex
// SHA-256 of what out now holds. A reflink (FICLONE) is tried first and
// the clone is then read back to hash it; otherwise the bytes are read,
// hashed and written, and runs the source holds as holes are skipped.
func (s *Store) copyFD(out, in int, size int64) (string, error) {
	if size > 0 && !s.noReflink.Load() {
		if err := unix.IoctlFileClone(out, in); err == nil {
			return hashSparse(out, -1, size)
		}
		s.noReflink.Store(true)
	}
	return hashSparse(in, out, size)
}

// copyBufSize is the chunk copies and hashes read at once.
const copyBufSize = 256 << 10

var (
	copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}
	// zeroChunk is made on first use: every strata process and every
	// session's init links this package, most never hash a hole.
	zeroChunk = sync.OnceValue(func() []byte { return make([]byte, copyBufSize) })
)

// hashSparse hashes the first size bytes of in, copying them to out at the
// same offsets unless out < 0. Holes (SEEK_HOLE) are hashed as the zeros
// they read as and never written, so out keeps them; out is extended to
// size at the end. A file that ends early gives io.ErrUnexpectedEOF.
func hashSparse(in, out int, size int64) (string, error) {
	h := sha256.New()
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	hashZeros := func(n int64) {
		zeros := zeroChunk()
		for n > 0 {
			k := min(n, int64(len(zeros)))
			h.Write(zeros[:k])
			n -= k
		}
	}
	copyRange := func(off, end int64) error {
		for off < end {
			n, err := unix.Pread(in, buf[:min(int64(len(buf)), end-off)], off)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			h.Write(buf[:n])
			if out >= 0 {
				for w := 0; w < n; {
					m, err := unix.Pwrite(out, buf[w:n], off+int64(w))
					if errors.Is(err, unix.EINTR) {
						continue
					}
					if err != nil {
						return err
					}
					w += m
				}
			}
			off += int64(n)
		}
		return nil
	}
	// Small files have no holes worth finding.
	sparse := size > smallObjectLimit
	var off int64
	for off < size {
		data, hole := off, size
		if sparse {
			d, err := unix.Seek(in, off, unix.SEEK_DATA)
			switch {
			case errors.Is(err, unix.ENXIO): // only a hole is left
				d = size
			case err != nil: // no SEEK_DATA here: treat the rest as data
				sparse, d = false, off
			}
			data = min(d, size)
			if sparse && data < size {
				if hl, err := unix.Seek(in, data, unix.SEEK_HOLE); err == nil {
					hole = min(hl, size)
				}
			}
		}
		hashZeros(data - off)
		if err := copyRange(data, hole); err != nil {
			return "", err
		}
		off = hole
	}
	if out >= 0 && size > 0 {
		if err := unix.Ftruncate(out, size); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// StoreLock is a held flock on the store's lock file.
type StoreLock struct{ f *os.File }

// Unlock releases the lock.
func (l *StoreLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the only descriptor drops the flock
	l.f = nil
	return err
}

// LockShared takes the store lock shared: snapshotters hold it from their
// first Put until their manifest is written, so GC cannot run meanwhile.
// Many shared holders coexist. It waits (polling, so ctx can cancel) while
// GC holds the lock exclusive.
func (s *Store) LockShared(ctx context.Context) (*StoreLock, error) {
	return s.lock(ctx, unix.LOCK_SH)
}

// LockExclusive takes the store lock exclusive; GC does this itself, so do
// not call GC while holding any store lock in the same process.
func (s *Store) LockExclusive(ctx context.Context) (*StoreLock, error) {
	return s.lock(ctx, unix.LOCK_EX)
}

func (s *Store) lock(ctx context.Context, how int) (*StoreLock, error) {
	f, err := os.OpenFile(filepath.Join(s.root, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock object store: %w", err)
	}
	delay := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return &StoreLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock object store: %w", err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("lock object store: %w", ctx.Err())
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// GC removes every object that live does not yield and that was last
// modified more than the grace period (GCGrace, default DefaultGCGrace)
// before GC started, plus temp files abandoned that long ago. It holds the
// store lock exclusive for the whole run and calls live only once it holds
// it, so a snapshotter that holds LockShared until its manifest is
// discoverable by live can never lose an object. The grace period protects
// writers that do not take the lock: objects they put (or found already
// present, which refreshes the mtime) within the grace period are kept.
func (s *Store) GC(ctx context.Context, live func(yield func(ObjectID) bool)) (removed int, freed int64, err error) {
	start := time.Now()
	l, err := s.LockExclusive(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	defer func() { _ = l.Unlock() }()
	return s.GCLocked(ctx, start, live)
}

// Grace is how old an unreferenced object (or anything else GC may drop
// as unreferenced) must be before GC removes it: GCGrace, else DefaultGCGrace.
func (s *Store) Grace() time.Duration {
	switch {
	case s.GCGrace == 0:
		return DefaultGCGrace
	case s.GCGrace < 0:
		return 0
	}
	return s.GCGrace
}

// GCLocked is GC for a caller that already holds LockExclusive (so it can
// gather the live set, and drop what references objects, under the same
// lock); start is when that caller's GC began, for the grace period.
func (s *Store) GCLocked(ctx context.Context, start time.Time, live func(yield func(ObjectID) bool)) (removed int, freed int64, err error) {
	cutoff := start.Add(-s.Grace())
	keep := make(map[ObjectID]struct{})
	live(func(id ObjectID) bool {
		keep[id] = struct{}{}
		return ctx.Err() == nil
	})
	if err := ctx.Err(); err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	old := func(p string) (int64, bool) {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return 0, false
		}
		return st.Size, time.Unix(st.Mtim.Unix()).Before(cutoff)
	}
	err = s.Walk(func(id ObjectID) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, ok := keep[id]; ok {
			return nil
		}
		p := s.Path(id)
		size, isOld := old(p)
		if !isOld {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove object %s: %w", id, err)
		}
		removed++
		freed += size
		return nil
	})
	if err != nil {
		return removed, freed, fmt.Errorf("gc: %w", err)
	}
	tmpDir := filepath.Join(s.root, ".tmp")
	names, _ := readDirNames(tmpDir)
	for _, n := range names {
		p := filepath.Join(tmpDir, n)
		if size, isOld := old(p); isOld {
			if os.Remove(p) == nil {
				freed += size
			}
		}
	}
	return removed, freed, nil
}
