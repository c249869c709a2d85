// Package sandbox holds the parts of a session's sandbox that the session init
// executes: the mount plan of an effective boundary (data, in order) and the
// closing of inherited file descriptors before the command starts.
package sandbox
