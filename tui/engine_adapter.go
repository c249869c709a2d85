package tui

import (
	"context"
	"errors"

	"github.com/stratahq/strata/engine"
)

// This file is the one place the TUI calls engine functions that are still
// being written (engine.Apply). Until they land, the actions report "not
// available yet" instead of pretending.

// errNotAvailable is shown when an engine function has not landed yet.
var errNotAvailable = errors.New("not available yet: the engine has no apply")

// applyPick is one path to publish: whole (Hunks nil) or some hunks, and
// within partly picked hunks some lines. Hunks are 1-based, lines are
// indices into the hunk's lines, both in the diff with the default context.
type applyPick struct {
	Path  string
	Hunks []int
	Lines map[int][]int // 1-based hunk -> picked line indices
}

// applyOutcome is what the TUI shows of an apply.
type applyOutcome struct {
	Applied   []string // paths published
	Conflicts []applyConflict
}

type applyConflict struct {
	Path, Reason string
}

// engineApply publishes picks from a World to its source.
func engineApply(_ context.Context, _ *engine.Engine, _ string, _ []applyPick) (applyOutcome, error) {
	return applyOutcome{}, errNotAvailable
}
