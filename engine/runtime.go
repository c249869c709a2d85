package engine

import (
	"context"
	"syscall"

	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/overlay"
)

// worldRuntime is what the engine needs from the execution backend a World
// runs on. The engine picks one per World (runtimeFor) and calls it; only
// the runtime implementations (local_runtime.go, cube_*.go) know which
// backend they are. A new runtime is a line in world.runtimes and
// runtimeConstructors plus a new implementation of this interface.
type worldRuntime interface {
	// kind is the runtime's name in world.toml.
	kind() Runtime
	// hostView reports whether the World's merged view is mounted on this
	// host and its sessions' processes run here (local), rather than in a
	// sandbox of their own (cube). Static: it needs no Engine.
	hostView() bool
	// layerDirs are the directories a new World's dir starts with, and
	// upperIn is where its upper layer is inside worldDir. Static.
	layerDirs() []string
	upperIn(worldDir string) string
	// sendSignal is what to send a session's recorded pid for sig. Static.
	sendSignal(sig syscall.Signal) syscall.Signal
	// sized reports whether a new World of this runtime takes cpu, memory
	// and disk sizes (a sandbox to size). Static.
	sized() bool
	// details are the runtime's own rows of `strata show` (label, value).
	details(w *World) []Detail

	// prepare fills in a new World before anything of it exists: its
	// overlay backend (mb is the asked one, "" or auto to probe) and
	// whatever the runtime must decide up front.
	prepare(ctx context.Context, w *World, o CreateOptions, mb overlay.Backend) error
	// realize makes a new (or forked) World's runtime resources once its
	// directory is published.
	realize(ctx context.Context, w *World, o CreateOptions) error
	// precheck is what starting a session refuses first, before any
	// snapshot or mount: a local World's missing source.
	precheck(w *World) error
	// startSession starts a session running o.Argv in the World.
	startSession(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error)
	// shellArgv runs command ("" = an interactive shell) in a shell.
	shellArgv(command string) []string

	// freeze stops the World's writers and returns what resumes them.
	freeze(ctx context.Context, w *World) (thaw func())
	// writers lists which of the changes a running session's process holds
	// open for writing.
	writers(ctx context.Context, w *World, changes []overlay.Change) []WritingPath
	// snapshot takes the runtime's half of snapshot snapID (the upper is
	// the engine's half) and returns its id ("" = nothing kept).
	snapshot(ctx context.Context, w *World, snapID string) (string, error)
	// rollback restores the runtime's half of target after its upper is in
	// place.
	rollback(ctx context.Context, w *World, target *Snapshot) error
	// quiesce lets go of the upper before the host changes it under a
	// running World; resume takes it again.
	quiesce(ctx context.Context, w *World) error
	resume(ctx context.Context, w *World)

	// usage fills in r's CPU, memory and processes (ss: the World's
	// sessions; inits: their init pids, which are not the World's work).
	usage(ctx context.Context, w *World, ss []SessionMeta, inits map[int]bool, r *Resources)
	// destroy frees what the runtime holds for the World before it is
	// removed.
	destroy(ctx context.Context, w *World) error
	// reviveSession looks again at a session of World name that reads as
	// lost (its runner or init is gone) and returns it as it now stands:
	// running again where the runtime could re-attach to its command.
	reviveSession(ctx context.Context, name string, s SessionMeta) SessionMeta
	// placement is where the World runs (Placements fills in World and
	// Node).
	placement(w *World) Placement
}

// runtimeConstructors makes each runtime's implementation; e may be nil
// for the static methods.
var runtimeConstructors = map[Runtime]func(e *Engine) worldRuntime{
	RuntimeLocal: func(e *Engine) worldRuntime { return localRuntime{e} },
	RuntimeCube:  func(e *Engine) worldRuntime { return cubeRuntime{e} },
}

// runtimeOf is the implementation of kind; world.toml and CreateOptions
// are validated before, and an unknown kind falls back to the default.
func runtimeOf(e *Engine, kind Runtime) worldRuntime {
	if mk, ok := runtimeConstructors[kind]; ok {
		return mk(e)
	}
	return runtimeConstructors[world.DefaultRuntime](e)
}

// CheckExec returns what Exec would refuse the World before anything else
// (a local World whose source is gone), so a caller can say it before
// touching the terminal.
func (e *Engine) CheckExec(w *World) error { return e.runtimeFor(w).precheck(w) }

// Detail is one runtime-specific row of a World's description.
type Detail struct{ Label, Value string }

// runtimeFor is the runtime the World runs on.
func (e *Engine) runtimeFor(w *World) worldRuntime { return runtimeOf(e, w.Backend) }
