// Package fsx holds the small file-system helpers that engine, overlay, the
// panes, diffview and the CLI share: mode-bit conversion between Go's
// fs.FileMode and the unix octal layout, the canonical form of a directory,
// the safe-name rule for World and session names, the one way strata
// prints a byte count, and fsyncing a path without following a final link. It imports no other strata package and no UI code.
package fsx
