package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Resources samples one World once (CPUPercent stays 0: it needs two samples).
func (e *Engine) Resources(ctx context.Context, name string) (Resources, error) {
	w, err := e.World(name)
	if err != nil {
		return Resources{}, err
	}
	return e.sampleResources(ctx, w, true)
}

// SampleResources samples the Worlds twice, interval apart, and reports the
// second sample with the CPU use in between.
func (e *Engine) SampleResources(ctx context.Context, names []string, interval time.Duration) ([]Resources, error) {
	ws := make([]*World, len(names))
	first := make([]Resources, len(names))
	for i, n := range names {
		w, err := e.World(n)
		if err != nil {
			return nil, err
		}
		ws[i] = w
		if first[i], err = e.sampleResources(ctx, w, false); err != nil {
			return nil, err
		}
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	out := make([]Resources, len(names))
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, w := range ws {
		wg.Go(func() {
			out[i], errs[i] = e.sampleResources(ctx, w, true)
			out[i].SetCPUPercent(first[i])
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (e *Engine) sampleResources(ctx context.Context, w *World, withUpper bool) (Resources, error) {
	r := Resources{World: w.Name}
	ss, _ := ListSessions(e.Paths.World(w.Name))
	inits := map[int]bool{}
	for _, s := range ss {
		// An ended session's init may still be on its way out.
		inits[s.InitPID] = s.InitPID > 0
		if s.State == SessionRunning || s.State == SessionStarting {
			r.Running++
		}
	}
	r.SampledAt = time.Now()
	e.runtimeFor(w).Usage(ctx, w, ss, inits, &r)
	if withUpper {
		u, err := upperUsage(ctx, e.Paths.Upper(w.Name))
		if err != nil {
			return r, fmt.Errorf("resources of world %q: %w", w.Name, err)
		}
		r.UpperBytes, r.UpperDiskBytes, r.UpperFiles, r.UpperDirs = u.bytes, u.diskBytes, u.files, u.dirs
	}
	return r, nil
}

// localUsage is a local World's usage: its cgroup's, else its sessions'
// processes' as /proc has them.
func (e *Engine) localUsage(w *World, inits map[int]bool, r *Resources) {
	if dir := worldCgroupDir(w); dir != "" && fileExists(filepath.Join(dir, "cgroup.procs")) {
		r.Accounting = "cgroup"
		usec, _ := readKeyedInt(filepath.Join(dir, "cpu.stat"), "usage_usec")
		r.CPUSeconds = float64(usec) / 1e6
		pids := cgroupPIDs(dir)
		mem, memErr := readInt(filepath.Join(dir, "memory.current"))
		for _, pid := range pids {
			if !inits[pid] {
				r.Processes++
			}
			if memErr != nil {
				if st, err := readProcUsage(pid); err == nil {
					r.MemoryBytes += st.rss
				}
			}
		}
		if memErr == nil {
			r.MemoryBytes = mem
		}
	} else {
		r.Accounting = "proc"
		for _, pid := range e.sessionProcesses(w) {
			st, err := readProcUsage(pid)
			if err != nil {
				continue // exited meanwhile
			}
			if !inits[pid] {
				r.Processes++
			}
			r.CPUSeconds += st.cpuSeconds
			r.MemoryBytes += st.rss
		}
	}
}

// sessionProcesses lists every process of the World's running sessions' PID
// namespaces, their inits included (an init's children's CPU time is folded
// into it as it reaps them).
func (e *Engine) sessionProcesses(w *World) []int {
	ss, _ := ListSessions(e.Paths.World(w.Name))
	return sessionProcessesOf(ss)
}

// sessionProcessesOf is sessionProcesses for an already read session list.
func sessionProcessesOf(ss []SessionMeta) []int {
	nss := map[string]bool{}
	for _, s := range ss {
		if (s.State == SessionRunning || s.State == SessionStarting) && s.InitPID > 0 {
			if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", s.InitPID)); err == nil {
				nss[ns] = true
			}
		}
	}
	if len(nss) == 0 {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink("/proc/" + d.Name() + "/ns/pid"); err == nil && nss[ns] {
			pids = append(pids, pid)
		}
	}
	return pids
}

type procUsage struct {
	cpuSeconds float64 // utime+stime+cutime+cstime
	rss        int64
}

// userHZ is the unit of /proc/<pid>/stat times, fixed by the kernel ABI.
const userHZ = 100

func readProcUsage(pid int) (procUsage, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procUsage{}, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procUsage{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3; utime..cstime are fields 14-17, rss field 24.
	if len(f) < 22 {
		return procUsage{}, errors.New("malformed stat")
	}
	var ticks uint64
	for _, k := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[k], 10, 64)
		if v > 0 {
			ticks += uint64(v)
		}
	}
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	return procUsage{cpuSeconds: float64(ticks) / userHZ, rss: rss * int64(os.Getpagesize())}, nil
}

type upperStats struct {
	bytes, diskBytes int64
	files, dirs      int
}

// upperUsage measures the upper as du does: each inode once (hard links, and
// kernel overlay whiteouts that share one inode), directories included.
func upperUsage(ctx context.Context, upper string) (upperStats, error) {
	var u upperStats
	seen := map[[2]uint64]bool{}
	var walk func(dir string, root bool) error
	walk = func(p string, root bool) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) && !root {
				return nil // removed while walking
			}
			return fmt.Errorf("measure upper: %w", err)
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if st.Nlink > 1 && !isDir {
			key := [2]uint64{st.Dev, st.Ino}
			if seen[key] {
				u.files++
				return nil
			}
			seen[key] = true
		}
		u.bytes += st.Size
		u.diskBytes += st.Blocks * 512
		if !isDir {
			u.files++
			return nil
		}
		if !root {
			u.dirs++
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && !root {
				return nil
			}
			return fmt.Errorf("measure upper: %w", err)
		}
		for _, d := range ents {
			if err := walk(filepath.Join(p, d.Name()), false); err != nil {
				return err
			}
		}
		return nil
	}
	err := walk(upper, true)
	return u, err
}

// disableCgroups makes the engine account with /proc only (tests of the
// fallback).
var disableCgroups atomic.Bool

var (
	cgroupRootOnce sync.Once
	cgroupRootDir  string
)

// cgroupV2Root is the cgroup v2 hierarchy strata can create cgroups in:
// /sys/fs/cgroup on a unified system, /sys/fs/cgroup/unified on a hybrid one
// (CPU time and the freezer work there even without controllers); "" when
// there is none or it is not writable.
func cgroupV2Root() string {
	if disableCgroups.Load() {
		return ""
	}
	cgroupRootOnce.Do(func() {
		for _, d := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			var sfs unix.Statfs_t
			if unix.Statfs(d, &sfs) != nil || sfs.Type != unix.CGROUP2_SUPER_MAGIC {
				continue
			}
			if unix.Access(d, unix.W_OK) != nil {
				continue
			}
			cgroupRootDir = d
			return
		}
	})
	return cgroupRootDir
}

// worldCgroupDir is strata/<name>@<id> under the cgroup v2 root ("" without
// one): the id keeps two state roots' Worlds of one name, or a World and its
// removed namesake, apart.
func worldCgroupDir(w *World) string {
	root := cgroupV2Root()
	if root == "" {
		return ""
	}
	return filepath.Join(root, "strata", w.Name+"@"+w.ID)
}

// prepareSessionCgroup makes strata/<name>@<id>/<session> and returns it, or
// "" when cgroups cannot be used (then resources come from /proc).
func prepareSessionCgroup(w *World, session string) string {
	wdir := worldCgroupDir(w)
	if wdir == "" {
		return ""
	}
	for _, d := range []string{filepath.Dir(wdir), wdir} {
		if err := os.Mkdir(d, 0o755); err == nil {
			// Hand the controllers the parent has down (best effort: where the
			// memory or pids controller is not available, /proc fills in).
			for _, c := range []string{"+cpu", "+memory", "+pids"} {
				_ = os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(c), 0)
			}
			if d == wdir {
				sweepIdleWorldCgroups(filepath.Dir(wdir), wdir)
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return ""
		}
	}
	sweepSessionCgroups(wdir, 16)
	dir := filepath.Join(wdir, session)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return ""
	}
	return dir
}

// sweepSessionCgroups removes the empty cgroups of ended sessions once there
// are more than keep of them; a cgroup that still holds processes refuses
// rmdir (EBUSY) and stays.
func sweepSessionCgroups(wdir string, keep int) {
	ents, err := os.ReadDir(wdir)
	if err != nil {
		return
	}
	var subs []string
	for _, d := range ents {
		if d.IsDir() {
			subs = append(subs, d.Name())
		}
	}
	if len(subs) <= keep {
		return
	}
	for _, s := range subs {
		_ = unix.Rmdir(filepath.Join(wdir, s))
	}
}

// sweepIdleWorldCgroups reclaims the cgroups of Worlds with no live session
// (removed Worlds leave theirs behind; the cgroup tree knows no state root),
// whenever a World gets its first cgroup. A World whose cgroup is reclaimed
// gets a new one with its next session: its CPU time counts from there.
func sweepIdleWorldCgroups(strataDir, keep string) {
	ents, err := os.ReadDir(strataDir)
	if err != nil {
		return
	}
	for _, d := range ents {
		if p := filepath.Join(strataDir, d.Name()); d.IsDir() && p != keep {
			sweepSessionCgroups(p, -1)
			_ = unix.Rmdir(p)
		}
	}
}

// removeWorldCgroups removes a World's cgroups whose sessions are all gone.
func removeWorldCgroups(w *World) {
	wdir := worldCgroupDir(w)
	if wdir == "" {
		return
	}
	sweepSessionCgroups(wdir, -1)
	_ = unix.Rmdir(wdir)
}

// removeBrokenWorldCgroups removes the cgroups of every World named name
// (its id, part of the cgroup's name, is unknown when world.toml is broken).
func removeBrokenWorldCgroups(name string) {
	root := cgroupV2Root()
	if root == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "strata", name+"@*"))
	for _, wdir := range dirs {
		sweepSessionCgroups(wdir, -1)
		_ = unix.Rmdir(wdir)
	}
}

// cgroupPIDs lists the processes of a cgroup and its descendants.
func cgroupPIDs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// joinCgroup moves the calling process into the cgroup dir (the init does
// this when the caller could not start it there).
func joinCgroup(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0"), 0)
}

// freezeCgroup freezes the World's running sessions (commands and inits)
// through the cgroup v2 freezer, and returns the function that thaws them;
// ok is false when the World has no cgroups (use SIGSTOP then). Only session
// cgroups are frozen, never the World's, so a freezer that dies cannot leave
// new sessions born frozen: thawCgroups undoes its leftovers.
func (e *Engine) freezeCgroup(w *World) (thaw func(), ok bool) {
	wdir := worldCgroupDir(w)
	if wdir == "" {
		return nil, false
	}
	ss, _ := ListSessions(e.Paths.World(w.Name))
	var dirs []string
	for _, s := range ss {
		if s.State != SessionRunning && s.State != SessionStarting {
			continue
		}
		d := filepath.Join(wdir, s.ID)
		if !fileExists(filepath.Join(d, "cgroup.freeze")) {
			return nil, false // a session outside cgroups: the freezer would miss it
		}
		dirs = append(dirs, d)
	}
	thaw = func() { thawCgroups(w) }
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.freeze"), []byte("1"), 0); err != nil {
			thaw()
			return nil, false
		}
	}
	// Freezing is asynchronous: wait until every cgroup reports it is frozen.
	deadline := time.Now().Add(2 * time.Second)
	for _, d := range dirs {
		for {
			if v, err := readKeyedInt(filepath.Join(d, "cgroup.events"), "frozen"); err != nil || v == 1 {
				break // gone (the session ended), or frozen
			}
			if time.Now().After(deadline) {
				thaw()
				return nil, false
			}
			time.Sleep(time.Millisecond)
		}
	}
	return thaw, true
}

// thawCgroups thaws every session cgroup of the World: what freezeCgroup
// froze, and what a freezer that died before thawing left frozen.
func thawCgroups(w *World) {
	wdir := worldCgroupDir(w)
	if wdir == "" {
		return
	}
	ents, _ := os.ReadDir(wdir)
	for _, d := range ents {
		if d.IsDir() {
			_ = os.WriteFile(filepath.Join(wdir, d.Name(), "cgroup.freeze"), []byte("0"), 0)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func readInt(p string) (int64, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// readKeyedInt reads "key value" lines (cpu.stat, cgroup.events).
func readKeyedInt(p, key string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", p, key)
}
