package main

import (
	"fmt"
	"strings"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/engine"
)

// renamePatch is a rename's entry in `strata diff`: one git rename entry
// with the content change between the two paths.
func renamePatch(fcs []engine.FileChange, r engine.RenamePair, context int) string {
	from, to := fcs[r.From], fcs[r.To]
	fd := diffview.Diff(from.OldText(), to.NewText(), diffview.Options{Context: context})
	p := diffview.UnifiedPatch(diffview.PatchFile{OldPath: engine.TreePath(from.Tree, from.Path), NewPath: engine.TreePath(to.Tree, to.Path), OldMode: from.Old.Mode, NewMode: to.New.Mode, Diff: fd})
	head, rest, _ := strings.Cut(p, "\n")
	return fmt.Sprintf("%s\nsimilarity index %d%%\n%s", head, r.Similarity, rest)
}
