package cuberun

import (
	"github.com/stratahq/strata/engine/runtime"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/engine/world"
)

// The names the cube runtime's code has always used for the World, session
// and runtime types it shares with the engine.

type (
	World         = world.World
	CubeWorld     = world.CubeWorld
	Stream        = session.Stream
	Isolation     = world.Isolation
	SessionMeta   = session.Meta
	WinSize       = session.WinSize
	Attention     = session.Attention
	CreateOptions = runtime.CreateOptions
	ExecOptions   = runtime.ExecOptions
	Resources     = runtime.Resources
	WritingPath   = runtime.WritingPath
	Placement     = runtime.Placement
	Detail        = runtime.Detail
)

const (
	StateReady   = world.StateReady
	StatePlanned = world.StatePlanned
	StateStopped = world.StateStopped

	RuntimeLocal = world.RuntimeLocal
	RuntimeCube  = world.RuntimeCube

	SessionStarting = session.Starting
	SessionRunning  = session.Running
	SessionExited   = session.Exited
	SessionFailed   = session.Failed
	SessionKilled   = session.Killed
	SessionLost     = session.Lost

	AttentionWaiting = session.AttentionWaiting
	AttentionRunning = session.AttentionRunning
	AttentionFailed  = session.AttentionFailed
	AttentionLost    = session.AttentionLost
	AttentionDone    = session.AttentionDone

	AttachSocket = session.AttachSocket
	LayersDir    = world.LayersDir
	userHZ       = session.UserHZ

	CarriesMemory = runtime.CarriesMemory
	CarriesFiles  = runtime.CarriesFiles

	StreamStdout = session.StreamStdout
	StreamStderr = session.StreamStderr

	MetaFile       = session.MetaFile
	TranscriptFile = session.TranscriptFile
	LostExitCode   = session.LostExitCode
)

var (
	writeWorld         = world.Write
	newID              = world.NewID
	within             = world.Within
	ListSessions       = session.List
	RedactEnv          = session.RedactEnv
	NewSessionID       = session.NewID
	ReadSessionMeta    = session.ReadMeta
	ErrStartFailed     = session.ErrStartFailed
	ErrSessionsRunning = runtime.ErrSessionsRunning
)
