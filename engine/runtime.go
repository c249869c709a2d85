package engine

import (
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
func (e *Engine) CheckExec(w *World) error { return e.runtimeFor(w).Precheck(w) }

// runtimeFor is the runtime the World runs on.
func (e *Engine) runtimeFor(w *World) worldRuntime { return runtimeOf(e, w.Backend) }
