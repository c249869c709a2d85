// Package store freezes and thaws upper layers: a content-addressed object
// store (Store, ObjectID; files cloned by reflink where the file system
// shares extents, holes kept sparse), snapshot manifests (Manifest, their
// encoding and diff), capture of an upper into a manifest (CaptureUpper) and
// restore of a manifest into an upper in any dialect (RestoreUpper,
// RestorePaths), and the build state carried across a rollback.
package store
