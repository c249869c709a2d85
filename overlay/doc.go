// Package overlay owns the layer vocabulary every other part of strata
// needs: the whiteout dialects, the change set read from an upper directory
// (ReadChanges, Change, ChangeSet, ignore rules), resolving a path through
// upper and lower without a mount (Layers), replaying a change set onto a
// copy (ApplyChangeSet), and the safe-path helpers that open, read and write
// beneath a root without following a symlink. It knows nothing of Worlds or
// of any user interface.
//
// dialect.go is the one place that spells the layer vocabulary (whiteout
// and opaque marker names, the unionfs-fuse meta tree, overlay xattrs, the
// char 0/0 whiteout device): everything else, here, in the subpackages and
// in the engine, asks it (ClassifyUpperEntry, DeletionMarkers, InMetaTree,
// RulesFor) instead of writing a marker name itself.
//
// The rest of the layer code lives in subpackages that import overlay and
// never each other, except publish, which uses store's sparse copy:
//
//	overlay/mount    mounting the backends (kernel, fuse-overlayfs, unionfs-fuse) and probing them
//	overlay/store    the object store, snapshot manifests, capture and restore of an upper, build state, reflinks
//	overlay/publish  publishing files to a source tree atomically, its journal, recovery and repair
//
// overlay/overlaytest builds trees of every dialect by hand for tests.
package overlay
