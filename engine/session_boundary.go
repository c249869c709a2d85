package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/cgroup"
)

// boundaryOf is the effective boundary of a session of the local World w
// (config [boundary], the World's level and pass_env, the session's request)
// for a command whose caller's environment is env. Nil at the tree level,
// which keeps today's view of the host.
func (e *Engine) boundaryOf(w *World, o ExecOptions, env []string) (*boundary.Boundary, error) {
	iso := o.Isolation
	if iso == "" {
		iso = w.Isolation
	}
	if iso == IsolationTree {
		return nil, nil
	}
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	r := boundary.Request{Level: string(iso), PassEnv: append(append([]string{}, w.PassEnv...), o.PassEnv...)}
	if o.NoNetwork {
		r.Network = string(boundary.NetworkNone)
	}
	hd := e.Paths.Home(w.Name)
	bw := boundary.World{
		Name: w.Name, Source: w.Source, StateRoot: e.Paths.Root, Home: home,
		HomeUpper: filepath.Join(hd, "upper"), HomeWork: filepath.Join(hd, "work"),
		Agent: w.Labels["agent"], HostHomes: hostHomes(),
	}
	for _, bd := range o.Binds {
		if t := filepath.Clean(bd.Target); !bd.ReadOnly && (filepath.Clean(home) == t || strings.HasPrefix(home, t+"/")) {
			// The home is one strata binds in (an agent's, kept with its
			// World): already the World's own and writable, wherever the
			// host has it or not; no layer goes over it.
			bw.HomeUpper, bw.HomeWork = "", ""
		}
	}
	b, err := boundary.Compute(e.Config.effectiveBoundary(), bw, env, r)
	if err != nil {
		var ke *boundary.KeyError
		if errors.As(err, &ke) {
			return nil, e.Config.Problem(ke.Key, ke.Err)
		}
		return nil, fmt.Errorf("boundary: %w", err)
	}
	return b, nil
}

// Boundary is the effective boundary of a new session of World name with
// options o (what `strata show` and the TUI describe); nil for a World whose
// sessions do not run on this host's file system, or at the tree level with
// no description wanted. At tree it describes tree.
func (e *Engine) Boundary(name string, o ExecOptions) (*boundary.Boundary, error) {
	w, err := e.World(name)
	if err != nil {
		return nil, err
	}
	if !e.runtimeFor(w).HostView() {
		return nil, nil
	}
	env, _ := o.EnvAndCwd(w)
	b, err := e.boundaryOf(w, o, env)
	if err != nil || b != nil {
		return b, err
	}
	// tree: described as such.
	return boundary.Compute(nil, boundary.World{Name: w.Name, Source: w.Source, StateRoot: e.Paths.Root}, env, boundary.Request{Level: string(boundary.LevelTree)})
}

// BoundaryCheck is one protection of the sandbox level as this machine and
// user can give it: whether it is available, and if not why and what is
// lost (`strata doctor`).
type BoundaryCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// BoundaryChecks says which of the sandbox level's protections this host
// and user get: rootless sessions keep what user namespaces allow.
func (e *Engine) BoundaryChecks() []BoundaryCheck {
	var out []BoundaryCheck
	add := func(name string, ok bool, yes, no string) {
		d := yes
		if !ok {
			d = no
		}
		out = append(out, BoundaryCheck{Name: name, OK: ok, Detail: d})
	}
	rootless := !isRoot()
	userns := true
	if data, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(data)) == "0" {
		userns = false
	}
	add("namespaces", !rootless || userns, "mount, pid, uts, ipc, network and cgroup namespaces per session",
		"user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0): rootless sessions cannot start")
	err := unix.CloseRange(^uint(0)-1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	add("inherited fds", err == nil, "close_range(CLOSE_RANGE_CLOEXEC): the command inherits only 0, 1 and 2",
		"close_range unavailable (kernel before 5.11): the init marks fds close-on-exec through /proc/self/fd (same result, slower)")
	root := cgroup.V2Root()
	delegated := false
	if root != "" {
		dir := filepath.Join(root, "strata")
		if err := os.Mkdir(dir, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			delegated = unix.Access(dir, unix.W_OK) == nil
		}
	}
	add("cgroups", delegated, "each session in its own cgroup under "+filepath.Join(root, "strata")+": exact freeze for snapshots; the command gets a cgroup namespace rooted there and a read-only cgroupfs",
		"no writable cgroup v2 hierarchy for this user (cgroup delegation missing): sessions get no cgroup of their own, so no cgroup namespace; the cgroupfs stays read-only, snapshots pause with SIGSTOP and resources come from /proc")
	add("home layer", !rootless || userns, "a private overlay over the home per World (worlds/NAME/home)",
		"no user namespace: no home layer")
	if rootless {
		out = append(out, BoundaryCheck{Name: "rootless", OK: true, Detail: "sessions run in a user namespace where you are root; the overlay keeps its xattrs in the user.* namespace; a hostile command stays your uid on the host"})
	}
	return out
}

// hostHomes are the homes the host's user keeps credentials in: strata's
// own HOME, the passwd entry's of its user, and that of the user who ran
// it through sudo. A session's HOME may name another (an agent's is
// /run/strata/home): these stay hidden all the same.
func hostHomes() []string {
	var hs []string
	add := func(h string) {
		if h != "" && filepath.IsAbs(h) && !slices.Contains(hs, filepath.Clean(h)) {
			hs = append(hs, filepath.Clean(h))
		}
	}
	add(os.Getenv("HOME"))
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil {
		add(u.HomeDir)
	}
	if name := os.Getenv("SUDO_USER"); name != "" {
		if u, err := user.Lookup(name); err == nil {
			add(u.HomeDir)
		}
	}
	return hs
}
