package engine

import (
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
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/cgroup"
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
	if dir := cgroup.WorldDir(w); dir != "" && fileExists(filepath.Join(dir, "cgroup.procs")) {
		r.Accounting = "cgroup"
		usec, _ := cgroup.ReadKeyedInt(filepath.Join(dir, "cpu.stat"), "usage_usec")
		r.CPUSeconds = float64(usec) / 1e6
		pids := cgroup.PIDs(dir)
		mem, memErr := cgroup.ReadInt(filepath.Join(dir, "memory.current"))
		// A resident init is strata's, not the World's load: its process
		// and its memory are left out (its sessions' are counted).
		residents, _ := filepath.Glob(filepath.Join(dir, cgroup.ResidentPrefix+"*", "init"))
		for _, r := range residents {
			for _, pid := range cgroup.PIDs(r) {
				inits[pid] = true
			}
			if m, err := cgroup.ReadInt(filepath.Join(r, "memory.current")); err == nil && memErr == nil {
				mem -= m
			}
		}
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

// freezeCgroup freezes the World's running sessions through the cgroup v2
// freezer (cgroup.Freeze); ok is false when it cannot (use SIGSTOP then).
func (e *Engine) freezeCgroup(w *World) (thaw func(), ok bool) {
	if cgroup.WorldDir(w) == "" {
		return nil, false
	}
	ss, _ := ListSessions(e.Paths.World(w.Name))
	var ids []string
	for _, s := range ss {
		if s.State == SessionRunning || s.State == SessionStarting {
			ids = append(ids, s.ID)
		}
	}
	return cgroup.Freeze(w, ids)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
