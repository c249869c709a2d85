// Package overlay owns layer semantics: reading an upper directory into a
// change set in every whiteout dialect, resolving a path through upper and
// lower without a mount, mounting the backends, freezing an upper layer into
// a snapshot manifest backed by a content-addressed object store, and
// publishing files to a source tree atomically. It knows nothing of Worlds
// or of any user interface.
package overlay
