package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/runtime"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/store"
)

// streamThreshold is the size from which a World's file is not read into
// memory for a whole-file apply: it is hashed while the World is paused and
// streamed (holes kept) from the upper into the publication, which checks the
// staged copy against that hash; the World stays paused until then.
const streamThreshold = 8 << 20

// captureAttempts bounds how often apply pauses the World to find the picked
// paths closed for writing (and re-captures when a streamed file changed
// between the capture and the publication).
const captureAttempts = 6

// ErrWorldWriting is matched by errors.Is for a *WritingError.
var ErrWorldWriting = errors.New("the World is still writing picked paths")

// WritingError refuses an apply because, every time the World was paused,
// some of its processes held picked files open for writing: publishing them
// would publish a half-written version. Nothing was written.
type WritingError struct {
	World string
	Paths []WritingPath
}

func (e *WritingError) Error() string {
	parts := make([]string, 0, len(e.Paths))
	for _, p := range e.Paths {
		names := make([]string, 0, len(p.Sessions))
		for _, s := range p.Sessions {
			if strings.HasPrefix(s, "pid ") {
				names = append(names, "a process ("+s+")")
			} else {
				names = append(names, "session "+s)
			}
		}
		who := strings.Join(names, ", ")
		verb := "is"
		if len(p.Sessions) > 1 {
			verb = "are"
		}
		parts = append(parts, fmt.Sprintf("%s %s still writing %s", who, verb, p.Path))
	}
	stop := "strata kill " + e.World + " ID"
	if len(e.Paths) == 1 && len(e.Paths[0].Sessions) == 1 {
		stop = "strata kill " + e.World + " " + e.Paths[0].Sessions[0]
		// A process no session owns (a cube command's background child,
		// "pid N of the sandbox") is stopped in the sandbox itself.
		if pid, ok := strings.CutPrefix(e.Paths[0].Sessions[0], "pid "); ok {
			pid, _, _ = strings.Cut(pid, " ")
			stop = "strata exec " + e.World + " -- kill " + pid
		}
	}
	return strings.Join(parts, "; ") + "; wait for it or stop it (" + stop + "), then apply again; nothing was written"
}

func (e *WritingError) Is(target error) bool { return target == ErrWorldWriting }

// captureOurs reads the World's version of every changed path at one instant
// when none of its processes can write (the freezer used for snapshots) and
// none holds one of them open for writing; it retries with a back-off while
// some do, then refuses with *WritingError. With stream, large files are
// hashed, not read: their content stays in the World, which then stays
// paused (and locked) until the caller, having copied them, calls release.
// Otherwise release does nothing: the World runs on already.
func (e *Engine) captureOurs(ctx context.Context, w *World, changes []overlay.Change, stream bool) (_ map[string]version, release func(), _ error) {
	backoff := 25 * time.Millisecond
	for attempt := 1; ; attempt++ {
		got, release, err := e.captureOursOnce(ctx, w, changes, stream)
		var we *WritingError
		if !errors.As(err, &we) || attempt == captureAttempts {
			return got, release, err
		}
		e.Log.Debug("apply: picked paths open for writing, retrying", "world", w.Name, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, func() {}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func (e *Engine) captureOursOnce(ctx context.Context, w *World, changes []overlay.Change, stream bool) (map[string]version, func(), error) {
	noop := func() {}
	lk, err := e.lockWorld(ctx, w.Name)
	if err != nil {
		return nil, noop, err
	}
	thaw := e.pauseWorld(ctx, w)
	release := func() {
		thaw()
		lk.Unlock()
	}
	held := false
	defer func() {
		if !held {
			release()
		}
	}()
	busy := e.runtimeFor(w).Writers(ctx, w, changes)
	if len(busy) > 0 {
		return nil, noop, &WritingError{World: w.Name, Paths: busy}
	}
	layers := w.Layers(e.Paths)
	out := make(map[string]version, len(changes))
	streamed := false
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return nil, noop, err
		}
		v, err := worldVersion(layers, c.Path, stream)
		if err != nil {
			return nil, noop, fmt.Errorf("read the World's %s: %w", c.Path, err)
		}
		streamed = streamed || v.streamed()
		out[c.Path] = v
	}
	if !streamed {
		return out, noop, nil
	}
	held = true
	return out, release, nil
}

// pauseWorld stops the World's writers and returns the function resuming
// them: the snapshot freezer (cgroup, else SIGSTOP) for a local World, the
// in-sandbox stop of its command groups for a cube World.
func (e *Engine) pauseWorld(ctx context.Context, w *World) func() {
	e.thawStale(w)
	return e.runtimeFor(w).Freeze(ctx, w)
}

// worldVersion reads rel of the World's view; a large file (with stream) is
// hashed and described by where its content lives.
func worldVersion(l overlay.Layers, rel string, stream bool) (version, error) {
	ent, err := l.Stat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return version{}, nil
	}
	if err != nil {
		return version{}, err
	}
	if !stream || ent.Type != overlay.TypeFile || ent.Size < streamThreshold {
		return worldSide(l, rel)
	}
	f, err := l.Open(rel)
	if err != nil {
		return version{}, err
	}
	defer f.Close()
	sum, size, err := store.HashFile(f)
	if err != nil {
		return version{}, err
	}
	return version{typ: ent.Type, mode: ent.Mode & fsx.PermBits, file: f.Name(), size: size, sum: sum}, nil
}

// hashedSide describes the large regular file rel under root by its hash
// and size, read without following a symlink and without holding it.
func hashedSide(v version, root, rel string) (version, error) {
	f, err := overlay.OpenBeneath(root, rel)
	if err != nil {
		return v, err
	}
	defer f.Close()
	if v.sum, v.size, err = store.HashFile(f); err != nil {
		return v, err
	}
	v.file = filepath.Join(root, filepath.FromSlash(rel))
	return v, nil
}

// baseVersion is baseOf as a version; a large base object is described by
// its id (its hash) and size, not read into memory.
func (e *Engine) baseVersion(ctx context.Context, w *World, rel string) (*BaseRecord, version, error) {
	if rec, err := e.basesOf(w).Get(rel); err == nil && rec != nil && !rec.Absent && rec.Type == overlay.TypeFile && rec.Object != "" {
		st, err := e.store()
		if err != nil {
			return nil, version{}, err
		}
		if info, err := os.Stat(st.Path(rec.Object)); err == nil && info.Size() >= streamThreshold {
			v := baseSide(rec, nil)
			v.file, v.size, v.sum = st.Path(rec.Object), info.Size(), string(rec.Object)
			return rec, v, nil
		}
	}
	rec, data, err := e.baseOf(ctx, w, rel)
	if err != nil {
		return nil, version{}, err
	}
	return rec, baseSide(rec, data), nil
}

type devIno struct{ dev, ino uint64 }

// writersOf lists the picked regular files that a process of the World's
// running sessions holds open for writing, or maps shared and writable, with
// the sessions doing so. Files are matched by inode, both as the World's
// mounted view and as its upper hold them. A cube World's processes are in
// its sandbox (cubeWritersOf). A session recorded as starting whose init
// has not written its pid yet may already run its command, whose processes
// cannot be found: it counts as writing every picked path (apply retries,
// then refuses) until its init reports or it is found lost, never as
// writing none.
func (e *Engine) writersOf(w *World, changes []overlay.Change) []WritingPath {
	ss, _ := ListSessions(e.Paths.World(w.Name))
	byNS := map[string]string{}
	// Sessions of a resident init share its pid namespace: their processes
	// are told apart by their cgroups (…/r-*/<session>).
	shared := map[string]map[string]bool{}
	var unknown []string
	for _, s := range ss {
		if s.State != SessionRunning && s.State != SessionStarting {
			continue
		}
		if s.InitPID <= 0 {
			unknown = append(unknown, s.ID)
			continue
		}
		if ns, err := os.Readlink("/proc/" + strconv.Itoa(s.InitPID) + "/ns/pid"); err == nil {
			if prev, ok := byNS[ns]; ok || shared[ns] != nil {
				if shared[ns] == nil {
					shared[ns] = map[string]bool{prev: true}
				}
				shared[ns][s.ID] = true
			}
			byNS[ns] = s.ID
		}
	}
	if len(unknown) > 0 {
		e.Log.Warn("apply: a session is starting and its init has not reported its pid yet; counting it as writing every picked path",
			"world", w.Name, "sessions", unknown)
		out := make([]WritingPath, 0, len(changes))
		for _, c := range changes {
			out = append(out, WritingPath{Path: c.Path, Sessions: unknown})
		}
		return out
	}
	if len(byNS) == 0 {
		return nil
	}
	roots := []string{e.Paths.UpperOf(w)}
	if e.Mounted(w) {
		roots = append(roots, e.Paths.MergedOf(w))
	}
	targets := map[devIno]string{}
	// A session's own overlay mount (rootless) has inodes of its own; its
	// fds then name the path it has in the session: under the source path.
	byPath := map[string]string{}
	for _, c := range changes {
		byPath[filepath.Join(w.Source, filepath.FromSlash(c.Path))] = c.Path
		for _, root := range roots {
			info, err := overlay.LstatBeneath(root, c.Path)
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				targets[devIno{st.Dev, st.Ino}] = c.Path
			}
		}
	}
	if len(targets) == 0 && len(byPath) == 0 {
		return nil
	}
	writers := map[string]map[string]bool{}
	note := func(rel, session string) {
		if writers[rel] == nil {
			writers[rel] = map[string]bool{}
		}
		writers[rel][session] = true
	}
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		proc := "/proc/" + d.Name()
		ns, err := os.Readlink(proc + "/ns/pid")
		if err != nil {
			continue
		}
		session, ok := byNS[ns]
		if !ok {
			continue
		}
		if ids := shared[ns]; ids != nil {
			if session = cgroupSession(proc, ids); session == "" {
				continue // the resident init itself, or a session not asked about
			}
		}
		fds, _ := os.ReadDir(proc + "/fd")
		for _, fd := range fds {
			var st unix.Stat_t
			if unix.Stat(proc+"/fd/"+fd.Name(), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			rel, ok := targets[devIno{st.Dev, st.Ino}]
			if !ok {
				link, _ := os.Readlink(proc + "/fd/" + fd.Name())
				if rel, ok = byPath[link]; !ok {
					continue
				}
			}
			if flags, err := fdFlags(proc + "/fdinfo/" + fd.Name()); err != nil || flags&unix.O_ACCMODE != unix.O_RDONLY {
				note(rel, session) // unreadable flags count as writing: never publish a guess
			}
		}
		for _, m := range sharedWritableMaps(proc + "/maps") {
			if rel, ok := targets[m]; ok {
				note(rel, session)
			}
		}
	}
	return runtime.SortedWriters(writers)
}

// cgroupSession is the session of ids whose cgroup the process at proc is
// in ("0::/strata/<world>@<id>/r-*/<session>"), or "".
func cgroupSession(proc string, ids map[string]bool) string {
	data, err := os.ReadFile(proc + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			if id := filepath.Base(p); ids[id] {
				return id
			}
		}
	}
	return ""
}

// fdFlags reads the open flags of an fd from its fdinfo ("flags:\t0100001").
func fdFlags(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return int(n), err
		}
	}
	return 0, fmt.Errorf("%s: no flags", path)
}

// sharedWritableMaps lists the files a process maps shared and writable:
// stores through such a mapping change the file with no write call.
func sharedWritableMaps(path string) []devIno {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []devIno
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || len(fields[1]) < 4 || fields[1][1] != 'w' || fields[1][3] != 's' {
			continue
		}
		maj, min, ok := strings.Cut(fields[3], ":")
		if !ok {
			continue
		}
		ma, err1 := strconv.ParseUint(maj, 16, 32)
		mi, err2 := strconv.ParseUint(min, 16, 32)
		ino, err3 := strconv.ParseUint(fields[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || ino == 0 {
			continue
		}
		out = append(out, devIno{unix.Mkdev(uint32(ma), uint32(mi)), ino})
	}
	return out
}
