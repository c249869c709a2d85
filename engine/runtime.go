package engine

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/engine/cuberun"
	"github.com/stratahq/strata/engine/local"
	"github.com/stratahq/strata/engine/runtime"
	"github.com/stratahq/strata/engine/world"
)

// worldRuntime is the runtime interface (engine/runtime) a World's backend
// implements; the engine picks one per World (runtimeFor) and calls it.
type worldRuntime = runtime.Runtime

// The runtime seam's types live in engine/runtime, which the runtimes import;
// these aliases keep engine's API as it was.
type (
	CreateOptions  = runtime.CreateOptions
	ExecOptions    = runtime.ExecOptions
	Bind           = runtime.Bind
	BuildStateMode = runtime.BuildStateMode
	WritingPath    = runtime.WritingPath
	Resources      = runtime.Resources
	Placement      = runtime.Placement
	Detail         = runtime.Detail
)

const (
	BuildKeep     = runtime.BuildKeep
	BuildDiscard  = runtime.BuildDiscard
	CarriesMemory = runtime.CarriesMemory
	CarriesFiles  = runtime.CarriesFiles
)

// ErrSessionsRunning: the World has running sessions.
var ErrSessionsRunning = runtime.ErrSessionsRunning

// runtimeConstructors makes each runtime's implementation; e may be nil
// for the static methods.
var runtimeConstructors = map[Runtime]func(e *Engine) worldRuntime{
	RuntimeLocal: func(e *Engine) worldRuntime {
		if e == nil {
			return (*local.Runtime)(nil) // its static methods
		}
		return local.New(localHost{e})
	},
	RuntimeCube: func(e *Engine) worldRuntime {
		if e == nil {
			return (*cuberun.Runtime)(nil) // its static methods
		}
		return e.cube
	},
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
func (e *Engine) CheckExec(w *World) error { return e.runtimeFor(w).Precheck(w) }

// runtimeFor is the runtime the World runs on.
func (e *Engine) runtimeFor(w *World) worldRuntime { return runtimeOf(e, w.Backend) }

// Up brings a World to ready (strata up): for a cube World, a planned
// World gets its sandbox, a stopped one is resumed (or recreated from its
// template when its sandbox is gone: the layers are on the host, only
// memory is lost), and the overlay in the guest is checked and set up again
// where needed.
func (e *Engine) Up(ctx context.Context, name string) (*World, error) {
	w, unlock, err := e.lockedWorld(ctx, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := e.runtimeFor(w).Up(ctx, w); err != nil {
		return w, fmt.Errorf("up world %q: %w", name, err)
	}
	return w, nil
}

// StopOptions are the flags of `strata stop`.
type StopOptions struct {
	Kill bool // stop running sessions instead of refusing
}

// Stop pauses a World's runtime (strata stop): a cube World's sandbox
// (memory kept; strata up resumes it).
func (e *Engine) Stop(ctx context.Context, name string, o StopOptions) (*World, error) {
	w, unlock, err := e.lockedWorld(ctx, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := e.runtimeFor(w).Stop(ctx, w, o.Kill); err != nil {
		return nil, fmt.Errorf("stop world %q: %w", name, err)
	}
	return w, nil
}

// Placements says where each World runs (fork -n N reports it per clone).
// The node is known when the deployment lists exactly one node; CubeAPI
// does not say which node runs a sandbox.
func (e *Engine) Placements(ctx context.Context, ws []*World) []Placement {
	out := make([]Placement, 0, len(ws))
	node, looked := "", false
	for _, w := range ws {
		p := e.runtimeFor(w).Placement(w)
		p.World = w.Name
		if p.Sandbox != "" && !looked {
			looked = true
			if c, err := e.CubeCluster(ctx); err == nil && len(c.Nodes) == 1 {
				node = c.Nodes[0].NodeID
			}
		}
		if p.Sandbox != "" {
			p.Node = node
		}
		out = append(out, p)
	}
	return out
}
