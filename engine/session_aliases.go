package engine

import "github.com/stratahq/strata/engine/session"

// A session's record, transcript, terminal server and attach protocol live
// in the leaf package engine/session, which both runtimes import; these
// aliases keep engine's API (and its callers) as they were.

type (
	SessionMeta   = session.Meta
	SessionState  = session.State
	Attention     = session.Attention
	Stream        = session.Stream
	Record        = session.Record
	WinSize       = session.WinSize
	AttachOptions = session.AttachOptions
)

const (
	SessionStarting = session.Starting
	SessionRunning  = session.Running
	SessionExited   = session.Exited
	SessionFailed   = session.Failed
	SessionKilled   = session.Killed
	SessionLost     = session.Lost
	SessionBroken   = session.Broken
	LostExitCode    = session.LostExitCode

	AttentionWaiting = session.AttentionWaiting
	AttentionFailed  = session.AttentionFailed
	AttentionRunning = session.AttentionRunning
	AttentionLost    = session.AttentionLost
	AttentionDone    = session.AttentionDone
	AttentionIdle    = session.AttentionIdle

	StreamStdout = session.StreamStdout
	StreamStderr = session.StreamStderr
	StreamPTY    = session.StreamPTY
	StreamResize = session.StreamResize

	MetaFile       = session.MetaFile
	AttachSocket   = session.AttachSocket
	TranscriptFile = session.TranscriptFile
)

var (
	ErrStartFailed       = session.ErrStartFailed
	ErrSessionNotRunning = session.ErrNotRunning
	ErrNoSession         = session.ErrNotFound
	ErrCorruptTranscript = session.ErrCorruptTranscript
	ErrDetached          = session.ErrDetached

	DefaultEnvRedact  = session.DefaultEnvRedact
	DefaultDetachKeys = session.DefaultDetachKeys

	NewSessionID     = session.NewID
	RedactEnv        = session.RedactEnv
	ReadSessionMeta  = session.ReadMeta
	ListSessions     = session.List
	WaitSession      = session.Wait
	SessionAttention = session.AttentionOf
	WorldAttention   = session.WorldAttention
	ReadTranscript   = session.ReadTranscript
	FollowTranscript = session.FollowTranscript
	Attach           = session.Attach
	AttachTerminal   = session.AttachTerminal
)

// ErrNotTTY: the session has no terminal to attach to.
var ErrNotTTY = session.ErrNotTTY
