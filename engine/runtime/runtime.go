// Package runtime is the seam between the engine and the backends a World's
// sessions run on: the Runtime interface each backend implements (the local
// one in engine/local's files, the cube one in engine/cuberun) and the types
// its methods take. The engine picks one Runtime per World, by the World's
// backend, and never branches on the backend itself; a new backend is a new
// package implementing Runtime, not new branches.
package runtime

import (
	"context"
	"errors"
	"syscall"

	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/overlay"
)

// Runtime is what the engine needs from the execution backend a World runs
// on. The static methods (Kind through Details) need no engine and work on
// a zero value.
type Runtime interface {
	// Kind is the runtime's name in world.toml.
	Kind() world.Runtime
	// HostView reports whether the World's merged view is mounted on this
	// host and its sessions' processes run here (local), rather than in a
	// sandbox of their own (cube).
	HostView() bool
	// LayerDirs are the directories a new World's dir starts with, and
	// UpperIn is where its upper layer is inside worldDir.
	LayerDirs() []string
	UpperIn(worldDir string) string
	// SendSignal is what to send a session's recorded pid for sig.
	SendSignal(sig syscall.Signal) syscall.Signal
	// Sized reports whether a new World of this runtime takes cpu, memory
	// and disk sizes (a sandbox to size).
	Sized() bool
	// Details are the runtime's own rows of `strata show` (label, value).
	Details(w *world.World) []Detail

	// Prepare fills in a new World before anything of it exists: its
	// overlay backend (mb is the asked one, "" or auto to probe) and
	// whatever the runtime must decide up front.
	Prepare(ctx context.Context, w *world.World, o CreateOptions, mb overlay.Backend) error
	// Realize makes a new (or forked) World's runtime resources once its
	// directory is published.
	Realize(ctx context.Context, w *world.World, o CreateOptions) error
	// Precheck is what starting a session refuses first, before any
	// snapshot or mount: a local World's missing source.
	Precheck(w *world.World) error
	// StartSession starts a session running o.Argv in the World.
	StartSession(ctx context.Context, w *world.World, o ExecOptions) (session.Meta, error)
	// ShellArgv runs command ("" = an interactive shell) in a shell.
	ShellArgv(command string) []string
	// Up brings the World's runtime to ready (strata up) with the World
	// locked; Stop pauses it (strata stop), stopping running sessions first
	// when kill is set. A runtime with nothing to bring up or pause says so.
	Up(ctx context.Context, w *world.World) error
	Stop(ctx context.Context, w *world.World, kill bool) error

	// Freeze stops the World's writers and returns what resumes them.
	Freeze(ctx context.Context, w *world.World) (thaw func())
	// Writers lists which of the changes a running session's process holds
	// open for writing.
	Writers(ctx context.Context, w *world.World, changes []overlay.Change) []WritingPath
	// Snapshot takes the runtime's half of snapshot snapID (the upper is
	// the engine's half) and returns its id ("" = nothing kept).
	Snapshot(ctx context.Context, w *world.World, snapID string) (string, error)
	// Rollback restores the runtime's half of a snapshot (runtimeSnap, what
	// Snapshot returned for it; "" = none was kept) after its upper is in
	// place.
	Rollback(ctx context.Context, w *world.World, runtimeSnap string) error
	// Quiesce lets go of the upper before the host changes it under a
	// running World; Resume takes it again.
	Quiesce(ctx context.Context, w *world.World) error
	Resume(ctx context.Context, w *world.World)

	// Usage fills in r's CPU, memory and processes (ss: the World's
	// sessions; inits: their init pids, which are not the World's work).
	Usage(ctx context.Context, w *world.World, ss []session.Meta, inits map[int]bool, r *Resources)
	// Destroy frees what the runtime holds for the World before it is
	// removed.
	Destroy(ctx context.Context, w *world.World) error
	// ReviveSession looks again at a session of World name that reads as
	// lost (its runner or init is gone) and returns it as it now stands:
	// running again where the runtime could re-attach to its command.
	ReviveSession(ctx context.Context, name string, s session.Meta) session.Meta
	// Placement is where the World runs (the engine fills in World and
	// Node).
	Placement(w *world.World) Placement
}

// ErrSessionsRunning: the World has running sessions and the operation
// would end them.
var ErrSessionsRunning = errors.New("world has running sessions")
