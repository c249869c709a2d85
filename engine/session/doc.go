// Package session is the session plumbing both runtimes and the engine
// share: a session's record (meta.json: Meta, its State and Attention, read
// with ReadMeta and List, waited for with Wait), its append-only transcript
// (TranscriptWriter, ReadTranscript, FollowTranscript), the terminal server
// that feeds attached clients (PTYServer) and the attach protocol's client
// (Attach, AttachTerminal).
//
// It knows nothing of how a session's command is started: the local runtime
// (namespaces on this host) and the cube runtime (a sandbox's exec stream)
// each write a Meta and a transcript through this package, and everything
// that reads sessions reads them through it.
package session
