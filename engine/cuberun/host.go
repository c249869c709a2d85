package cuberun

import (
	"context"
	"log/slog"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/runtime"
	"github.com/stratahq/strata/engine/world"
)

// Host is what the cube runtime needs from the engine that owns it: the
// settings it reads, the World store and its locks, the sessions, events and
// snapshots the engine keeps. The engine implements it; the runtime never
// imports the engine.
type Host interface {
	// Settings are the parts of config.toml the runtime reads, as they are
	// now (a caller may change the engine's config between calls).
	Settings() Settings
	// World reads a World's record; LockWorld takes its lock and
	// LockedWorld reads it under the lock (unlock when done).
	World(name string) (*world.World, error)
	LockWorld(ctx context.Context, name string) (*world.Lock, error)
	LockedWorld(ctx context.Context, name string) (*world.World, func(), error)
	// SessionDir is a session's directory.
	SessionDir(worldName, id string) string
	// RunningSessions are the ids of the World's running sessions;
	// StopSessions ends them (and says how many it stopped).
	RunningSessions(w *world.World) []string
	StopSessions(ctx context.Context, w *world.World, ids []string) (int, error)
	// SnapshotBeforeExec takes the automatic snapshot before argv runs.
	SnapshotBeforeExec(ctx context.Context, worldName string, argv []string) error
	// RuntimeSnapshots are the runtime halves (Snapshot's ids) of the
	// World's snapshots.
	RuntimeSnapshots(worldName string) ([]string, error)
	// SessionStarted and SessionEnded record a session's start and end in
	// the event log.
	SessionStarted(ctx context.Context, worldName, id string, detail map[string]any)
	SessionEnded(ctx context.Context, worldName, id string, detail map[string]any)
	// SessionNetwork is the network mode a session of w at level iso gets.
	SessionNetwork(w *world.World, iso world.Isolation, o runtime.ExecOptions) (boundary.Network, error)
	// EgressAllowlist is the World's egress allowlist.
	EgressAllowlist(worldName string) (boundary.Allowlist, error)
}

// Settings are the parts of config.toml the cube runtime reads.
type Settings struct {
	Cube         CubeConfig
	Boundary     boundary.Config
	EnvRedact    []string
	Isolation    world.Isolation
	AutoSnapshot bool
	// Path is config.toml's path, for messages.
	Path string
}

// Runtime is the cube runtime: one CubeSandbox sandbox per World. Its
// static methods (Kind, HostView, ...) work on a nil *Runtime.
type Runtime struct {
	h       Host
	Log     *slog.Logger
	Paths   world.Paths
	exe     string
	clients cubeClients
}

// New is the cube runtime of an engine: h is the engine, client the cube
// client Options gave (nil: one is made from the config on first use), exe
// the strata binary that runs a session's runner (re-executed with
// CubeSessionArg).
func New(h Host, log *slog.Logger, paths world.Paths, exe string, client *cube.Client) *Runtime {
	return &Runtime{h: h, Log: log, Paths: paths, exe: exe, clients: cubeClients{given: client}}
}

var _ runtime.Runtime = (*Runtime)(nil)

func (e *Runtime) cfg() Settings { return e.h.Settings() }
