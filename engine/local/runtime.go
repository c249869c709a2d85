package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/stratahq/strata/engine/runtime"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/overlay"
)

// Host is what the local runtime needs from the engine that owns it: the
// parts of a session's start, a World's freeze, its writers and its usage
// that still read the engine's state (its config, the World store, the
// egress proxies). The engine implements it; the runtime never imports the
// engine.
type Host interface {
	// CheckSource refuses a World whose source is gone.
	CheckSource(w *world.World) error
	// StartSession builds the session's spec from the engine's policy and
	// starts it (StartSession).
	StartSession(ctx context.Context, w *world.World, o runtime.ExecOptions) (session.Meta, error)
	// Freeze stops the World's running sessions (cgroup freezer, else
	// SIGSTOP) and returns what resumes them.
	Freeze(w *world.World) func()
	// Writers are the running sessions with one of changes open for writing.
	Writers(w *world.World, changes []overlay.Change) []runtime.WritingPath
	// Usage adds the World's CPU, memory and processes to res (cgroup, else
	// /proc over the session inits).
	Usage(w *world.World, inits map[int]bool, res *runtime.Resources)
	// ChooseMountBackend resolves auto to the overlay backend this host has.
	ChooseMountBackend(b overlay.Backend) (overlay.Backend, error)
}

// Runtime runs a World's sessions on this host: Linux namespaces over an
// overlay mounted here (session.go, session_init_linux.go), frozen by the
// cgroup freezer or SIGSTOP, accounted by cgroup or /proc. Its static
// methods (Kind, HostView, ...) work on a nil *Runtime.
type Runtime struct{ h Host }

// New is the local runtime of an engine: h is the engine.
func New(h Host) *Runtime { return &Runtime{h: h} }

var _ runtime.Runtime = (*Runtime)(nil)

func (*Runtime) Kind() world.Runtime { return RuntimeLocal }
func (*Runtime) HostView() bool      { return true }
func (*Runtime) LayerDirs() []string {
	// home/: the World's private layer over the user's home (sandbox level).
	return []string{"upper", "work", "merged", "sessions", "home", "home/upper", "home/work"}
}

// sendSignal: the recorded pid is the command's process group.
func (*Runtime) SendSignal(sig syscall.Signal) syscall.Signal { return sig }

func (*Runtime) Sized() bool { return false }

func (*Runtime) Details(*World) []Detail { return nil }

func (*Runtime) UpperIn(worldDir string) string { return filepath.Join(worldDir, "upper") }

func (r *Runtime) Prepare(_ context.Context, w *World, _ CreateOptions, mb overlay.Backend) error {
	var err error
	if w.MountBackend, err = r.h.ChooseMountBackend(mb); err != nil {
		return err
	}
	w.Dialect = w.MountBackend.Dialect()
	// This strata mounts every local upper with metacopy=off from the
	// start (a fork's upper is restored from a snapshot, which holds no
	// metacopy files), so its files carry no overlay marks; a cube guest
	// mounts its own overlay.
	w.MetacopyOff = true
	return nil
}

func (*Runtime) Realize(context.Context, *World, CreateOptions) error { return nil }

func (r *Runtime) Precheck(w *World) error { return r.h.CheckSource(w) }

func (r *Runtime) StartSession(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error) {
	return r.h.StartSession(ctx, w, o)
}

// shellArgv: a local World's sessions see this machine's file system, so
// its $SHELL (else /bin/sh).
func (*Runtime) ShellArgv(command string) []string {
	sh := os.Getenv("SHELL")
	if sh == "" {
		sh = "/bin/sh"
	}
	if command == "" {
		return []string{sh, "-i"}
	}
	return []string{sh, "-c", command}
}

func (r *Runtime) Freeze(_ context.Context, w *World) func() { return r.h.Freeze(w) }

func (r *Runtime) Writers(_ context.Context, w *World, changes []overlay.Change) []WritingPath {
	return r.h.Writers(w, changes)
}

func (*Runtime) Snapshot(context.Context, *World, string) (string, error) { return "", nil }
func (*Runtime) Rollback(context.Context, *World, string) error           { return nil }
func (*Runtime) Quiesce(context.Context, *World) error                    { return nil }
func (*Runtime) Resume(context.Context, *World)                           {}

func (r *Runtime) Usage(_ context.Context, w *World, _ []SessionMeta, inits map[int]bool, res *Resources) {
	r.h.Usage(w, inits, res)
}

// Up: a local World needs no bringing up.
func (*Runtime) Up(_ context.Context, w *World) error {
	return fmt.Errorf("it runs on the %s backend, which needs no bringing up", w.Backend)
}

// Stop: a local World has no sandbox to pause.
func (*Runtime) Stop(_ context.Context, w *World, _ bool) error {
	return fmt.Errorf("it runs on the %s backend; stop its sessions with strata kill", w.Backend)
}

func (*Runtime) Destroy(context.Context, *World) error { return nil }

// reviveSession: a local session's processes died with its init.
func (*Runtime) ReviveSession(_ context.Context, _ string, s SessionMeta) SessionMeta { return s }

// placement: a local World runs on this machine.
func (*Runtime) Placement(*World) Placement { return Placement{} }
