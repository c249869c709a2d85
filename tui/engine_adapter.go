package tui

import (
	"context"
	"errors"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/panes"
)

// This file is the one place the TUI turns its picks into the engine's
// apply call and its result back into what the TUI shows.

// applyPick is one path to publish: whole (Sel nil) or the lines picked in
// its diff. Hunks (1-based, in the diff with the default context) are for
// the confirm dialog's summary.
type applyPick struct {
	Path  string
	Hunks []int
	Sel   *diffview.Selection
	// Resolved is a conflict's resolution: exactly what to publish, if the
	// source still holds the version hashed TheirsHash.
	Resolved   []byte
	TheirsHash string
	// BaseHash and WorldHash are the versions the pick was made on (the
	// engine refuses it if either moved); "" = not known.
	BaseHash, WorldHash string
	// HunkCount is how many hunks the file's diff has (the dialog's "2 of 5").
	HunkCount int
}

// applyOutcome is what the TUI shows of an apply.
type applyOutcome struct {
	Applied   []string // paths published
	Conflicts []applyConflict
}

type applyConflict = panes.ConflictFile

// engineApply publishes picks from a World to its source, all or nothing.
func engineApply(ctx context.Context, eng *engine.Engine, world string, picks []applyPick) (applyOutcome, error) {
	ep := make([]engine.Pick, 0, len(picks))
	for _, p := range picks {
		ep = append(ep, engine.Pick{
			Path: p.Path, Selection: p.Sel, Resolved: p.Resolved, TheirsHash: p.TheirsHash,
			BaseHash: p.BaseHash, WorldHash: p.WorldHash,
		})
	}
	res, err := eng.Apply(ctx, world, engine.ApplyOptions{Picks: ep})
	var ce *engine.ConflictError
	if errors.As(err, &ce) {
		var out applyOutcome
		for _, c := range ce.Conflicts {
			out.Conflicts = append(out.Conflicts, applyConflict{
				Path: c.Path, Reason: c.Reason, Regions: c.Regions,
				Base: c.Base, Ours: c.Ours, Theirs: c.Theirs, Merged: c.Merged, TheirsHash: c.TheirsHash,
			})
		}
		return out, err
	}
	if err != nil {
		return applyOutcome{}, err
	}
	var out applyOutcome
	for _, p := range res.Paths {
		if p.Action != "nothing" {
			out.Applied = append(out.Applied, p.Path)
		}
	}
	return out, nil
}
