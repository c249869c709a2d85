package engine

import "github.com/stratahq/strata/engine/local"

// The local runtime's session start, init and watcher live in engine/local;
// these aliases keep engine's API (and its callers) as they were.

type (
	SessionSpec  = local.SessionSpec
	SessionWatch = local.SessionWatch
)

const (
	SessionInitArg    = local.SessionInitArg
	DefaultMaxWatches = local.DefaultMaxWatches

	defaultPath = local.DefaultPath
)

var (
	StartSession    = local.StartSession
	SessionInitMain = local.SessionInitMain
)
