// Package overlay owns layer semantics: reading an upper directory into a
// change set in every whiteout dialect, resolving a path through upper and
// lower without a mount, mounting the backends, freezing an upper layer into
// a snapshot manifest backed by a content-addressed object store, and
// publishing files to a source tree atomically. It knows nothing of Worlds
// or of any user interface.
//
// dialect.go is the one place that spells the layer vocabulary (whiteout
// and opaque marker names, the unionfs-fuse meta tree, overlay xattrs, the
// char 0/0 whiteout device): everything else, here and in the engine, asks
// it (ClassifyUpperEntry, DeletionMarkers, InMetaTree and the unexported
// Rules) instead of writing a marker name itself.
package overlay
