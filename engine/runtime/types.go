package runtime

import (
	"sort"
	"time"
)

// WritingPath is one picked path and the sessions writing it.
type WritingPath struct {
	Path     string   `json:"path"`
	Sessions []string `json:"sessions"`
}

// Resources is what a World costs the machine at one moment.
type Resources struct {
	World string `json:"world"`
	// Accounting says where the process figures come from: "cgroup" (the
	// World's cgroup v2, strata/<world>/<session>: CPU time since its first
	// session, the session inits included), "proc" (the live processes of
	// the running sessions' PID namespaces, found in /proc) or "cube" (the
	// live processes of a cube World's running sessions, read from /proc in
	// its sandbox by one envd exec).
	Accounting string `json:"accounting"`
	Running    int    `json:"running_sessions"`
	// Processes counts the sessions' processes, the session inits excluded.
	Processes  int     `json:"processes"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPercent is the CPU used between two samples, 100 = one core busy;
	// only SampleResources (or SetCPUPercent) fills it in.
	CPUPercent float64 `json:"cpu_percent"`
	// MemoryBytes: the cgroup's memory.current where the memory controller is
	// on, else the resident set of the sessions' processes (inits included).
	MemoryBytes int64 `json:"memory_bytes"`
	// UpperBytes is the upper layer's apparent size, what `du -sb` prints
	// (each inode once, directories included); UpperDiskBytes its allocated
	// blocks, what `du -s -B1` prints.
	UpperBytes     int64     `json:"upper_bytes"`
	UpperDiskBytes int64     `json:"upper_disk_bytes"`
	UpperFiles     int       `json:"upper_files"` // entries that are not directories
	UpperDirs      int       `json:"upper_dirs"`  // the root not counted
	SampledAt      time.Time `json:"sampled_at"`
}

// SetCPUPercent computes CPUPercent from an earlier sample of the same World.
func (r *Resources) SetCPUPercent(prev Resources) {
	dt := r.SampledAt.Sub(prev.SampledAt).Seconds()
	if dt <= 0 || prev.World != r.World || prev.Accounting != r.Accounting {
		return
	}
	r.CPUPercent = max(0, (r.CPUSeconds-prev.CPUSeconds)/dt*100)
}

// Placement says where a World runs and what state its runtime gave it:
// for a cube World, its sandbox, the node (when the deployment says), what
// the sandbox was made from and whether it carries the parent's memory and
// root file system (made from a Cube snapshot) or only its files (a fresh
// sandbox from a template, the upper restored by strata).
type Placement struct {
	World   string `json:"world"`
	Sandbox string `json:"sandbox,omitempty"`
	Node    string `json:"node,omitempty"`
	From    string `json:"from,omitempty"`
	Carries string `json:"carries,omitempty"`
	// Remote reports whether the World runs in a sandbox of its own.
	Remote bool `json:"remote"`
}

// Carries values.
const (
	CarriesMemory = "memory and rootfs (from a Cube snapshot) and files"
	CarriesFiles  = "files only (a new sandbox from a template; memory and rootfs not kept)"
)

// Detail is one runtime-specific row of a World's description.
type Detail struct{ Label, Value string }

// SortedWriters lists writers (path -> session ids) sorted by path, each
// path's sessions sorted.
func SortedWriters(writers map[string]map[string]bool) []WritingPath {
	out := make([]WritingPath, 0, len(writers))
	for rel, set := range writers {
		wp := WritingPath{Path: rel}
		for s := range set {
			wp.Sessions = append(wp.Sessions, s)
		}
		sort.Strings(wp.Sessions)
		out = append(out, wp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
