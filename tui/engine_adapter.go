package tui

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

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
	// Warnings are the engine's notes on a publication that succeeded
	// (stripped setuid bits, another World's base not recorded...).
	Warnings []string
}

type applyConflict = panes.ConflictFile

// engineApply publishes picks from a World to its source, all or nothing.
func engineApply(ctx context.Context, eng *engine.Engine, world string, picks []applyPick) (applyOutcome, error) {
	out, _, err := engineApplyWith(ctx, eng, world, picks, false)
	return out, err
}

// enginePreview decides the picks as apply would and writes nothing: the
// confirm dialog says what will happen from its result.
func enginePreview(ctx context.Context, eng *engine.Engine, world string, picks []applyPick) (applyOutcome, []engine.AppliedPath, error) {
	return engineApplyWith(ctx, eng, world, picks, true)
}

func engineApplyWith(ctx context.Context, eng *engine.Engine, world string, picks []applyPick, dry bool) (applyOutcome, []engine.AppliedPath, error) {
	ep := make([]engine.Pick, 0, len(picks))
	for _, p := range picks {
		ep = append(ep, engine.Pick{
			Path: p.Path, Selection: p.Sel, Resolved: p.Resolved, TheirsHash: p.TheirsHash,
			BaseHash: p.BaseHash, WorldHash: p.WorldHash,
		})
	}
	res, err := eng.Apply(ctx, world, engine.ApplyOptions{Picks: ep, DryRun: dry})
	var ce *engine.ConflictError
	if errors.As(err, &ce) {
		var out applyOutcome
		for _, c := range ce.Conflicts {
			out.Conflicts = append(out.Conflicts, applyConflict{
				// NAME:path in another tree, as it was picked.
				Path: engine.TreePath(c.Tree, c.Path), Reason: c.Reason, Regions: c.Regions,
				Base: c.Base, Ours: c.Ours, Theirs: c.Theirs, Merged: c.Merged, TheirsHash: c.TheirsHash,
			})
		}
		return out, nil, err
	}
	if err != nil {
		return applyOutcome{}, nil, err
	}
	out := applyOutcome{Warnings: res.Warnings}
	for i, p := range res.Paths {
		// A path of another tree is NAME:path, as the Changes pane and the
		// picks name it.
		p.Path = engine.TreePath(p.Tree, p.Path)
		res.Paths[i] = p
		if p.Action != "nothing" {
			out.Applied = append(out.Applied, p.Path)
		}
	}
	return out, res.Paths, nil
}

// applyVerbs names what apply does to a path, as the dialog says it.
var applyVerbs = map[string]string{
	"write": "write", "merge": "merge", "symlink": "link", "mkdir": "create", "delete": "delete", "rmdir": "delete", "nothing": "skip",
}

// applySummary says what a publication will do: a title line with the
// totals, one line per path or per directory whose every change is picked
// whole (changed lists the World's changed paths), and notes on merges:
// "write src/a.go (2 of 5 hunks)", "delete internal/ — 1,061 files".
func applySummary(world string, picks []applyPick, paths []engine.AppliedPath, changed []string) (title string, lines, notes []string) {
	files, dirs, merged, skipped := 0, 0, 0, 0
	for _, ap := range paths {
		switch ap.Action {
		case "nothing":
			skipped++
		case "mkdir", "rmdir":
			dirs++
		default:
			files++
			if ap.Action == "merge" {
				merged++
			}
		}
	}
	lines = summaryLines(picks, paths, changed)
	var what []string
	if files > 0 || dirs == 0 {
		what = append(what, panes.Count(files, "file", "files"))
	}
	if dirs > 0 {
		what = append(what, panes.Count(dirs, "directory", "directories"))
	}
	title = fmt.Sprintf("Publish %s from %s to %s:", strings.Join(what, " and "), world, applyTargets(paths))
	if merged > 0 {
		notes = append(notes, "The source changed since the World's base: "+panes.Count(merged, "file is", "files are")+" 3-way merged.")
	}
	if skipped > 0 {
		notes = append(notes, panes.Count(skipped, "path is", "paths are")+" already as picked in the source.")
	}
	return title, lines, notes
}

// summaryLines groups the paths of a publication: a path picked by hunks
// is its own line; paths picked whole go under their topmost directory
// whose every change is picked whole (the person picked the directory),
// else under their parent directory when it has several of them, saying
// how many paths there stay in the World.
func summaryLines(picks []applyPick, paths []engine.AppliedPath, changed []string) []string {
	partial := map[string]applyPick{}
	for _, p := range picks {
		if p.Sel != nil {
			partial[p.Path] = p
		}
	}
	whole := map[string]bool{}
	for _, ap := range paths {
		if _, ok := partial[ap.Path]; !ok {
			whole[ap.Path] = true
		}
	}
	// below and pickedBelow count the changes strictly under a directory.
	isChanged := map[string]bool{}
	below, pickedBelow := map[string]int{}, map[string]int{}
	for _, c := range append(append([]string(nil), changed...), keys(whole)...) {
		if isChanged[c] {
			continue
		}
		isChanged[c] = true
		for i := range c {
			if c[i] == '/' {
				below[c[:i]]++
				if whole[c] {
					pickedBelow[c[:i]]++
				}
			}
		}
	}
	full := func(d string) bool {
		return below[d] >= 2 && pickedBelow[d] == below[d] && (!isChanged[d] || whole[d])
	}
	group := func(path string) string {
		for i := range path {
			if path[i] == '/' && full(path[:i]) {
				return path[:i]
			}
		}
		if full(path) {
			return path
		}
		if i := strings.LastIndexByte(path, '/'); i > 0 && pickedBelow[path[:i]] >= 2 {
			return path[:i]
		}
		return path
	}
	var order []string
	byKey := map[string][]engine.AppliedPath{}
	for _, ap := range paths {
		k := ap.Path
		if whole[ap.Path] {
			k = group(ap.Path)
		}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], ap)
	}
	sort.Strings(order)
	var lines []string
	for _, k := range order {
		aps := byKey[k]
		if len(aps) == 1 && aps[0].Path == k {
			p, ok := partial[k]
			if !ok {
				p = applyPick{Path: k}
			}
			lines = append(lines, "  "+pathLine(p, aps[0]))
			continue
		}
		line := "  " + dirLine(k, aps)
		if left := below[k] - pickedBelow[k]; left > 0 {
			line += fmt.Sprintf(" (%s not picked stay%s in the World)", panes.Count(left, "path", "paths"), map[bool]string{true: "s"}[left == 1])
		}
		lines = append(lines, line)
	}
	return lines
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func pathLine(p applyPick, ap engine.AppliedPath) string {
	verb := applyVerbs[ap.Action]
	if verb == "" {
		verb = ap.Action
	}
	s := verb + " " + p.Path
	if ap.Action == "nothing" {
		return s + " (the source already has it)"
	}
	if p.Sel != nil && p.HunkCount > 0 {
		s += fmt.Sprintf(" (%d of %s)", len(p.Hunks), panes.Count(p.HunkCount, "hunk", "hunks"))
	}
	return s
}

// dirLine sums up a picked directory: one verb when every path under it
// gets the same, else the count of each.
func dirLine(dir string, under []engine.AppliedPath) string {
	n := 0
	byVerb := map[string]int{}
	var order []string
	for _, ap := range under {
		if ap.Action == "mkdir" || ap.Action == "rmdir" {
			continue
		}
		n++
		v := applyVerbs[ap.Action]
		if byVerb[v] == 0 {
			order = append(order, v)
		}
		byVerb[v]++
	}
	switch {
	case n == 0:
		return fmt.Sprintf("%s %s/", applyVerbs[firstAction(under)], dir)
	case len(order) == 1:
		return fmt.Sprintf("%s %s/ — %s", order[0], dir, panes.Count(n, "file", "files"))
	}
	parts := make([]string, len(order))
	for i, v := range order {
		parts[i] = fmt.Sprintf("%s %s", v, panes.Thousands(byVerb[v]))
	}
	return fmt.Sprintf("%s/ — %s: %s", dir, panes.Count(n, "file", "files"), strings.Join(parts, ", "))
}

func firstAction(aps []engine.AppliedPath) string {
	if len(aps) == 0 {
		return "nothing"
	}
	return aps[0].Action
}

// applyTargets names where a publication goes: "its source, all or
// nothing", or in a World with several trees the trees it writes ("tree
// game, all or nothing", "its source and tree game, each all or nothing":
// one publication per tree).
func applyTargets(paths []engine.AppliedPath) string {
	var trees []string
	seen := map[string]bool{}
	main := false
	for _, ap := range paths {
		switch {
		case ap.Tree == "" || ap.Tree == engine.MainTree:
			main = true
		case !seen[ap.Tree]:
			seen[ap.Tree] = true
			trees = append(trees, ap.Tree)
		}
	}
	switch {
	case len(trees) == 0:
		return "its source, all or nothing"
	case main:
		return "its source and tree " + strings.Join(trees, ", ") + ", each all or nothing"
	case len(trees) == 1:
		return "tree " + trees[0] + ", all or nothing"
	default:
		return "trees " + strings.Join(trees, ", ") + ", each all or nothing"
	}
}
