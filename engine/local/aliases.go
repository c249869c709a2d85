package local

import (
	"github.com/stratahq/strata/engine/baseidx"
	"github.com/stratahq/strata/engine/runtime"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/engine/world"
)

// The names the local runtime's code has always used for the World, session
// and runtime types it shares with the engine.

type (
	World         = world.World
	Paths         = world.Paths
	Isolation     = world.Isolation
	SessionMeta   = session.Meta
	Stream        = session.Stream
	WinSize       = session.WinSize
	Bind          = runtime.Bind
	ExecOptions   = runtime.ExecOptions
	CreateOptions = runtime.CreateOptions
	BaseIndex     = baseidx.Index
	Detail        = runtime.Detail
	WritingPath   = runtime.WritingPath
	Resources     = runtime.Resources
	Placement     = runtime.Placement
)

const (
	RuntimeLocal = world.RuntimeLocal

	IsolationTree    = world.IsolationTree
	IsolationSandbox = world.IsolationSandbox
	IsolationStrict  = world.IsolationStrict

	SessionStarting = session.Starting
	SessionRunning  = session.Running
	SessionExited   = session.Exited
	SessionFailed   = session.Failed
	SessionKilled   = session.Killed

	AttentionWaiting = session.AttentionWaiting
	AttentionRunning = session.AttentionRunning
	AttentionFailed  = session.AttentionFailed
	AttentionDone    = session.AttentionDone

	StreamStdout = session.StreamStdout
	StreamStderr = session.StreamStderr

	AttachSocket   = session.AttachSocket
	TranscriptFile = session.TranscriptFile
)

var (
	ParseIsolation       = world.ParseIsolation
	NewSessionID         = session.NewID
	RedactEnv            = session.RedactEnv
	ReadSessionMeta      = session.ReadMeta
	DefaultEnvRedact     = session.DefaultEnvRedact
	ErrSessionNotRunning = session.ErrNotRunning
	CaptureBase          = baseidx.Capture
)
