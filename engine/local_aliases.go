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
	ResidentInitArg   = local.ResidentInitArg
	ResidentDir       = local.ResidentDir
	DefaultMaxWatches = local.DefaultMaxWatches

	defaultPath = local.DefaultPath
)

var (
	StartSession    = local.StartSession
	SessionInitMain = local.SessionInitMain
	// ResidentInitMain is a World's resident init (engine/local/resident_linux.go).
	ResidentInitMain = local.ResidentInitMain
	// RetireResidents ends a World's resident inits once their sessions have.
	RetireResidents = local.RetireResidents
	// ResidentPIDs lists a World's live resident inits.
	ResidentPIDs = local.ResidentPIDs
)
