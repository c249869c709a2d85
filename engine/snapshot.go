package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/cgroup"
	"github.com/stratahq/strata/engine/cuberun"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/store"
)

// Snapshot is one frozen state of a World's upper layer: an entry of its
// timeline. IDs are global (snapshots/<id>.manifest) so a fork's timeline
// can point at the snapshot it came from in another World.
type Snapshot struct {
	ID         string    `json:"id"`
	Parent     string    `json:"parent,omitempty"`
	World      string    `json:"world"`
	Time       time.Time `json:"time"`
	Message    string    `json:"message,omitempty"`
	Auto       bool      `json:"auto,omitempty"` // taken by strata (before rollback or exec), not asked for
	Files      int       `json:"files"`
	Dirs       int       `json:"dirs"`
	Symlinks   int       `json:"symlinks"`
	Whiteouts  int       `json:"whiteouts"`
	Opaque     int       `json:"opaque"`
	Hashed     int       `json:"hashed"`
	NewObjects int       `json:"new_objects"`
	NewBytes   int64     `json:"new_bytes"`
	Duration   string    `json:"duration"`
	Cube       string    `json:"cube_snapshot,omitempty"` // the linked CubeSandbox snapshot id
	// BuildState counts the top-most build-state entries (ignore and build
	// patterns) the snapshot left out, unread.
	BuildState int `json:"build_state,omitempty"`
}

// Timeline is worlds/<name>/timeline.json: snapshots oldest first, and the
// snapshot the World's current state descends from.
type Timeline struct {
	World      string     `json:"world"`
	Head       string     `json:"head,omitempty"`
	ForkedFrom *ForkLink  `json:"forked_from,omitempty"`
	Snapshots  []Snapshot `json:"snapshots"`
}

// ForkLink says which World and snapshot a forked World started from.
type ForkLink struct {
	World    string `json:"world"`
	Snapshot string `json:"snapshot"`
}

// SnapshotOptions are the flags of `strata snap`.
type SnapshotOptions struct {
	Message string
	Auto    bool
}

// ErrSnapshotNotFound is returned for an unknown snapshot reference.
var ErrSnapshotNotFound = errors.New("snapshot not found")

func (e *Engine) timelinePath(name string) string {
	return filepath.Join(e.Paths.World(name), "timeline.json")
}

func (e *Engine) statCachePath(name string) string {
	return filepath.Join(e.Paths.World(name), "statcache")
}

func (e *Engine) manifestPath(id string) string {
	return filepath.Join(e.Paths.Snapshots(), id+".manifest")
}

// Timeline reads a World's snapshot timeline.
func (e *Engine) Timeline(name string) (*Timeline, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return readTimeline(e.timelinePath(name), name)
}

func readTimeline(path, name string) (*Timeline, error) {
	tl := &Timeline{World: name}
	data, err := os.ReadFile(path)
	if errorsIsNotExist(err) {
		return tl, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read timeline of world %q: %w", name, err)
	}
	if err := json.Unmarshal(data, tl); err != nil {
		return nil, fmt.Errorf("read timeline of world %q: %s: %w", name, path, err)
	}
	tl.World = name
	return tl, nil
}

func (e *Engine) writeTimeline(tl *Timeline) error {
	return writeTimelineFile(e.timelinePath(tl.World), tl)
}

func writeTimelineFile(path string, tl *Timeline) error {
	data, err := json.MarshalIndent(tl, "", "  ")
	if err != nil {
		return err
	}
	return overlay.WriteFileAtomic(path, append(data, '\n'), 0o644)
}

// Find resolves a snapshot reference: a full id, a unique prefix, or
// "head", "head~N" (N snapshots before head along parent links).
func (tl *Timeline) Find(ref string) (*Snapshot, error) {
	byID := map[string]*Snapshot{}
	for i := range tl.Snapshots {
		byID[tl.Snapshots[i].ID] = &tl.Snapshots[i]
	}
	if ref == "head" || strings.HasPrefix(ref, "head~") {
		n := 0
		if ref != "head" {
			var err error
			if n, err = strconv.Atoi(strings.TrimPrefix(ref, "head~")); err != nil || n < 0 {
				return nil, fmt.Errorf("%w: %q (want head~N)", ErrSnapshotNotFound, ref)
			}
		}
		s := byID[tl.Head]
		for ; s != nil && n > 0; n-- {
			s = byID[s.Parent]
		}
		if s == nil {
			return nil, fmt.Errorf("%w: %q in world %q", ErrSnapshotNotFound, ref, tl.World)
		}
		return s, nil
	}
	if s, ok := byID[ref]; ok {
		return s, nil
	}
	var found []*Snapshot
	for i := range tl.Snapshots {
		if len(ref) >= 3 && strings.HasPrefix(tl.Snapshots[i].ID, ref) {
			found = append(found, &tl.Snapshots[i])
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("%w: %q in world %q (strata timeline %s lists them)", ErrSnapshotNotFound, ref, tl.World, tl.World)
	}
	return nil, fmt.Errorf("snapshot %q is ambiguous in world %q: %d snapshots start with it", ref, tl.World, len(found))
}

// store opens the object store once per Engine.
func (e *Engine) store() (*store.Store, error) {
	e.storeOnce.Do(func() { e.objStore, e.storeErr = store.OpenStore(e.Paths.Objects()) })
	return e.objStore, e.storeErr
}

// Snapshot freezes the World's upper layer. Running sessions are paused
// (SIGSTOP to every process of their PID namespaces) for the capture so the
// snapshot is consistent, then resumed. Only files changed since the last
// snapshot are read and hashed.
func (e *Engine) Snapshot(ctx context.Context, name string, o SnapshotOptions) (*Snapshot, error) {
	w, unlock, err := e.lockedWorld(ctx, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return e.snapshotLocked(ctx, w, o)
}

func (e *Engine) snapshotLocked(ctx context.Context, w *World, o SnapshotOptions) (*Snapshot, error) {
	start := time.Now()
	e.thawStale(w)
	st, err := e.store()
	if err != nil {
		return nil, fmt.Errorf("snapshot world %q: %w", w.Name, err)
	}
	// Shared store lock: gc (exclusive) cannot drop objects this capture puts
	// before the manifest that references them is on disk.
	slk, err := st.LockShared(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot world %q: %w", w.Name, err)
	}
	defer func() { _ = slk.Unlock() }()
	tl, err := e.Timeline(w.Name)
	if err != nil {
		return nil, err
	}
	cache, err := store.LoadStatCache(e.statCachePath(w.Name))
	if err != nil {
		cache = store.NewStatCache() // a lost cache only costs rehashing
	}
	// A cube session's commands run in the sandbox; on this host there is
	// only its runner, which must keep relaying.
	rt := e.runtimeFor(w)
	thaw := rt.Freeze(ctx, w)
	killPoint("snapshot.frozen")
	build, err := e.buildStateRules()
	if err != nil {
		thaw()
		return nil, fmt.Errorf("snapshot world %q: %w", w.Name, err)
	}
	m, stats, err := store.CaptureUpperWith(ctx, st, e.Paths.Upper(w.Name), w.Dialect, cache, store.CaptureOptions{BuildState: build, DeferSync: true})
	var trees []treeCapture // the extra trees, in the same freeze (trees_snapshot.go)
	if err == nil {
		trees, err = e.captureTrees(ctx, st, w, build, &stats)
	}
	thaw()
	if err != nil {
		return nil, fmt.Errorf("snapshot world %q: %w", w.Name, err)
	}
	s := Snapshot{
		ID: newID("s-"), Parent: tl.Head, World: w.Name, Time: time.Now().UTC(), Message: o.Message, Auto: o.Auto,
		Files: stats.Files, Dirs: stats.Dirs, Symlinks: stats.Symlinks, Whiteouts: stats.Whiteouts, Opaque: stats.Opaque,
		Hashed: stats.Hashed, NewObjects: stats.NewObjects, NewBytes: stats.NewBytes, BuildState: stats.BuildState,
	}
	// The runtime's half (a cube VM's memory and rootfs) does not hold the
	// upper: both are taken together and linked in one timeline entry.
	if s.Cube, err = rt.Snapshot(ctx, w, s.ID); err != nil {
		return nil, fmt.Errorf("snapshot world %q: %w", w.Name, err)
	}
	// The extra trees' manifests first (each synced with its objects), then
	// the source's objects and manifest, then the timeline: a crash in between
	// leaves unreferenced manifests, never a timeline entry without its
	// manifests (three fsync rounds: snapshot_durable.go).
	if err := e.writeTreeManifests(s.ID, trees); err != nil {
		return nil, fmt.Errorf("snapshot world %q: %w", w.Name, err)
	}
	if err := e.commitSnapshot(st, w, tl, &s, m, stats.Unsynced, start); err != nil {
		return nil, fmt.Errorf("snapshot world %q: %w", w.Name, err)
	}
	killPoint("snapshot.timeline")
	if err := cache.Save(e.statCachePath(w.Name)); err != nil {
		e.Log.Warn("save stat cache", "world", w.Name, "err", err)
	}
	e.saveTreeCaches(trees)
	e.activity(ctx, Event{Type: EventSnapshotTaken, World: w.Name, Detail: map[string]any{"snapshot": s.ID, "message": s.Message, "auto": s.Auto, "files": s.Files, "new_bytes": s.NewBytes}})
	return &s, nil
}

// freezeWorld stops every process of the World's running sessions (the
// cgroup freezer where sessions have cgroups, else SIGSTOP) and returns the
// function that resumes them. A marker naming the freezing process (pid
// and start time, so a reused pid does not pass for it) is written first,
// so a crash mid-capture is undone by the next strata that loads the World
// (thawStale, called by World and Worlds).
func (e *Engine) freezeWorld(w *World) func() {
	marker := e.frozenMarker(w.Name)
	pids := e.worldPIDs(w)
	if len(pids) == 0 {
		return func() {}
	}
	_ = os.WriteFile(marker, []byte(processStamp(os.Getpid())), 0o644)
	killPoint("freeze.marked")
	if thaw, ok := e.freezeCgroup(w); ok {
		killPoint("freeze.frozen")
		return func() {
			thaw()
			_ = os.Remove(marker)
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	killPoint("freeze.frozen")
	return func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
		_ = os.Remove(marker)
	}
}

func (e *Engine) frozenMarker(name string) string {
	return filepath.Join(e.Paths.World(name), ".frozen")
}

// processStamp is "PID STARTTIME" (clock ticks since boot, /proc/PID/stat
// field 22): a process's identity that survives pid reuse.
func processStamp(pid int) string {
	return strconv.Itoa(pid) + " " + processStart(pid)
}

func processStart(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted from the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22; f[0] is field 3
}

// thawStale resumes a World whose freezer died before resuming it. It costs
// one failed open when the World is not frozen.
func (e *Engine) thawStale(w *World) {
	marker := e.frozenMarker(w.Name)
	data, err := os.ReadFile(marker)
	if err != nil {
		return
	}
	if f := strings.Fields(string(data)); len(f) == 2 {
		pid, _ := strconv.Atoi(f[0])
		if pid == os.Getpid() {
			return // this process froze it and resumes it when its capture ends
		}
		if pid > 0 && syscall.Kill(pid, 0) == nil && processStart(pid) == f[1] {
			return // the freezer is alive and will resume them
		}
	}
	e.Log.Warn("resume a World its snapshotter left frozen", "world", w.Name, "marker", strings.TrimSpace(string(data)))
	cgroup.ThawWorld(w)
	for _, p := range e.worldPIDs(w) {
		_ = syscall.Kill(p, syscall.SIGCONT)
	}
	_ = os.Remove(marker)
}

// worldPIDs lists the host PIDs of every process in the World's running
// sessions' PID namespaces, the session inits excluded (they only reap and
// write transcripts, and must stay able to do so).
func (e *Engine) worldPIDs(w *World) []int {
	ss, _ := ListSessions(e.Paths.World(w.Name))
	inits := map[int]bool{}
	for _, s := range ss {
		inits[s.InitPID] = true
	}
	var pids []int
	for _, p := range sessionProcessesOf(ss) {
		if !inits[p] {
			pids = append(pids, p)
		}
	}
	return pids
}

// RollbackOptions are the flags of `strata rollback`.
type RollbackOptions struct {
	Kill bool // stop running sessions instead of refusing
}

// RollbackResult says what a rollback did.
type RollbackResult struct {
	World    string    `json:"world"`
	To       string    `json:"to"`
	Saved    *Snapshot `json:"saved"` // the automatic snapshot of the state before, so the rollback can be undone
	Killed   int       `json:"killed_sessions"`
	Duration string    `json:"duration"`
	// BuildState is what happened to the World's build state: keep or
	// discard; BuildKept the top-most build entries kept (BuildDropped: in
	// a directory the rolled-back tree no longer has); Touched the source
	// files given the current time so a build does not trust older outputs.
	BuildState   BuildStateMode `json:"build_state"`
	BuildKept    int            `json:"build_kept,omitempty"`
	BuildDropped int            `json:"build_dropped,omitempty"`
	Touched      int            `json:"touched,omitempty"`
}

// Rollback restores the World's upper to a snapshot. It first snapshots the
// current state (so a rollback can itself be undone), stops the World's
// sessions (refusing unless Kill), unmounts, restores exactly, remounts.
func (e *Engine) Rollback(ctx context.Context, name, ref string, o RollbackOptions) (*RollbackResult, error) {
	start := time.Now()
	w, unlock, err := e.lockedWorld(ctx, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	tl, err := e.Timeline(name)
	if err != nil {
		return nil, err
	}
	target, err := tl.Find(ref)
	if err != nil {
		return nil, err
	}
	m, err := store.ReadManifest(e.manifestPath(target.ID))
	if err != nil {
		return nil, fmt.Errorf("rollback world %q to %s: %w", name, target.ID, err)
	}
	res := &RollbackResult{World: name, To: target.ID, BuildState: e.buildStateMode(w)}
	build, err := e.buildStateRules()
	if err != nil {
		return nil, fmt.Errorf("rollback world %q: %w", name, err)
	}
	running := e.runningSessions(w)
	if len(running) > 0 && !o.Kill {
		return nil, fmt.Errorf("rollback world %q: %w (%s); stop them first or pass --kill", name, ErrSessionsRunning, strings.Join(running, ", "))
	}
	// The target's upper is built, every object verified, before anything
	// of the World changes: a damaged snapshot fails here with its sessions
	// still running and its upper as it was.
	staged, err := e.stageUpper(ctx, w, m)
	if err != nil {
		return nil, fmt.Errorf("rollback world %q to %s: %w", name, target.ID, worldUnchanged(err))
	}
	// Every extra tree is staged and verified too before anything changes.
	treeMs, err := e.readTreeManifests(w, target.ID)
	if err != nil {
		_ = staged.Discard()
		return nil, fmt.Errorf("rollback world %q to %s: %w", name, target.ID, err)
	}
	stagedTrees, err := e.stageTrees(ctx, w, treeMs)
	if err != nil {
		_ = staged.Discard()
		return nil, fmt.Errorf("rollback world %q to %s: %w", name, target.ID, worldUnchanged(err))
	}
	swapped := false
	defer func() {
		if !swapped {
			_ = staged.Discard()
			discardTrees(stagedTrees)
		}
	}()
	killPoint("rollback.staged")
	if res.Saved, err = e.snapshotLocked(ctx, w, SnapshotOptions{Message: "before rollback to " + target.ID, Auto: true}); err != nil {
		return nil, fmt.Errorf("rollback world %q: %w", name, err)
	}
	killPoint("rollback.saved")
	var prepare func() error
	if res.BuildState == BuildKeep {
		// Build outputs made from the newer sources stay: every source file
		// the rollback changes gets the current time, newer than them.
		saved, err := store.ReadManifest(e.manifestPath(res.Saved.ID))
		if err != nil {
			return nil, fmt.Errorf("rollback world %q: %w", name, err)
		}
		if res.Touched, err = store.TouchRestored(staged.Dir(), w.Source, saved, m, build, time.Now()); err != nil {
			return nil, fmt.Errorf("rollback world %q to %s: %w", name, target.ID, worldUnchanged(err))
		}
		savedTrees, err := e.readTreeManifests(w, res.Saved.ID)
		if err != nil {
			return nil, fmt.Errorf("rollback world %q: %w", name, err)
		}
		touched, err := e.touchTrees(stagedTrees, savedTrees, treeMs, build, time.Now())
		if err != nil {
			return nil, fmt.Errorf("rollback world %q to %s: %w", name, target.ID, worldUnchanged(err))
		}
		res.Touched += touched
		prepare = func() error {
			upper := e.Paths.Upper(w.Name)
			res.BuildKept, res.BuildDropped, err = store.CarryBuildState(upper, staged.Dir(), w.Dialect, build)
			if err != nil {
				// Put back what moved: the World stays as it was, build state too.
				if _, _, berr := store.CarryBuildState(staged.Dir(), upper, w.Dialect, build); berr != nil {
					err = errors.Join(err, fmt.Errorf("put build state back: %w", berr))
				}
				return err
			}
			kept, dropped, err := e.carryTrees(stagedTrees, build)
			res.BuildKept, res.BuildDropped = res.BuildKept+kept, res.BuildDropped+dropped
			if err != nil {
				if _, _, berr := store.CarryBuildState(staged.Dir(), upper, w.Dialect, build); berr != nil {
					err = errors.Join(err, fmt.Errorf("put build state back: %w", berr))
				}
			}
			return err
		}
	}
	if res.Killed, err = e.stopSessions(ctx, w, running); err != nil {
		return nil, fmt.Errorf("rollback world %q: %w", name, err)
	}
	swapped = true
	if err := e.swapUpper(ctx, w, staged, prepare, stagedTrees...); err != nil {
		return nil, fmt.Errorf("rollback world %q to %s: %w", name, target.ID, err)
	}
	killPoint("rollback.swapped")
	if err := e.runtimeFor(w).Rollback(ctx, w, target.Cube); err != nil {
		return nil, fmt.Errorf("rollback world %q to %s: %w", name, target.ID, err)
	}
	tl, err = e.Timeline(name) // re-read: the auto snapshot changed it
	if err != nil {
		return nil, err
	}
	tl.Head = target.ID
	if err := e.writeTimeline(tl); err != nil {
		return nil, err
	}
	res.Duration = time.Since(start).Round(time.Microsecond).String()
	e.activity(ctx, Event{Type: EventRollback, World: name, Detail: map[string]any{"to": target.ID, "saved": res.Saved.ID}})
	return res, nil
}

// stageUpper builds and verifies the upper m froze next to the World's
// live one, which keeps running meanwhile.
func (e *Engine) stageUpper(ctx context.Context, w *World, m *store.Manifest) (*store.StagedUpper, error) {
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	// The old upper is swapped aside and removed after the remount: removing
	// a tree is the slow part, and the World need not wait for it.
	return store.StageUpper(ctx, st, m, e.Paths.UpperOf(w), w.Dialect, store.RestoreOptions{UserXattr: !isRoot(), Lower: w.Source, DeferCleanup: true})
}

// swapUpper puts a staged upper in place of the World's, with the World
// unmounted, then mounts it again if it was mounted; if the swap cannot
// happen the World is mounted again as it was. The stat cache is dropped:
// every restored file has a new inode. prepare (may be nil) runs with the
// World unmounted, just before the swap: an error from it leaves the World
// as it was.
func (e *Engine) swapUpper(ctx context.Context, w *World, staged *store.StagedUpper, prepare func() error, trees ...stagedTree) error {
	wasMounted := e.runtimeFor(w).HostView() && e.Mounted(w)
	remount := func(err error) error {
		_ = staged.Discard()
		discardTrees(trees)
		if wasMounted {
			if merr := e.mountLocked(ctx, w); merr != nil {
				return errors.Join(err, merr)
			}
		}
		return err
	}
	if err := e.unmountLocked(ctx, w); err != nil {
		return remount(err)
	}
	if err := e.quiesceGuest(ctx, w); err != nil {
		return remount(err)
	}
	killPoint("rollback.unmounted")
	if prepare != nil {
		if err := prepare(); err != nil {
			return remount(err)
		}
	}
	upper := e.Paths.Upper(w.Name)
	if err := staged.Swap(); err != nil {
		return remount(err)
	}
	// The extra trees right after the source, still unmounted.
	if err := e.swapTrees(trees); err != nil {
		if wasMounted {
			err = errors.Join(err, e.mountLocked(ctx, w))
		}
		return err
	}
	defer func() {
		if err := store.RemoveRestoreLeftovers(upper); err != nil {
			e.Log.Warn("remove the replaced upper", "world", w.Name, "err", err)
		}
	}()
	_ = os.Remove(e.statCachePath(w.Name))
	if err := resetWorkDir(e.Paths.Work(w.Name)); err != nil {
		return err
	}
	if wasMounted {
		return e.mountLocked(ctx, w)
	}
	return nil
}

// worldUnchanged says so on the error of a restore that failed before it
// changed anything because a snapshot object is missing or corrupt.
func worldUnchanged(err error) error {
	if _, ok := errors.AsType[*store.CorruptObjectError](err); ok {
		return fmt.Errorf("%w; the World was not changed", err)
	}
	return err
}

// resetWorkDir empties the overlay work dir so a remount starts clean. An
// empty dir is swapped in with one RENAME_EXCHANGE, then the old one is
// removed: a crash at any point leaves a work dir the next mount can use.
func resetWorkDir(dir string) error {
	fresh := dir + ".new"
	if err := removeAllForce(fresh); err != nil {
		return fmt.Errorf("reset work dir %s: %w", dir, err)
	}
	if err := os.Mkdir(fresh, 0o755); err != nil {
		return fmt.Errorf("reset work dir %s: %w", dir, err)
	}
	err := unix.Renameat2(unix.AT_FDCWD, fresh, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.ENOENT) {
		err = os.Rename(fresh, dir) // no work dir yet (a crash of an older strata)
	}
	if err != nil {
		_ = os.Remove(fresh)
		return fmt.Errorf("reset work dir %s: %w", dir, err)
	}
	if err := removeAllForce(fresh); err != nil {
		return fmt.Errorf("reset work dir %s: remove the old one: %w", dir, err)
	}
	return nil
}

// stopSessions kills the listed sessions and waits for them to end.
func (e *Engine) stopSessions(ctx context.Context, w *World, ids []string) (int, error) {
	n := 0
	for _, id := range ids {
		if err := KillSession(e.SessionDir(w.Name, id), syscall.SIGKILL); err == nil {
			n++
		}
	}
	for _, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := WaitSession(wctx, e.SessionDir(w.Name, id))
		cancel()
		if err != nil {
			return n, fmt.Errorf("session %s did not stop: %w", id, err)
		}
	}
	return n, nil
}

// ForkOptions are the flags of `strata fork`.
type ForkOptions struct {
	Snap   string // snapshot reference; "" = the live state, via an implicit snapshot
	N      int
	Prefix string // new names are PREFIX-1..N; default NAME
	Names  []string
}

// Fork creates N new Worlds whose uppers are restored from a snapshot of
// this World, concurrently. Each is independent afterwards.
func (e *Engine) Fork(ctx context.Context, name string, o ForkOptions) ([]*World, error) {
	w, err := e.World(name)
	if err != nil {
		return nil, err
	}
	// A tree whose dir moved or became a link would be forked over the
	// link's target (trees.go).
	if err := e.checkTrees(w); err != nil {
		return nil, fmt.Errorf("fork world %q: %w (no World was created)", name, err)
	}
	if o.N <= 0 {
		o.N = 1
	}
	if o.N > 100 {
		return nil, fmt.Errorf("fork world %q: -n %d: at most 100 at once", name, o.N)
	}
	var snap *Snapshot
	if o.Snap == "" {
		if snap, err = e.Snapshot(ctx, name, SnapshotOptions{Message: fmt.Sprintf("fork into %d", o.N), Auto: true}); err != nil {
			return nil, err
		}
	} else {
		tl, err := e.Timeline(name)
		if err != nil {
			return nil, err
		}
		if snap, err = tl.Find(o.Snap); err != nil {
			return nil, err
		}
	}
	prov, err := e.Provenance(name)
	if err != nil {
		return nil, fmt.Errorf("fork world %q: %w", name, err)
	}
	m, err := store.ReadManifest(e.manifestPath(snap.ID))
	if err != nil {
		return nil, fmt.Errorf("fork world %q from %s: %w", name, snap.ID, err)
	}
	treeMs, err := e.readTreeManifests(w, snap.ID)
	if err != nil {
		return nil, fmt.Errorf("fork world %q from %s: %w", name, snap.ID, err)
	}
	names := o.Names
	if len(names) == 0 {
		prefix := o.Prefix
		if prefix == "" {
			prefix = name
		}
		names = e.freeNames(prefix, o.N)
	}
	for _, n := range names {
		if err := ValidateName(n); err != nil {
			return nil, fmt.Errorf("fork world %q: %w", name, err)
		}
	}
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	// Every new World is built completely (upper restored and verified,
	// provenance, timeline, world.toml last) under a staging name; only
	// when all are, a commit record is written and they are renamed into
	// place. A crash before the record leaves only staging dirs (removed by
	// the next strata); after it, the next strata publishes the rest.
	out := make([]*World, len(names))
	staged := make([]*stagedWorld, len(names))
	defer func() {
		for _, sw := range staged {
			if sw != nil {
				sw.discard()
			}
		}
	}()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nw, sw, err := e.stageWorld(ctx, CreateOptions{Name: n, Source: w.Source, Backend: w.Backend, MountBackend: w.MountBackend, Isolation: w.Isolation, Labels: w.Labels, FromCubeSnapshot: snap.Cube, Template: cuberun.TemplateOf(w), BuildState: BuildStateMode(w.BuildState), Trees: w.Trees})
			if err != nil {
				errs[i] = err
				return
			}
			staged[i] = sw
			if _, err := os.Lstat(e.Paths.World(n)); err == nil {
				errs[i] = fmt.Errorf("new world %q: %w (strata rm %s, or pick another name)", n, ErrWorldExists, n)
				return
			}
			if err := store.RestoreUpperWith(ctx, st, m, sw.upper(nw), nw.Dialect, store.RestoreOptions{UserXattr: !isRoot(), Lower: w.Source, NoSync: true}); err != nil {
				errs[i] = fmt.Errorf("restore %s into %q: %w", snap.ID, n, err)
				return
			}
			if err := e.restoreTreesInto(ctx, st, w, treeMs, sw.dir, nw); err != nil {
				errs[i] = fmt.Errorf("restore %s into %q: %w", snap.ID, n, err)
				return
			}
			killPoint("fork.restored")
			nw.Base = snap.ID
			if err := inheritProvenance(filepath.Join(sw.dir, "provenance"), name, prov, snap); err != nil {
				errs[i] = fmt.Errorf("provenance of %q: %w", n, err)
				return
			}
			tl := &Timeline{World: n, Head: snap.ID, ForkedFrom: &ForkLink{World: name, Snapshot: snap.ID}}
			if err := writeTimelineFile(filepath.Join(sw.dir, "timeline.json"), tl); err != nil {
				errs[i] = err
				return
			}
			if err := writeWorldFile(filepath.Join(sw.dir, "world.toml"), nw); err != nil {
				errs[i] = err
				return
			}
			out[i] = nw
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("fork world %q: %w (no World was created)", name, worldUnchanged(err))
	}
	// One syncfs for all the new Worlds instead of one per restore, before
	// any of them is published.
	if f, err := os.Open(e.Paths.Worlds()); err == nil {
		_ = unix.Syncfs(int(f.Fd()))
		f.Close()
	}
	killPoint("fork.staged")
	record := filepath.Join(e.Paths.Worlds(), forkRecordPrefix+newID("")+".json")
	if err := writeForkRecord(record, staged); err != nil {
		return nil, fmt.Errorf("fork world %q: %w (no World was created)", name, err)
	}
	killPoint("fork.committed")
	for i, sw := range staged {
		if err := sw.publish(e); err != nil {
			// Only a World of the same name made meanwhile: the others land.
			e.Log.Error("publish fork", "world", names[i], "err", err)
			errs[i] = err
			out[i] = nil
			continue
		}
		killPoint("fork.published")
	}
	_ = os.Remove(record)
	for i, nw := range out {
		if nw == nil {
			continue
		}
		if err := e.runtimeFor(nw).Realize(ctx, nw, CreateOptions{Name: nw.Name, Source: w.Source, Backend: w.Backend, FromCubeSnapshot: snap.Cube, Template: cuberun.TemplateOf(w)}); err != nil {
			_ = removeAllForce(e.Paths.World(nw.Name))
			errs[i], out[i] = err, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, nw := range out {
			if nw != nil {
				if made, err := e.World(nw.Name); err == nil {
					_ = e.runtimeFor(made).Destroy(ctx, made)
				}
				_ = removeAllForce(e.Paths.World(nw.Name))
			}
		}
		return nil, fmt.Errorf("fork world %q: %w", name, err)
	}
	e.activity(ctx, Event{Type: EventFork, World: name, Detail: map[string]any{"snapshot": snap.ID, "worlds": names}})
	return out, nil
}

// freeNames picks n unused names PREFIX-1, PREFIX-2, ...
func (e *Engine) freeNames(prefix string, n int) []string {
	var out []string
	for i := 1; len(out) < n; i++ {
		cand := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := os.Stat(e.Paths.World(cand)); errorsIsNotExist(err) {
			out = append(out, cand)
		}
	}
	return out
}

// RestorePaths brings single paths back from a snapshot (including "it
// was deleted" and "it did not exist"). The World must have no running session.
func (e *Engine) RestorePaths(ctx context.Context, name, ref string, paths []string) error {
	w, unlock, err := e.lockedWorld(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	if running := e.runningSessions(w); len(running) > 0 {
		return fmt.Errorf("restore in world %q: %w (%s); stop them first", name, ErrSessionsRunning, strings.Join(running, ", "))
	}
	tl, err := e.Timeline(name)
	if err != nil {
		return err
	}
	s, err := tl.Find(ref)
	if err != nil {
		return err
	}
	// The paths by tree: NAME:path (or an absolute path in a tree) is
	// restored from that tree's manifest (snapshots/<id>@<tree>.manifest)
	// into its upper, a plain one from the source's.
	type group struct {
		view  *World
		m     *store.Manifest
		paths []string
	}
	byTree := map[string]*group{}
	for _, p := range paths {
		if err := w.UnknownTreePrefix(p, e.Paths.Upper(w.Name)); err != nil {
			return fmt.Errorf("restore in world %q: %s: %w", name, p, err)
		}
		tree, rel := w.SplitTreePath(p)
		v, err := w.TreeView(tree)
		if err != nil {
			return fmt.Errorf("restore in world %q: %s: %w", name, p, err)
		}
		c, err := e.relToSource(v, rel)
		if err != nil {
			return err
		}
		g := byTree[tree]
		if g == nil {
			g = &group{view: v}
			byTree[tree] = g
		}
		g.paths = append(g.paths, c)
	}
	var groups []*group
	for _, t := range w.TreeNames() {
		g := byTree[t]
		if g == nil {
			continue
		}
		file := e.manifestPath(s.ID)
		if t != MainTree {
			file = e.treeManifestPath(s.ID, t)
		}
		if g.m, err = store.ReadManifest(file); err != nil {
			if t != MainTree {
				return fmt.Errorf("restore from %s, tree %s: %w", s.ID, t, err)
			}
			return fmt.Errorf("restore from %s: %w", s.ID, err)
		}
		groups = append(groups, g)
	}
	st, err := e.store()
	if err != nil {
		return err
	}
	wasMounted := e.Mounted(w)
	if err := e.unmountLocked(ctx, w); err != nil {
		return err
	}
	if err := e.quiesceGuest(ctx, w); err != nil {
		return err
	}
	defer e.resumeGuest(ctx, w)
	killPoint("restore.unmounted")
	var done []string // trees restored before a failure
	for _, g := range groups {
		err := store.RestorePathsWith(ctx, st, g.m, e.Paths.UpperOf(g.view), g.view.Dialect, g.paths, store.RestoreOptions{UserXattr: !isRoot(), Lower: g.view.Source})
		if err == nil {
			done = append(done, g.view.TreeName())
			continue
		}
		err = fmt.Errorf("restore %s from %s in world %q: %w", strings.Join(treePaths(g.view, g.paths), ", "), s.ID, name, worldUnchanged(err))
		if len(done) > 0 {
			err = fmt.Errorf("%w (the paths of tree %s were restored)", err, strings.Join(done, ", "))
		}
		if wasMounted {
			if merr := e.mountLocked(ctx, w); merr != nil {
				return errors.Join(err, merr)
			}
		}
		return err
	}
	killPoint("restore.done")
	var touchErr error
	if e.buildStateMode(w) == BuildKeep {
		// As after a rollback: build outputs stay, so what the restore
		// changed must look newer than them.
		build, err := e.buildStateRules()
		for _, g := range groups {
			if err == nil {
				_, err = store.TouchPaths(e.Paths.UpperOf(g.view), g.view.Source, g.m, g.paths, build, time.Now())
			}
			if err != nil {
				touchErr = fmt.Errorf("restored %s from %s in world %q, but could not give them the current time: %w; a build may trust outputs older than them (touch them, or clean the build)", strings.Join(treePaths(g.view, g.paths), ", "), s.ID, name, err)
				break
			}
		}
	}
	for _, g := range groups {
		_ = os.Remove(e.statCacheOf(g.view))
		if err := resetWorkDir(e.Paths.WorkOf(g.view)); err != nil {
			return errors.Join(err, touchErr)
		}
	}
	if wasMounted {
		return errors.Join(e.mountLocked(ctx, w), touchErr)
	}
	return touchErr
}

// treePaths writes paths of the tree v stands for as the CLI does
// (NAME:path in another tree).
func treePaths(v *World, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = TreePath(v.TreeName(), p)
	}
	return out
}

// relToSource turns a user's path (relative to the source, or absolute
// inside it) into a clean relative path.
func (e *Engine) relToSource(w *World, p string) (string, error) {
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(w.Source, filepath.Clean(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", fmt.Errorf("path %q is outside the source %s", p, w.Source)
		}
		p = rel
	}
	p = filepath.ToSlash(filepath.Clean(p))
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("path %q is not inside the source %s", p, w.Source)
	}
	return p, nil
}

// SnapDiff lists the paths that differ between two snapshots, or between a
// snapshot and the World now (b == "").
func (e *Engine) SnapDiff(ctx context.Context, name, a, b string) ([]store.ManifestDelta, error) {
	tl, err := e.Timeline(name)
	if err != nil {
		return nil, err
	}
	sa, err := tl.Find(a)
	if err != nil {
		return nil, err
	}
	ma, err := store.ReadManifest(e.manifestPath(sa.ID))
	if err != nil {
		return nil, err
	}
	var mb *store.Manifest
	if b == "" {
		w, err := e.World(name)
		if err != nil {
			return nil, err
		}
		if mb, err = e.captureNow(ctx, w); err != nil {
			return nil, err
		}
	} else {
		sb, err := tl.Find(b)
		if err != nil {
			return nil, err
		}
		if mb, err = store.ReadManifest(e.manifestPath(sb.ID)); err != nil {
			return nil, err
		}
	}
	out := store.DiffManifests(ma, mb)
	if w, err := e.World(name); err == nil && w.HasTrees() {
		td, err := e.treeDeltas(ctx, w, sa.ID, snapIDOf(tl, b))
		if err != nil {
			return nil, err
		}
		out = append(out, td...)
	}
	return out, nil
}

// captureNow freezes the live upper into a manifest without recording a snapshot.
func (e *Engine) captureNow(ctx context.Context, w *World) (*store.Manifest, error) {
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	slk, err := st.LockShared(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = slk.Unlock() }()
	cache, err := store.LoadStatCache(e.statCacheOf(w))
	if err != nil {
		cache = store.NewStatCache()
	}
	build, err := e.buildStateRules()
	if err != nil {
		return nil, err
	}
	m, _, err := store.CaptureUpperWith(ctx, st, e.Paths.UpperOf(w), w.Dialect, cache, store.CaptureOptions{BuildState: build})
	return m, err
}

// unsavedChanges counts changes not covered by the head snapshot: 0 when the
// World is exactly as its newest snapshot froze it.
func (e *Engine) unsavedChanges(ctx context.Context, w *World, cs *overlay.ChangeSet) (int, error) {
	if w.HasTrees() {
		return e.unsavedTreeChanges(ctx, w, cs) // trees_snapshot.go
	}
	if len(cs.Changes) == 0 {
		return 0, nil
	}
	tl, err := e.Timeline(w.Name)
	if err != nil || tl.Head == "" {
		return len(cs.Changes), err
	}
	head, err := store.ReadManifest(e.manifestPath(tl.Head))
	if err != nil {
		return len(cs.Changes), nil
	}
	now, err := e.captureNow(ctx, w)
	if err != nil {
		return 0, err
	}
	return len(store.DiffManifests(head, now)), nil
}

// GCResult is what `strata gc` did.
type GCResult struct {
	Removed          int   `json:"removed_objects"`
	Freed            int64 `json:"freed_bytes"`
	Manifests        int   `json:"manifests"`
	RemovedManifests int   `json:"removed_manifests"`
}

// GC drops the manifests of snapshots no World references any more (their
// World was purged, or its trash entry expired), then the objects that no
// remaining manifest (and no apply base) references. It holds the store
// lock exclusive throughout, so no snapshot is between writing its
// manifest and its timeline entry meanwhile; anything younger than the
// store's grace period is kept for writers that do not lock. Any
// unreadable timeline or manifest aborts: gc never drops what it could not
// prove dead.
func (e *Engine) GC(ctx context.Context) (*GCResult, error) {
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	_, _ = e.Trash(ctx) // purges expired trash entries
	lk, err := st.LockExclusive(ctx)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	defer func() { _ = lk.Unlock() }()
	refs, err := e.referencedSnapshots()
	if err != nil {
		return nil, fmt.Errorf("gc: %w (nothing removed)", err)
	}
	res := &GCResult{}
	var liveIDs []store.ObjectID
	ents, err := os.ReadDir(e.Paths.Snapshots())
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	cutoff := start.Add(-st.Grace())
	var dead []string
	for _, d := range ents {
		id, ok := snapshotIDOfManifest(d.Name()) // a tree's too (trees_snapshot.go)
		if !ok {
			continue
		}
		p := filepath.Join(e.Paths.Snapshots(), d.Name())
		if !refs[id] {
			if fi, err := d.Info(); err == nil && fi.ModTime().Before(cutoff) {
				dead = append(dead, p)
				continue
			}
		}
		m, err := store.ReadManifest(p)
		if err != nil {
			return nil, fmt.Errorf("gc: %w (nothing removed)", err)
		}
		res.Manifests++
		for _, en := range m.Entries {
			if en.Object != "" {
				liveIDs = append(liveIDs, en.Object)
			}
		}
	}
	for _, p := range dead {
		if err := os.Remove(p); err != nil && !errorsIsNotExist(err) {
			return res, fmt.Errorf("gc: %w", err)
		}
		res.RemovedManifests++
	}
	liveIDs = append(liveIDs, e.baseObjects()...)
	removed, freed, err := st.GCLocked(ctx, start, func(yield func(store.ObjectID) bool) {
		for _, id := range liveIDs {
			if !yield(id) {
				return
			}
		}
	})
	res.Removed, res.Freed = removed, freed
	return res, err
}

// referencedSnapshots lists every snapshot id a timeline still needs: those
// of every World, of every World in the trash, and of Worlds being built
// (a fork in progress); a timeline's head and fork point count too.
func (e *Engine) referencedSnapshots() (map[string]bool, error) {
	refs := map[string]bool{}
	add := func(dir string) error {
		tl, err := readTimeline(filepath.Join(dir, "timeline.json"), filepath.Base(dir))
		if err != nil {
			return err
		}
		for _, s := range tl.Snapshots {
			refs[s.ID] = true
		}
		refs[tl.Head] = true
		if tl.ForkedFrom != nil {
			refs[tl.ForkedFrom.Snapshot] = true
		}
		if w, err := readWorldFile(filepath.Join(dir, "world.toml")); err == nil && w.Base != "" {
			refs[w.Base] = true
		}
		return nil
	}
	for _, root := range []string{e.Paths.Worlds(), e.Paths.Trash()} {
		ents, err := os.ReadDir(root)
		if err != nil {
			return nil, err
		}
		for _, d := range ents {
			if !d.IsDir() {
				continue
			}
			if err := add(filepath.Join(root, d.Name())); err != nil {
				return nil, err
			}
		}
	}
	delete(refs, "")
	return refs, nil
}

// DamagedObject is one object a snapshot needs whose content no longer
// matches its id (or that is missing).
type DamagedObject struct {
	Object   store.ObjectID `json:"object"`
	Snapshot string         `json:"snapshot"`
	Path     string         `json:"path"`
	Reason   string         `json:"reason"`
}

// VerifyObjects rehashes every object every manifest names (each once) and
// lists the damaged ones with a snapshot and path that need them
// (`strata gc --verify`).
func (e *Engine) VerifyObjects(ctx context.Context) ([]DamagedObject, error) {
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(e.Paths.Snapshots())
	if err != nil {
		return nil, fmt.Errorf("verify objects: %w", err)
	}
	seen := map[store.ObjectID]bool{}
	var out []DamagedObject
	for _, d := range ents {
		id, ok := strings.CutSuffix(d.Name(), ".manifest")
		if !ok {
			continue
		}
		m, err := store.ReadManifest(filepath.Join(e.Paths.Snapshots(), d.Name()))
		if err != nil {
			out = append(out, DamagedObject{Snapshot: id, Reason: err.Error()})
			continue
		}
		for _, en := range m.Entries {
			if en.Kind != store.EntryFile || seen[en.Object] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return out, err
			}
			seen[en.Object] = true
			if err := st.Verify(en.Object); err != nil {
				reason := err.Error()
				if ce, ok := errors.AsType[*store.CorruptObjectError](err); ok {
					reason = ce.Reason
				} else if errorsIsNotExist(err) {
					reason = "missing from the store"
				}
				out = append(out, DamagedObject{Object: en.Object, Snapshot: id, Path: en.Path, Reason: reason})
			}
		}
	}
	return out, nil
}

// baseObjects lists the objects apply bases of every World reference (kept by gc).
func (e *Engine) baseObjects() []store.ObjectID {
	// Broken Worlds too: their bases are kept until they are removed.
	ws, broken, _ := e.scanWorlds()
	var out []store.ObjectID
	for _, w := range ws {
		for _, v := range treeViews(w) { // each overlay tree's bases (trees.go)
			out = append(out, e.basesOf(v).Objects()...)
		}
	}
	for _, b := range broken {
		out = append(out, e.bases(b.Name).Objects()...)
	}
	// A World in the trash can be restored with its bases intact.
	if ents, err := os.ReadDir(e.Paths.Trash()); err == nil {
		for _, d := range ents {
			out = append(out, BaseIndex{Dir: filepath.Join(e.Paths.Trash(), d.Name(), "bases")}.Objects()...)
			trees, _ := filepath.Glob(filepath.Join(e.Paths.Trash(), d.Name(), "trees", "*", "bases"))
			for _, t := range trees {
				out = append(out, BaseIndex{Dir: t}.Objects()...)
			}
		}
	}
	return out
}

// TreeLine is one line of a timeline drawn as a tree.
type TreeLine struct {
	Prefix   string // indentation and branch glyphs
	Depth    int
	Snapshot Snapshot
}

// TimelineTree orders a timeline depth-first from its roots (snapshots
// whose parent is not in this timeline, e.g. a fork's origin), children
// oldest first, so branches made by rollbacks show as indented subtrees.
func TimelineTree(tl *Timeline) []TreeLine {
	in := map[string]bool{}
	kids := map[string][]int{}
	for _, s := range tl.Snapshots {
		in[s.ID] = true
	}
	var roots []int
	for i, s := range tl.Snapshots {
		if s.Parent == "" || !in[s.Parent] {
			roots = append(roots, i)
		} else {
			kids[s.Parent] = append(kids[s.Parent], i)
		}
	}
	var out []TreeLine
	// line is the prefix of the snapshot's own row; cont the prefix its
	// line of descent continues under: an only child stays on its parent's
	// line (drawn with cont, no connector, so it never reads as a sibling
	// of its parent), and branches (a rollback's later children) hang from
	// cont with ├─ / └─, their own lines continuing under "│ " or "  ".
	var walk func(i, depth int, line, cont string)
	walk = func(i, depth int, line, cont string) {
		s := tl.Snapshots[i]
		out = append(out, TreeLine{Prefix: line, Depth: depth, Snapshot: s})
		ch := kids[s.ID]
		if len(ch) == 1 {
			walk(ch[0], depth, cont, cont)
			return
		}
		for j, c := range ch {
			if j == len(ch)-1 {
				walk(c, depth+1, cont+"└─", cont+"  ")
			} else {
				walk(c, depth+1, cont+"├─", cont+"│ ")
			}
		}
	}
	for _, r := range roots {
		walk(r, 0, "", "")
	}
	return out
}

// quiesceGuest lets the World's runtime go of the upper before the host
// changes it (a cube World's overlay in its sandbox; a no-op for local).
func (e *Engine) quiesceGuest(ctx context.Context, w *World) error {
	return e.runtimeFor(w).Quiesce(ctx, w)
}

// resumeGuest has the runtime take the upper again.
func (e *Engine) resumeGuest(ctx context.Context, w *World) { e.runtimeFor(w).Resume(ctx, w) }

// crashHook, when a test sets it, is called at each killPoint: the crash
// harness SIGKILLs its child process there.
var crashHook func(point string)

// killPoint names a step of a snapshot, rollback, fork or restore at which
// a crash must leave the state root consistent; a no-op in production.
func killPoint(name string) {
	if h := crashHook; h != nil {
		h(name)
	}
}
