package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Apply in a World with several trees (docs/design.md, "Several trees"):
// each overlay tree is its own source with its own atomic publication and
// journal. Every tree is checked first, nothing written (conflicts, stale
// picks, writers, refusals), and only when all pass is each published, in
// the World's tree order. A tree that fails its own publication after
// earlier ones landed (its source changed in between, a crash) leaves
// those published and itself untouched: *PartialApplyError says which.

// TreeApplied is one tree's publication of an apply.
type TreeApplied struct {
	Tree   string `json:"tree"`
	Source string `json:"source"`
	ID     string `json:"id,omitempty"`
	Paths  int    `json:"paths"`
}

// ErrPartialApply is matched by errors.Is for a *PartialApplyError.
var ErrPartialApply = errors.New("some trees were published, others not")

// PartialApplyError: the trees in Published were published; Failed, and
// every tree after it, was not, because of Err.
type PartialApplyError struct {
	World     string
	Published []TreeApplied
	Failed    string
	Err       error
}

func (e *PartialApplyError) Error() string {
	names := make([]string, len(e.Published))
	for i, t := range e.Published {
		names[i] = t.Tree
	}
	return fmt.Sprintf("apply world %q: %s published, but tree %s could not be: %v; nothing was written to tree %s or the trees after it: "+
		"resolve that and run apply again (what was published is the World's now, so it is not published twice)",
		e.World, countOf(len(names), "tree "+strings.Join(names, ", ")+" was", "trees "+strings.Join(names, ", ")+" were"), e.Failed, e.Err, e.Failed)
}

func (e *PartialApplyError) Unwrap() []error { return []error{ErrPartialApply, e.Err} }

type treeStep struct {
	view *World
	o    ApplyOptions
}

// applyTrees is Apply of a World with several trees: picks are NAME:path
// (a plain path is the source's), no picks = every change of every tree.
func (e *Engine) applyTrees(ctx context.Context, w *World, o ApplyOptions, start time.Time) (*ApplyResult, error) {
	if o.ToBranch != "" {
		return nil, fmt.Errorf("apply world %q --to-branch: it has several trees, each published to its own directory; --to-branch works in a World with one tree", w.Name)
	}
	byTree, order, err := splitPicks(w, e.Paths.Upper(w.Name), o.Picks)
	if err != nil {
		return nil, fmt.Errorf("apply world %q: %w", w.Name, err)
	}
	// Every tree still the directory it was (not a link to another place)
	// before anything is decided or written.
	if err := e.checkTrees(w); err != nil {
		return nil, fmt.Errorf("apply: %w (nothing was written to any tree)", err)
	}
	var steps []treeStep
	for _, t := range order {
		v, err := w.TreeView(t)
		if err != nil {
			return nil, fmt.Errorf("apply world %q: %w", w.Name, err)
		}
		oo := o
		oo.Picks = byTree[t]
		if len(oo.Picks) == 0 {
			cs, err := e.Changes(ctx, v, false)
			if err != nil {
				return nil, err
			}
			if len(cs.Changes) == 0 {
				continue // nothing of this tree to publish
			}
		}
		steps = append(steps, treeStep{view: v, o: oo})
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("apply world %q: nothing to apply: the World has no changes", w.Name)
	}
	res := &ApplyResult{World: w.Name, Source: w.Source, DryRun: o.DryRun}

	// 1. Every tree decided, nothing written: all conflicts of all trees
	// are listed together; any other refusal stops here.
	var conflicts []Conflict
	for _, st := range steps {
		dry := st.o
		dry.DryRun = true
		r, err := e.applyTree(ctx, st.view, dry, start)
		tree := st.view.TreeName()
		var ce *ConflictError
		switch {
		case errors.As(err, &ce):
			for _, c := range ce.Conflicts {
				c.Tree = tree
				conflicts = append(conflicts, c)
			}
		case err != nil:
			return nil, fmt.Errorf("tree %s: %w (nothing was written to any tree)", tree, err)
		}
		res.merge(tree, r)
	}
	if len(conflicts) > 0 {
		e.activity(ctx, Event{Type: EventApplyConflict, World: w.Name, Detail: map[string]any{"paths": conflictPaths(conflicts), "trees": true}})
		return res, &ConflictError{World: w.Name, Conflicts: conflicts}
	}
	if o.DryRun {
		res.Duration = time.Since(start).Round(time.Microsecond).String()
		return res, nil
	}

	// 2. Each tree's own atomic publication, in order.
	published := &ApplyResult{World: w.Name, Source: w.Source}
	for i, st := range steps {
		tree := st.view.TreeName()
		r, err := e.applyTree(ctx, st.view, st.o, start)
		if err != nil {
			var ce *ConflictError
			if errors.As(err, &ce) {
				for j := range ce.Conflicts {
					ce.Conflicts[j].Tree = tree
				}
			}
			if i == 0 {
				return nil, fmt.Errorf("tree %s: %w (nothing was written to any tree)", tree, err)
			}
			published.Duration = time.Since(start).Round(time.Microsecond).String()
			return published, &PartialApplyError{World: w.Name, Published: published.Trees, Failed: tree, Err: err}
		}
		published.merge(tree, r)
		published.Trees = append(published.Trees, TreeApplied{Tree: tree, Source: st.view.Source, ID: r.ID, Paths: len(r.Paths)})
		if published.ID == "" {
			published.ID = r.ID
		}
		killPoint("apply.tree")
	}
	published.Duration = time.Since(start).Round(time.Microsecond).String()
	return published, nil
}

// merge adds one tree's result to a World's.
func (r *ApplyResult) merge(tree string, t *ApplyResult) {
	if t == nil {
		return
	}
	for _, p := range t.Paths {
		p.Tree = tree
		r.Paths = append(r.Paths, p)
	}
	for _, d := range t.Dropped {
		r.Dropped = append(r.Dropped, TreePath(tree, d))
	}
	r.Warnings = append(r.Warnings, t.Warnings...)
}

// splitPicks groups picks by tree (World.SplitTreePath) and lists the
// trees to act on: those picked, or every overlay tree without picks.
func splitPicks(w *World, upper string, picks []Pick) (map[string][]Pick, []string, error) {
	byTree := map[string][]Pick{}
	for _, p := range picks {
		if err := w.UnknownTreePrefix(p.Path, upper); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p.Path, err)
		}
		t, rel := w.SplitTreePath(p.Path)
		if tr, ok := w.FindTree(t); ok && tr.Mode != TreeOverlay {
			return nil, nil, fmt.Errorf("%s: tree %s is %s: it has no changes of its own", p.Path, t, tr.Mode)
		}
		p.Path = rel
		byTree[t] = append(byTree[t], p)
	}
	var order []string
	for _, n := range w.TreeNames() {
		if len(picks) == 0 || len(byTree[n]) > 0 {
			order = append(order, n)
		}
	}
	return byTree, order, nil
}
