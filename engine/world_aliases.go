package engine

import "github.com/stratahq/strata/engine/world"

// The World record, its paths, locks, names and kinds live in the leaf
// package engine/world, which the runtimes import too; these aliases keep
// engine's API (and its callers) as they were.

type (
	World            = world.World
	CubeWorld        = world.CubeWorld
	WorldState       = world.State
	BrokenWorldError = world.BrokenWorldError
	Paths            = world.Paths
	Isolation        = world.Isolation
	Runtime          = world.Runtime
	fileLock         = world.Lock
)

const (
	StateReady   = world.StateReady
	StatePlanned = world.StatePlanned
	StateStopped = world.StateStopped
	StateBroken  = world.StateBroken

	IsolationTree    = world.IsolationTree
	IsolationStrict  = world.IsolationStrict
	IsolationSandbox = world.IsolationSandbox

	RuntimeLocal   = world.RuntimeLocal
	RuntimeCube    = world.RuntimeCube
	DefaultRuntime = world.DefaultRuntime

	LayersDir = world.LayersDir
)

var (
	ErrWorldNotFound = world.ErrWorldNotFound
	ErrWorldExists   = world.ErrWorldExists
	ErrWorldBroken   = world.ErrWorldBroken
	ErrInvalidName   = world.ErrInvalidName

	ValidateName      = world.ValidateName
	DefaultStateRoot  = world.DefaultStateRoot
	DefaultConfigPath = world.DefaultConfigPath
	DefaultLogPath    = world.DefaultLogPath

	ParseIsolation = world.ParseIsolation
	Isolations     = world.Isolations
	IsolationNames = world.IsolationNames
	ParseRuntime   = world.ParseRuntime
	Runtimes       = world.Runtimes
	RuntimeNames   = world.RuntimeNames
)

// Unexported names the engine has always used for them.
var (
	readWorld       = world.Read
	readWorldFile   = world.ReadFile
	writeWorldFile  = world.WriteFile
	newID           = world.NewID
	within          = world.Within
	renameNoReplace = world.RenameNoReplace
	isRoot          = world.IsRoot
)
