package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/engine"
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
}

// applyOutcome is what the TUI shows of an apply.
type applyOutcome struct {
	Applied   []string // paths published
	Conflicts []applyConflict
}

type applyConflict struct {
	Path, Reason string
	// Regions summarise each conflicting region: base lines, ours, theirs.
	Regions []string
}

// engineApply publishes picks from a World to its source, all or nothing.
func engineApply(ctx context.Context, eng *engine.Engine, world string, picks []applyPick) (applyOutcome, error) {
	ep := make([]engine.Pick, 0, len(picks))
	for _, p := range picks {
		ep = append(ep, engine.Pick{Path: p.Path, Selection: p.Sel})
	}
	res, err := eng.Apply(ctx, world, engine.ApplyOptions{Picks: ep})
	var ce *engine.ConflictError
	if errors.As(err, &ce) {
		var out applyOutcome
		for _, c := range ce.Conflicts {
			ac := applyConflict{Path: c.Path, Reason: c.Reason}
			for _, r := range c.Regions {
				ac.Regions = append(ac.Regions, fmt.Sprintf("base lines %d-%d: ours %s / theirs %s",
					r.BaseStart+1, r.BaseEnd, firstLine(r.Ours), firstLine(r.Theirs)))
			}
			out.Conflicts = append(out.Conflicts, ac)
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

func firstLine(lines []string) string {
	if len(lines) == 0 {
		return "(nothing)"
	}
	l := strings.TrimRight(lines[0], "\n")
	if len(lines) > 1 {
		return fmt.Sprintf("%q +%d lines", l, len(lines)-1)
	}
	return fmt.Sprintf("%q", l)
}
