package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratahq/strata/engine/boundary"
)

// Op is one kind of mount step.
type Op string

const (
	// OpPrivate makes every mount private (MS_REC|MS_PRIVATE on /), so
	// nothing below propagates to the host.
	OpPrivate Op = "private"
	// OpClone takes a detached copy of Source (open_tree OPEN_TREE_CLONE)
	// while the host tree is still visible; OpBind attaches it later.
	OpClone Op = "clone"
	// OpOverlay mounts an overlay of Source (lower) with Upper and Work at
	// Target.
	OpOverlay Op = "overlay"
	// OpHide covers the directory Target with an empty read-only tmpfs.
	OpHide Op = "hide"
	// OpMaskFile covers the file Target with an empty read-only file.
	OpMaskFile Op = "mask-file"
	// OpReadOnly makes Target read-only, recursively (mount_setattr).
	OpReadOnly Op = "read-only"
	// OpWritable clears read-only on the mount at Target only (not on the
	// mounts under it: a hidden path stays read-only).
	OpWritable Op = "writable"
	// OpTmpfs mounts a private writable tmpfs at Target.
	OpTmpfs Op = "tmpfs"
	// OpDev gives a private /dev: the harmless character devices, a devpts
	// of its own and a private /dev/shm.
	OpDev Op = "dev"
	// OpBind attaches the tree cloned from Source at Target, read-only when
	// ReadOnly.
	OpBind Op = "bind"
	// OpProc mounts a /proc of the session's pid namespace.
	OpProc Op = "proc"
	// OpProtect makes a host-wide /proc knob read-only (a read-only bind of
	// itself).
	OpProtect Op = "protect"
	// OpCgroup mounts cgroup2 at Target, read-only, once the init is in a
	// cgroup namespace rooted at the command's cgroup: the command sees only
	// its own subtree and can write none of it (freeze and kill stay strata's).
	OpCgroup Op = "cgroup"
)

// Step is one mount operation of a plan.
type Step struct {
	Op       Op     `json:"op"`
	Target   string `json:"target"`
	Source   string `json:"source,omitempty"`
	Upper    string `json:"upper,omitempty"`
	Work     string `json:"work,omitempty"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// Options are a tmpfs's mount options ("mode=1777").
	Options string `json:"options,omitempty"`
	// UserXattr: the overlay is mounted inside a user namespace (rootless).
	UserXattr bool `json:"user_xattr,omitempty"`
	// IfExists: skip the step when Source (or, without one, Target) does
	// not exist at execution time; IfDir: skip it unless Target is a real
	// directory (/var/run is often a link to /run).
	IfExists bool `json:"if_exists,omitempty"`
	IfDir    bool `json:"if_dir,omitempty"`
	// AsCloned: an OpBind that keeps the mount attributes the tree had
	// when it was cloned (the home overlay writable, a state hide in it
	// read-only) instead of setting them all.
	AsCloned bool   `json:"as_cloned,omitempty"`
	Why      string `json:"why"`
}

func (s Step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s %s", s.Op, s.Target)
	if s.Source != "" && s.Source != s.Target {
		fmt.Fprintf(&b, " <- %s", s.Source)
	}
	if s.Upper != "" {
		fmt.Fprintf(&b, " (upper %s)", s.Upper)
	}
	if s.ReadOnly {
		b.WriteString(" ro")
	}
	return b.String()
}

// Input is what a plan needs beyond the boundary.
type Input struct {
	// Merged is the World's merged view, attached at the boundary's source.
	Merged string
	// HostDev keeps the host's /dev (a PTY session on an old kernel).
	HostDev bool
	// Rootless: the session runs in a user namespace (the home overlay
	// keeps its xattrs under user.overlay.*).
	Rootless bool
}

// ProcKnobs are host-wide /proc files and dirs made read-only at every level.
var ProcKnobs = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"}

// resolvPaths are where /etc/resolv.conf points on systemd and resolvconf
// hosts: kept visible under a private /run when the World uses the host's
// network, so names still resolve.
var resolvPaths = []string{"/run/systemd/resolve", "/run/resolvconf"}

// Plan is the ordered list of mount steps that builds b's view in the
// session's own mount namespace. The order is the contract:
//
//  1. mounts made private; every tree bound later is cloned while the host
//     is still visible (a private /tmp would hide a source under /tmp);
//  2. the home overlay, while its lower (the home) and its upper (in the
//     state root) are still visible;
//  3. strata's state hidden (after the overlay, so a state root under the
//     home is hidden in the overlay too); a home in a dir made private below
//     (HOME=/tmp/x) is cloned then, overlay and hide, and attached again in
//     step 6, just before the World (a source under it stays the World's);
//  4. the host read-only, then the home overlay writable again;
//  5. private /tmp, /var/tmp, /run, /var/run and /dev: host daemons' unix
//     sockets are unreachable;
//  6. the World at the source, shared caches read-write, granted
//     credentials read-only: after the home overlay, so a source or cache
//     under the home is not covered by it;
//  7. credentials hidden, last of the file mounts, so nothing covers a mask;
//  8. /proc and its host-wide knobs read-only; cgroup2 read-only.
func Plan(b *boundary.Boundary, in Input) []Step {
	var p []Step
	add := func(s Step) { p = append(p, s) }
	add(Step{Op: OpPrivate, Target: "/", Why: "no mount below reaches the host"})
	add(Step{Op: OpClone, Source: in.Merged, Target: b.Source, Why: "the World's view, attached at the source later"})
	sandboxed := b.Level != boundary.LevelTree
	var caches, grants []string
	for _, w := range b.Writable {
		if w.Kind == boundary.KindSharedCache && sandboxed {
			caches = append(caches, w.Path)
			add(Step{Op: OpClone, Source: w.Path, Target: w.Path, IfExists: true, Why: "a shared cache, attached read-write later"})
		}
	}
	for _, g := range b.Granted {
		if g.Exists && sandboxed {
			grants = append(grants, g.Path)
			add(Step{Op: OpClone, Source: g.Path, Target: g.Path, Why: "a granted credential, attached read-only later"})
		}
	}
	if sandboxed && b.Network == boundary.NetworkHost {
		for _, r := range resolvPaths {
			add(Step{Op: OpClone, Source: r, Target: r, IfExists: true, Why: "name resolution on the host's network"})
		}
	}
	if b.HomeUpper != "" {
		add(Step{Op: OpOverlay, Source: b.Home, Target: b.Home, Upper: b.HomeUpper, Work: b.HomeWork, UserXattr: in.Rootless, Why: "the World's private layer over the home"})
	}
	for _, h := range b.Hidden {
		if h.Kind == boundary.KindState {
			add(Step{Op: OpHide, Target: h.Path, IfExists: true, Why: "strata's state"})
		}
	}
	homeCovered := b.HomeUpper != "" && sandboxed && underPrivate(b.Home, in.HostDev)
	if homeCovered {
		add(Step{Op: OpClone, Source: b.Home, Target: b.Home, Why: "the home layer, in a dir made private: attached again later"})
	}
	if sandboxed {
		add(Step{Op: OpReadOnly, Target: "/", Why: "the host is read-only"})
		if b.HomeUpper != "" {
			add(Step{Op: OpWritable, Target: b.Home, Why: "the home's writes go to the World's layer"})
		}
		for _, d := range privateTmpDirs {
			opts := "mode=1777"
			if strings.HasSuffix(d, "/run") {
				opts = "mode=0755"
			}
			add(Step{Op: OpTmpfs, Target: d, IfDir: true, Options: opts, Why: "private: host unix sockets (tmux, docker, dbus, ssh-agent, X11) unreachable"})
		}
		if b.Network == boundary.NetworkHost {
			for _, r := range resolvPaths {
				add(Step{Op: OpBind, Source: r, Target: r, ReadOnly: true, IfExists: true, Why: "name resolution on the host's network"})
			}
		}
	}
	if !in.HostDev {
		add(Step{Op: OpDev, Target: "/dev", Why: "no disks; a devpts and /dev/shm of its own"})
	} else if sandboxed {
		add(Step{Op: OpTmpfs, Target: "/dev/shm", Options: "mode=1777", Why: "private shared memory"})
	}
	if homeCovered {
		// Before the World: a source under the home is seen through it.
		add(Step{Op: OpBind, Source: b.Home, Target: b.Home, AsCloned: true, Why: "the World's private layer over the home, in a private dir"})
	}
	add(Step{Op: OpBind, Source: in.Merged, Target: b.Source, Why: "the World's view of the source"})
	for _, c := range caches {
		add(Step{Op: OpBind, Source: c, Target: c, IfExists: true, Why: "a shared cache, written in place by every World"})
	}
	for _, g := range grants {
		add(Step{Op: OpBind, Source: g, Target: g, ReadOnly: true, Why: "a credential granted to this World"})
	}
	for _, h := range b.Hidden {
		if h.Kind != boundary.KindCredential || !h.Exists {
			continue
		}
		if h.Dir {
			add(Step{Op: OpHide, Target: h.Path, Why: "a credential"})
		} else {
			add(Step{Op: OpMaskFile, Target: h.Path, Why: "a credential"})
		}
	}
	add(Step{Op: OpProc, Target: "/proc", Why: "the session's own processes only"})
	for _, k := range ProcKnobs {
		add(Step{Op: OpProtect, Target: k, IfExists: true, Why: "host-wide kernel knob"})
	}
	if sandboxed {
		add(Step{Op: OpCgroup, Target: "/sys/fs/cgroup", ReadOnly: true, Why: "its own cgroup subtree only, read-only"})
	}
	return p
}

// privateTmpDirs get a private tmpfs of their own at the sandbox levels.
var privateTmpDirs = []string{"/tmp", "/var/tmp", "/run", "/var/run"}

// underPrivate says p lies in a dir the sandbox plan covers with a private
// mount of its own (/tmp, /var/tmp, /run, /var/run, /dev or /dev/shm).
func underPrivate(p string, hostDev bool) bool {
	dev := "/dev"
	if hostDev {
		dev = "/dev/shm"
	}
	dirs := append(slices.Clone(privateTmpDirs), dev)
	p = filepath.Clean(p)
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Find returns the index of the first step of op at target, or -1.
func Find(plan []Step, op Op, target string) int {
	target = filepath.Clean(target)
	for i, s := range plan {
		if s.Op == op && filepath.Clean(s.Target) == target {
			return i
		}
	}
	return -1
}
