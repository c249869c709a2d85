package engine

import (
	"context"
	"strings"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/overlay"
)

// Rename detection, one for strata status, strata diff and the TUI's
// Changes pane: a deleted file whose content reappears under another name
// is a rename, as git shows it.

// renameThreshold is git's default: a deleted and an added file that share
// at least half their content are shown as one rename.
const renameThreshold = 50

// RenamePair pairs a deleted file with the added file that holds its
// content, by their indexes into the FileChanges FindRenames was given.
type RenamePair struct {
	From, To   int
	Similarity int // percent
}

// FindRenames pairs the World's deleted regular files with its added ones
// the way git's rename detection does by default: identical content first
// (100%), then the most similar pair at or above renameThreshold, each file
// in at most one pair. fcs are base→World diffs (Diff).
func FindRenames(fcs []FileChange) []RenamePair {
	var dels, adds []int
	for i, fc := range fcs {
		switch {
		case fc.Change.Kind == overlay.Deleted && fc.Old.Type == "file":
			dels = append(dels, i)
		case fc.Change.Kind == overlay.Added && fc.New.Type == "file":
			adds = append(adds, i)
		}
	}
	if len(dels) == 0 || len(adds) == 0 {
		return nil
	}
	used := map[int]bool{}
	var out []RenamePair
	pick := func(score func(d, a int) int) {
		for _, d := range dels {
			if used[d] {
				continue
			}
			best, bestScore := -1, 0
			for _, a := range adds {
				if used[a] || fcs[a].Tree != fcs[d].Tree { // a rename stays in its tree
					continue
				}
				if s := score(d, a); s > bestScore {
					best, bestScore = a, s
				}
			}
			if best >= 0 {
				used[d], used[best] = true, true
				out = append(out, RenamePair{From: d, To: best, Similarity: bestScore})
			}
		}
	}
	pick(func(d, a int) int { // exact
		if fcs[d].BaseHash != "" && fcs[d].BaseHash != HashAbsent && fcs[d].BaseHash == fcs[a].WorldHash {
			return 100
		}
		return 0
	})
	pick(func(d, a int) int {
		if s := similarity(fcs[d].OldText(), fcs[a].NewText()); s >= renameThreshold {
			return s
		}
		return 0
	})
	return out
}

// similarity is the share of lines two texts have in common, in percent
// (2*common / (lines of a + lines of b)); binary or empty texts are 0.
func similarity(a, b string) int {
	if a == "" || b == "" || diffview.IsBinary([]byte(a)) || diffview.IsBinary([]byte(b)) {
		return 0
	}
	lines := func(s string) []string { return strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n") }
	la, lb := lines(a), lines(b)
	count := map[string]int{}
	for _, l := range la {
		count[l]++
	}
	common := 0
	for _, l := range lb {
		if count[l] > 0 {
			count[l]--
			common++
		}
	}
	return 200 * common / (len(la) + len(lb))
}

// Rename is one rename among a World's changes, as Renames lists it under
// both its paths.
type Rename struct {
	From, To   string
	Similarity int // percent
}

// Renames finds the renames among a World's changes (FindRenames), diffing
// only its deleted and added files; the map holds each rename under its
// deleted and its added path.
func (e *Engine) Renames(ctx context.Context, world string, changes []overlay.Change) (map[string]Rename, error) {
	var dels, adds []overlay.Change
	for _, c := range changes {
		switch {
		case c.Type != overlay.TypeFile:
		case c.Kind == overlay.Deleted:
			dels = append(dels, c)
		case c.Kind == overlay.Added:
			adds = append(adds, c)
		}
	}
	if len(dels) == 0 || len(adds) == 0 {
		return nil, nil
	}
	fcs, err := e.Diff(ctx, world, DiffOptions{Changes: append(dels, adds...)})
	if err != nil {
		return nil, err
	}
	out := map[string]Rename{}
	for _, r := range FindRenames(fcs) {
		rn := Rename{From: fcs[r.From].Path, To: fcs[r.To].Path, Similarity: r.Similarity}
		out[rn.From], out[rn.To] = rn, rn
	}
	return out, nil
}
