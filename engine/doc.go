// Package engine owns Worlds: creating, listing, mounting and removing them,
// running isolated sessions in them, snapshots, apply, the state directory,
// its locks and the events other strata processes and the TUI follow. It
// never imports a UI package; every durable fact lives on disk under the
// state root so that many strata processes can share it.
package engine
