package main

import (
	"fmt"
	"strings"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/overlay"
)

// renameThreshold is git's default: a deleted and an added file that share
// at least half their content are shown as one rename.
const renameThreshold = 50

// rename pairs a deleted file with the added file that holds its content.
type rename struct {
	from, to   int // indexes into the FileChanges
	similarity int // percent
}

// findRenames pairs the World's deleted regular files with its added ones
// the way git's rename detection does by default: identical content first
// (100%), then the most similar pair at or above renameThreshold, each file
// in at most one pair. fcs are base→World diffs (engine.Diff).
func findRenames(fcs []engine.FileChange) []rename {
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
	var out []rename
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
				out = append(out, rename{from: d, to: best, similarity: bestScore})
			}
		}
	}
	pick(func(d, a int) int { // exact
		if fcs[d].BaseHash != "" && fcs[d].BaseHash != engine.HashAbsent && fcs[d].BaseHash == fcs[a].WorldHash {
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

// renamePatch is a rename's entry in `strata diff`: one git rename entry
// with the content change between the two paths.
func renamePatch(fcs []engine.FileChange, r rename, context int) string {
	from, to := fcs[r.from], fcs[r.to]
	fd := diffview.Diff(from.OldText(), to.NewText(), diffview.Options{Context: context})
	p := diffview.UnifiedPatch(diffview.PatchFile{OldPath: engine.TreePath(from.Tree, from.Path), NewPath: engine.TreePath(to.Tree, to.Path), OldMode: from.Old.Mode, NewMode: to.New.Mode, Diff: fd})
	head, rest, _ := strings.Cut(p, "\n")
	return fmt.Sprintf("%s\nsimilarity index %d%%\n%s", head, r.similarity, rest)
}
