package local

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procAttrs are what a command inherits from the process that starts it
// and no request can hand a resident init: umask, nice, I/O priority,
// scheduling policy, CPU affinity, OOM score adjustment and resource
// limits. A session with an init of its own gets those of the `strata exec`
// that asked for it (`nice strata exec`, `umask 077; strata exec`,
// `ulimit -n 512; strata exec`, `taskset -c 1 strata exec`); a resident
// init has those of the exec that started it. It serves a request only when
// they are the same; otherwise the session gets an init of its own (see
// docs/design.md, "The resident init").
type procAttrs struct {
	Umask string `json:"umask"`
	// SigIgn names SIGHUP and SIGINT when ignored (`nohup strata exec`,
	// `strata exec ... &` in a script), which a command inherits through an
	// init of its own; a resident init, which handles both, cannot keep
	// them ignored for one command: a strata with either gives its session
	// an init of its own. (The other signals a Go init passes on as a
	// resident init does: those the runtime handles are reset, the
	// runtime's own 32 and 33 kept.)
	SigIgn string `json:"sig_ign,omitempty"`
	CPUs   string `json:"cpus"`
	OOMAdj string `json:"oom"`
	Nice   int    `json:"nice"`
	IOPrio int    `json:"ioprio"`
	Sched  int    `json:"sched"`
	// Rlimits are each resource's soft and hard limit. The soft open-files
	// limit a Go program raised for itself (to its hard limit less one) is
	// left out: its original is the runtime's alone, and both a strata and
	// a resident init restore theirs for what they start.
	Rlimits [][2]uint64 `json:"rlimits"`
}

// rlimitResources are the resources procAttrs compares (RLIMIT_CPU to
// RLIMIT_RTTIME).
const rlimitResources = 16

// currentProcAttrs reads this process's (its calling thread's, for the
// per-thread ones; strata changes none of them on any thread).
func currentProcAttrs() procAttrs {
	var a procAttrs
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(data)) {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch k {
			case "Umask":
				a.Umask = strings.TrimSpace(v)
			case "Cpus_allowed":
				a.CPUs = strings.TrimSpace(v)
			case "SigIgn":
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil {
					var names []string
					if m&(1<<(unix.SIGHUP-1)) != 0 {
						names = append(names, "HUP")
					}
					if m&(1<<(unix.SIGINT-1)) != 0 {
						names = append(names, "INT")
					}
					a.SigIgn = strings.Join(names, ",")
				}
			}
		}
	}
	if data, err := os.ReadFile("/proc/self/oom_score_adj"); err == nil {
		a.OOMAdj = strings.TrimSpace(string(data))
	}
	a.Nice, _ = unix.Getpriority(unix.PRIO_PROCESS, 0)
	if v, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, 1 /* IOPRIO_WHO_PROCESS */, 0, 0); errno == 0 {
		a.IOPrio = int(v)
	}
	if v, _, errno := unix.Syscall(unix.SYS_SCHED_GETSCHEDULER, 0, 0, 0); errno == 0 {
		a.Sched = int(v)
	}
	a.Rlimits = make([][2]uint64, rlimitResources)
	for res := range rlimitResources {
		var l unix.Rlimit
		if err := unix.Prlimit(0, res, nil, &l); err != nil {
			continue
		}
		if res == unix.RLIMIT_NOFILE && l.Max != unix.RLIM_INFINITY && l.Max > 0 && l.Cur == l.Max-1 {
			l.Cur = 0 // raised by Go's runtime: see Rlimits
		}
		a.Rlimits[res] = [2]uint64{l.Cur, l.Max}
	}
	return a
}

// same says a command started with b's attributes would have a's.
func (a procAttrs) same(b procAttrs) bool {
	return a.Umask == b.Umask && a.SigIgn == b.SigIgn && a.CPUs == b.CPUs && a.OOMAdj == b.OOMAdj && a.Nice == b.Nice &&
		a.IOPrio == b.IOPrio && a.Sched == b.Sched && slices.Equal(a.Rlimits, b.Rlimits)
}
