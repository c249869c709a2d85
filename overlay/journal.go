package overlay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Files in a journal directory, all named after the publication id
// "<root-hash>-<random>" so the root's lock is known without reading them:
//
//	<id>.intent      temps a publication is about to create (cleanup list if it dies before commit)
//	<id>.json        the fsynced journal: its presence is the commit point
//	<id>.*.tmp       a journal or intent being written
//	<root-hash>.lock flock serializing publications to one root
const (
	journalSuffix = ".json"
	intentSuffix  = ".intent"
	tmpSuffix     = ".tmp"
	lockSuffix    = ".lock"
	// pubTempPrefix starts every name a publication creates beside a target;
	// ops may not use it so recovery can tell its own files apart.
	pubTempPrefix   = ".strata-pub-"
	journalVersion  = 1
	rootHashLen     = 16
	lockPollEvery   = 10 * time.Millisecond
	stepRename      = "rename"
	stepDelete      = "delete"
	stepRmdir       = "rmdir"
	stepChmod       = "chmod"
	entryTypeFile   = "file"
	entryTypeLink   = "symlink"
	entryTypeDir    = "dir"
	stateCommitted  = "committed"
	statePrepared   = "prepared"
	stateCorrupt    = "corrupt"
	actionForward   = "rolled_forward"
	actionBack      = "rolled_back"
	actionTmpRemove = "removed_partial_file"
)

// ErrIncomplete wraps a failure after a publication was committed: its
// journal stays, and Recover (or the next Publish to the root) completes it.
var ErrIncomplete = errors.New("publication committed but not completed")

// CorruptJournalError reports a journal or intent file that cannot be
// trusted (unparsable, checksum mismatch, wrong version); recovery leaves it
// and everything it names untouched.
type CorruptJournalError struct {
	Path   string
	Reason string
}

func (e *CorruptJournalError) Error() string {
	return fmt.Sprintf("corrupt publication journal %s: %s", e.Path, e.Reason)
}

// JournalInfo describes an unfinished publication for `strata doctor`.
type JournalInfo struct {
	ID    string    `json:"id"`
	Path  string    `json:"path"`
	Root  string    `json:"root,omitempty"`
	State string    `json:"state"` // committed (will roll forward), prepared (will roll back), corrupt
	Steps int       `json:"steps"`
	Time  time.Time `json:"time"`
	Err   string    `json:"error,omitempty"`
}

// RecoveryReport says what recovery did with one unfinished publication.
type RecoveryReport struct {
	ID     string `json:"id"`
	Root   string `json:"root,omitempty"`
	Action string `json:"action"` // rolled_forward, rolled_back, removed_partial_file
	// Done counts steps performed now; Skipped those found already done.
	Done    int `json:"done"`
	Skipped int `json:"skipped"`
}

// journalBody is what the checksum covers.
type journalBody struct {
	Version int           `json:"version"`
	ID      string        `json:"id"`
	Root    string        `json:"root"`
	Created time.Time     `json:"created"`
	Steps   []journalStep `json:"steps"`
}

// journalStep is one idempotent step; steps run in order: deletes, rmdirs
// (deepest first), renames, chmods.
type journalStep struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// Temp, Type, Ino, SHA256, Link describe a rename: the temp beside Path
	// and what it holds, so recovery can tell a rename already done.
	Temp   string `json:"temp,omitempty"`
	Type   string `json:"type,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
}

type journalEnvelope struct {
	Checksum string          `json:"checksum"`
	Body     json.RawMessage `json:"body"`
}

// intentFile lists the temps a publication will create, written before any
// of them exists.
type intentFile struct {
	Version int          `json:"version"`
	ID      string       `json:"id"`
	Root    string       `json:"root"`
	Temps   []intentTemp `json:"temps"`
}

type intentTemp struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
}

// rootHash names a root in journal ids and lock files.
func rootHash(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:])[:rootHashLen]
}

// RootLockPath is the lock file serializing publications to root.
func RootLockPath(journalDir, root string) string {
	return filepath.Join(journalDir, rootHash(root)+lockSuffix)
}

// LockRoot takes an exclusive flock on lockPath, waiting until it is free or
// ctx ends. The lock dies with the process, so a crash never leaves it held.
func LockRoot(ctx context.Context, lockPath string) (unlock func(), err error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", lockPath, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", lockPath, ctx.Err())
		case <-time.After(lockPollEvery):
		}
	}
}

func encodeJournal(body *journalBody) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	return json.Marshal(journalEnvelope{Checksum: "sha256:" + hex.EncodeToString(sum[:]), Body: raw})
}

func decodeJournal(path string, data []byte) (*journalBody, error) {
	corrupt := func(why string) error { return &CorruptJournalError{Path: path, Reason: why} }
	var env journalEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, corrupt("not valid JSON: " + err.Error())
	}
	sum := sha256.Sum256(env.Body)
	if env.Checksum != "sha256:"+hex.EncodeToString(sum[:]) {
		return nil, corrupt("checksum mismatch")
	}
	var body journalBody
	dec := json.NewDecoder(bytes.NewReader(env.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return nil, corrupt("bad body: " + err.Error())
	}
	if body.Version != journalVersion {
		return nil, corrupt(fmt.Sprintf("unknown version %d", body.Version))
	}
	if want := strings.TrimSuffix(filepath.Base(path), journalSuffix); body.ID != want {
		return nil, corrupt(fmt.Sprintf("id %q does not match file name", body.ID))
	}
	if !filepath.IsAbs(body.Root) {
		return nil, corrupt(fmt.Sprintf("root %q is not absolute", body.Root))
	}
	for i, st := range body.Steps {
		if err := validateStep(body.ID, st); err != nil {
			return nil, corrupt(fmt.Sprintf("step %d: %v", i, err))
		}
	}
	return &body, nil
}

func validateStep(id string, st journalStep) error {
	if err := ValidateRelPath(st.Path); err != nil {
		return err
	}
	switch st.Op {
	case stepDelete, stepRmdir, stepChmod:
		return nil
	case stepRename:
		if err := validateTempPath(id, st.Temp); err != nil {
			return err
		}
		if pd, _ := splitRel(st.Path); func() string { d, _ := splitRel(st.Temp); return d }() != pd {
			return fmt.Errorf("temp %q not beside %q", st.Temp, st.Path)
		}
		switch st.Type {
		case entryTypeFile, entryTypeLink, entryTypeDir:
			return nil
		}
		return fmt.Errorf("unknown type %q", st.Type)
	}
	return fmt.Errorf("unknown op %q", st.Op)
}

// validateTempPath accepts only names this publication could have made, so a
// tampered journal or intent cannot steer recovery at arbitrary files.
func validateTempPath(id, rel string) error {
	if err := ValidateRelPath(rel); err != nil {
		return err
	}
	if _, base := splitRel(rel); !strings.HasPrefix(base, pubTempPrefix+id+"-") {
		return fmt.Errorf("temp %q is not a publication temp of %s", rel, id)
	}
	return nil
}

// writeFileDurably writes data to path through a temp and a rename; with
// sync it fsyncs the file and the directory so the rename is the commit.
func writeFileDurably(path string, data []byte, sync bool) error {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if sync {
		return fsyncPath(filepath.Dir(path))
	}
	return nil
}

// fsyncPath fsyncs a file or directory, not following a final symlink.
func fsyncPath(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer closeFd(fd)
	return unix.Fsync(fd)
}

// pubFiles groups the files of one publication id found in a journal dir.
type pubFiles struct {
	id                    string
	journal, intent       bool
	journalTmp, intentTmp bool
}

// scanJournalDir lists publications in dir grouped by root hash.
func scanJournalDir(dir string) (map[string][]*pubFiles, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal dir %s: %w", dir, err)
	}
	byID := map[string]*pubFiles{}
	get := func(id string) *pubFiles {
		if p, ok := byID[id]; ok {
			return p
		}
		p := &pubFiles{id: id}
		byID[id] = p
		return p
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, journalSuffix+tmpSuffix):
			get(strings.TrimSuffix(name, journalSuffix+tmpSuffix)).journalTmp = true
		case strings.HasSuffix(name, intentSuffix+tmpSuffix):
			get(strings.TrimSuffix(name, intentSuffix+tmpSuffix)).intentTmp = true
		case strings.HasSuffix(name, journalSuffix):
			get(strings.TrimSuffix(name, journalSuffix)).journal = true
		case strings.HasSuffix(name, intentSuffix):
			get(strings.TrimSuffix(name, intentSuffix)).intent = true
		}
	}
	groups := map[string][]*pubFiles{}
	for id, p := range byID {
		h, _, ok := strings.Cut(id, "-")
		if !ok || len(h) != rootHashLen {
			continue // not ours
		}
		groups[h] = append(groups[h], p)
	}
	for _, g := range groups {
		slices.SortFunc(g, func(a, b *pubFiles) int { return strings.Compare(a.id, b.id) })
	}
	return groups, nil
}

// PendingJournals lists unfinished publications in journalDir without
// changing anything.
func PendingJournals(journalDir string) ([]JournalInfo, error) {
	groups, err := scanJournalDir(journalDir)
	if err != nil {
		return nil, err
	}
	var out []JournalInfo
	for _, g := range groups {
		for _, p := range g {
			switch {
			case p.journal:
				path := filepath.Join(journalDir, p.id+journalSuffix)
				info := JournalInfo{ID: p.id, Path: path, State: stateCommitted}
				if body, err := readJournal(path); err != nil {
					info.State, info.Err = stateCorrupt, err.Error()
				} else {
					info.Root, info.Steps, info.Time = body.Root, len(body.Steps), body.Created
				}
				out = append(out, info)
			case p.intent:
				path := filepath.Join(journalDir, p.id+intentSuffix)
				info := JournalInfo{ID: p.id, Path: path, State: statePrepared}
				if in, err := readIntent(path); err != nil {
					info.State, info.Err = stateCorrupt, err.Error()
				} else {
					info.Root, info.Steps = in.Root, len(in.Temps)
				}
				if st, err := os.Stat(path); err == nil {
					info.Time = st.ModTime()
				}
				out = append(out, info)
			}
		}
	}
	slices.SortFunc(out, func(a, b JournalInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func readJournal(path string) (*journalBody, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	return decodeJournal(path, data)
}

func readIntent(path string) (*intentFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read intent: %w", err)
	}
	var in intentFile
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, &CorruptJournalError{Path: path, Reason: "not valid JSON: " + err.Error()}
	}
	if in.Version != journalVersion || in.ID != strings.TrimSuffix(filepath.Base(path), intentSuffix) || !filepath.IsAbs(in.Root) {
		return nil, &CorruptJournalError{Path: path, Reason: "bad header"}
	}
	for _, t := range in.Temps {
		if err := validateTempPath(in.ID, t.Path); err != nil {
			return nil, &CorruptJournalError{Path: path, Reason: err.Error()}
		}
	}
	return &in, nil
}

// Recover finishes every unfinished publication in journalDir: a committed
// journal is rolled forward (every remaining step done, steps already done
// skipped), a publication that died before its commit has its temps removed.
// Each root is locked while its publications are recovered. A corrupt
// journal is reported as *CorruptJournalError and nothing it names is
// touched; other publications are still recovered.
func Recover(ctx context.Context, journalDir string) ([]RecoveryReport, error) {
	groups, err := scanJournalDir(journalDir)
	if err != nil {
		return nil, err
	}
	hashes := make([]string, 0, len(groups))
	for h := range groups {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	var reports []RecoveryReport
	var errs []error
	for _, h := range hashes {
		rs, err := func() ([]RecoveryReport, error) {
			unlock, err := LockRoot(ctx, filepath.Join(journalDir, h+lockSuffix))
			if err != nil {
				return nil, err
			}
			defer unlock()
			return recoverRootLocked(ctx, journalDir, h, nil)
		}()
		reports = append(reports, rs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return reports, errors.Join(errs...)
}

// recoverRootLocked recovers the publications of one root hash; the caller
// holds the root's lock, so none of them is live. step, when set, counts
// steps for the crash tests.
func recoverRootLocked(ctx context.Context, journalDir, hash string, step func()) ([]RecoveryReport, error) {
	if step == nil {
		step = newStepper()
	}
	// Rescan under the lock: what was seen before it may have finished.
	groups, err := scanJournalDir(journalDir)
	if err != nil {
		return nil, err
	}
	var reports []RecoveryReport
	var errs []error
	for _, p := range groups[hash] {
		if err := ctx.Err(); err != nil {
			return reports, err
		}
		jpath := filepath.Join(journalDir, p.id+journalSuffix)
		ipath := filepath.Join(journalDir, p.id+intentSuffix)
		switch {
		case p.journal:
			body, err := readJournal(jpath)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rep, err := completeJournal(ctx, body, SyncPerFile, false, step)
			if err != nil {
				errs = append(errs, fmt.Errorf("roll forward publication %s: %w", p.id, err))
				continue
			}
			if err := retirePublication(journalDir, p.id); err != nil {
				errs = append(errs, err)
				continue
			}
			reports = append(reports, rep)
		case p.intent:
			in, err := readIntent(ipath)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rep, err := rollBackIntent(in, step)
			if err != nil {
				errs = append(errs, fmt.Errorf("roll back publication %s: %w", p.id, err))
				continue
			}
			if err := retirePublication(journalDir, p.id); err != nil {
				errs = append(errs, err)
				continue
			}
			reports = append(reports, rep)
		default:
			// Only a half-written journal or intent: the publication never
			// committed and, with no intent, never created a temp.
			if err := retirePublication(journalDir, p.id); err != nil {
				errs = append(errs, err)
				continue
			}
			reports = append(reports, RecoveryReport{ID: p.id, Action: actionTmpRemove})
		}
	}
	return reports, errors.Join(errs...)
}

// retirePublication removes every journal-dir file of id, journal last:
// until then a rerun still sees the publication.
func retirePublication(journalDir, id string) error {
	for _, suffix := range []string{intentSuffix + tmpSuffix, journalSuffix + tmpSuffix, intentSuffix, journalSuffix} {
		if err := os.Remove(filepath.Join(journalDir, id+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("retire publication %s: %w", id, err)
		}
	}
	return nil
}

// rollBackIntent removes the temps of a publication that never committed.
func rollBackIntent(in *intentFile, step func()) (RecoveryReport, error) {
	rep := RecoveryReport{ID: in.ID, Root: in.Root, Action: actionBack}
	rootFd, err := openRootFd(in.Root)
	if err != nil {
		return rep, err
	}
	defer closeFd(rootFd)
	for _, t := range in.Temps {
		dirFd, base, err := openParentBeneath(rootFd, t.Path)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			rep.Skipped++
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("open parent of %s: %w", t.Path, err)
		}
		removed, err := removeAllAt(dirFd, base)
		closeFd(dirFd)
		if err != nil {
			return rep, fmt.Errorf("remove temp %s: %w", t.Path, err)
		}
		if removed {
			rep.Done++
		} else {
			rep.Skipped++
		}
		step()
	}
	return rep, nil
}

// removeAllAt removes name under dirFd and, for a directory, everything in
// it, never following a symlink. It reports whether anything was there.
func removeAllAt(dirFd int, name string) (bool, error) {
	err := unix.Unlinkat(dirFd, name, 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM):
		return false, err
	}
	fd, err := openatRetry(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return false, err
	}
	dir := os.NewFile(uintptr(fd), name)
	names, err := dir.Readdirnames(-1)
	if err != nil {
		_ = dir.Close()
		return false, err
	}
	for _, child := range names {
		if _, err := removeAllAt(fd, child); err != nil {
			_ = dir.Close()
			return false, err
		}
	}
	_ = dir.Close()
	if err := unix.Unlinkat(dirFd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, err
	}
	return true, nil
}

// stepDirs caches parent directory fds while a journal's steps run; every
// one is opened fresh beneath the root, so a directory swapped for a link
// since the commit fails the step instead of redirecting it.
type stepDirs struct {
	rootFd int
	mu     sync.Mutex
	fds    map[string]int
}

func (d *stepDirs) open(rel string) (int, error) {
	if rel == "." {
		return d.rootFd, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if fd, ok := d.fds[rel]; ok {
		return fd, nil
	}
	fd, err := openBeneathFd(d.rootFd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	d.fds[rel] = fd
	return fd, nil
}

// forget drops a cached fd whose directory a step removed.
func (d *stepDirs) forget(rel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, fd := range d.fds {
		if k == rel || strings.HasPrefix(k, rel+"/") {
			closeFd(fd)
			delete(d.fds, k)
		}
	}
}

func (d *stepDirs) close() {
	for _, fd := range d.fds {
		closeFd(fd)
	}
}

// parallelSteps bounds the goroutines running independent steps (creating,
// syncing, renaming, deleting files): they are kernel-bound, and a few in
// flight keep the disk queue and the CPUs busy. In-process crash tests set it
// to 1 so their simulated crash (a panic) stays on the calling goroutine.
var parallelSteps = 8

// forEachParallel runs fn(0..n-1) on up to parallelSteps goroutines and
// returns the first error; after one, the remaining items are not started.
func forEachParallel(n int, fn func(i int) error) error {
	workers := min(parallelSteps, n)
	if workers <= 1 {
		for i := range n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// completeJournal performs every step of a committed journal that is not yet
// done, makes the result durable and returns what it did. It is idempotent:
// a crash inside it is recovered by running it again. fresh says no step can
// have run yet (the publication itself, right after its commit).
func completeJournal(ctx context.Context, j *journalBody, mode SyncMode, fresh bool, step func()) (RecoveryReport, error) {
	rep := RecoveryReport{ID: j.ID, Root: j.Root, Action: actionForward}
	rootFd, err := openRootFd(j.Root)
	if err != nil {
		return rep, err
	}
	defer closeFd(rootFd)
	dirs := &stepDirs{rootFd: rootFd, fds: map[string]int{}}
	defer dirs.close()

	// Renames run only after every delete and rmdir, so one rename found done
	// proves the removals done too (and their paths may now hold new entries).
	renamesStarted := false
	for _, st := range j.Steps {
		if fresh || st.Op != stepRename {
			continue
		}
		exists, err := stepEntryExists(dirs, st.Temp)
		if err != nil {
			return rep, fmt.Errorf("check temp %s: %w", st.Temp, err)
		}
		if !exists {
			renamesStarted = true
			break
		}
	}
	var done, skipped atomic.Int64
	touched := map[string]bool{}
	run := func(st journalStep) error {
		var did bool
		var err error
		switch st.Op {
		case stepDelete, stepRmdir:
			did, err = runRemoval(dirs, st)
			if st.Op == stepRmdir {
				dirs.forget(st.Path)
			}
		case stepRename:
			did, err = runRename(dirs, st)
		case stepChmod:
			did, err = runChmod(dirs, st)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", st.Op, st.Path, err)
		}
		if did {
			done.Add(1)
		} else {
			skipped.Add(1)
		}
		step()
		return nil
	}
	// Steps come grouped by op in journal order; deletes and renames within a
	// group are independent and run in parallel, rmdirs (deepest first) and
	// chmods one by one.
	for i := 0; i < len(j.Steps); {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		op := j.Steps[i].Op
		end := i
		for end < len(j.Steps) && j.Steps[end].Op == op {
			touched[parentRel(j.Steps[end].Path)] = true
			end++
		}
		group := j.Steps[i:end]
		i = end
		if renamesStarted && (op == stepDelete || op == stepRmdir) {
			skipped.Add(int64(len(group)))
			continue
		}
		if op == stepDelete || op == stepRename {
			if err := forEachParallel(len(group), func(k int) error { return run(group[k]) }); err != nil {
				return rep, err
			}
			continue
		}
		for _, st := range group {
			if err := run(st); err != nil {
				return rep, err
			}
		}
	}
	rep.Done, rep.Skipped = int(done.Load()), int(skipped.Load())
	if err := syncTouched(dirs, touched, mode); err != nil {
		return rep, err
	}
	step()
	return rep, nil
}

func stepEntryExists(dirs *stepDirs, rel string) (bool, error) {
	parent, base := splitRel(rel)
	fd, err := dirs.open(parent)
	if err != nil {
		return false, err
	}
	var st unix.Stat_t
	err = unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	return err == nil, err
}

func runRemoval(dirs *stepDirs, st journalStep) (bool, error) {
	parent, base := splitRel(st.Path)
	fd, err := dirs.open(parent)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return false, nil // no parent, so no entry left to remove
	}
	if err != nil {
		return false, err
	}
	flags := 0
	if st.Op == stepRmdir {
		flags = unix.AT_REMOVEDIR
	}
	err = unix.Unlinkat(fd, base, flags)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	return err == nil, err
}

func runRename(dirs *stepDirs, st journalStep) (bool, error) {
	parent, base := splitRel(st.Path)
	_, tempBase := splitRel(st.Temp)
	fd, err := dirs.open(parent)
	if err != nil {
		return false, err
	}
	err = unix.Renameat(fd, tempBase, fd, base)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return false, err
	}
	// The temp is gone: the rename happened before, if Path holds what it held.
	ok, verr := targetHolds(fd, base, st)
	if verr != nil {
		return false, fmt.Errorf("temp %s missing and target unreadable: %w", st.Temp, verr)
	}
	if !ok {
		return false, fmt.Errorf("temp %s missing and target does not hold the published %s", st.Temp, st.Type)
	}
	return false, nil
}

// targetHolds reports whether name under fd is the entry a rename step
// published: the same inode, or (for files and links) the same content.
func targetHolds(fd int, name string, st journalStep) (bool, error) {
	var s unix.Stat_t
	if err := unix.Fstatat(fd, name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if s.Ino == st.Ino {
		return true, nil
	}
	switch st.Type {
	case entryTypeLink:
		if s.Mode&unix.S_IFMT != unix.S_IFLNK {
			return false, nil
		}
		link, err := readlinkat(fd, name)
		return err == nil && link == st.Link, err
	case entryTypeFile:
		if s.Mode&unix.S_IFMT != unix.S_IFREG {
			return false, nil
		}
		f, err := openatRetry(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return false, err
		}
		file := os.NewFile(uintptr(f), name)
		defer closeQuiet(file)
		h := sha256.New()
		if _, err := io.Copy(h, file); err != nil {
			return false, err
		}
		return hex.EncodeToString(h.Sum(nil)) == st.SHA256, nil
	}
	return false, nil
}

func runChmod(dirs *stepDirs, st journalStep) (bool, error) {
	fd, err := openBeneathFd(dirs.rootFd, st.Path, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return false, err
	}
	defer closeFd(fd)
	return true, unix.Fchmod(fd, st.Mode)
}

// syncTouched makes the steps durable before the journal is retired.
func syncTouched(dirs *stepDirs, touched map[string]bool, mode SyncMode) error {
	if mode == SyncFS {
		if err := unix.Syncfs(dirs.rootFd); err != nil {
			return fmt.Errorf("syncfs %s: %w", "root", err)
		}
		return nil
	}
	rels := make([]string, 0, len(touched))
	for rel := range touched {
		rels = append(rels, rel)
	}
	return forEachParallel(len(rels), func(i int) error {
		fd, err := dirs.open(rels[i])
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, ErrUnsafePath) {
			// Removed or replaced (by a file or link) by this publication:
			// its removal is made durable by syncing its parent, also touched.
			return nil
		}
		if err != nil {
			return fmt.Errorf("open %s for sync: %w", rels[i], err)
		}
		if err := unix.Fsync(fd); err != nil {
			return fmt.Errorf("sync dir %s: %w", rels[i], err)
		}
		return nil
	})
}

// newStepper returns a step counter feeding publishHook (nil in production).
func newStepper() func() {
	var n atomic.Int64
	return func() {
		k := n.Add(1)
		if h := publishHook; h != nil {
			h(int(k))
		}
	}
}
