package engine

import (
	"context"
	"fmt"
	"io/fs"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/overlay"
)

// DiffOptions are the flags of `strata diff`.
type DiffOptions struct {
	Paths        []string // empty = every change
	Against      string   // "base" (default: what the World started from) or "source" (the source now)
	AgainstWorld string   // diff against another World's version instead
	Context      int
	Force        bool // diff binary and huge files anyway
	// Changes, when set, are the changes to diff as the caller already
	// listed them (the TUI's Changes pane): the World's change set is not
	// read again. Each is still diffed from its base, World and source
	// versions as read now. Paths is ignored; not with AgainstWorld.
	Changes []overlay.Change
	// Tree limits the diff to one tree of a World with several (`--tree`);
	// "" = every tree. Changes, when set, are that tree's (default main).
	Tree string
}

// FileChange is one path's diff: what the TUI renders, `strata diff`
// prints and apply numbers hunks in (base vs World unless asked otherwise).
type FileChange struct {
	Change overlay.Change `json:"-"`
	// Tree is the tree Path is in, in a World with several ("" in a World
	// with one): Path is relative to that tree's directory.
	Tree string `json:"tree,omitempty"`
	Path string `json:"path"`
	// PathBytes: only set for JSON output, for a path that is not valid
	// UTF-8 (overlay.JSONPath); in memory Path holds the exact bytes.
	PathBytes []byte             `json:"path_bytes,omitempty"`
	Kind      string             `json:"kind"`
	Old       diffSide           `json:"old"`
	New       diffSide           `json:"new"`
	Diff      *diffview.FileDiff `json:"-"`
	Hunks     int                `json:"hunks"`
	Added     int                `json:"added"`
	Removed   int                `json:"removed"`
	Binary    bool               `json:"binary,omitempty"`
	TooLarge  bool               `json:"too_large,omitempty"`
	LateBase  bool               `json:"late_base,omitempty"`
	// BaseUnknown says why the base could not be recorded (BaseRecord.
	// CaptureError); the diff then shows the path as if new.
	BaseUnknown string `json:"base_unknown,omitempty"`
	// BaseHash, WorldHash and SourceHash identify the base, the World's
	// version and the source's version now (sha256 hex of the content or
	// symlink target, HashAbsent for an absent one, "" for a directory).
	// Pass BaseHash and WorldHash back in a Pick so apply refuses hunks
	// picked on versions that have since moved.
	BaseHash   string `json:"base_hash"`
	WorldHash  string `json:"world_hash"`
	SourceHash string `json:"source_hash"`
	// Drift: the source now differs from the base under this path (another
	// World applied, a person edited it): apply will 3-way merge.
	Drift bool `json:"drift,omitempty"`
	// HunkNumbers are, per hunk of Diff, the 1-based numbers that
	// ApplyOptions.Picks (and `strata apply --hunks`) count it as: the hunks
	// of the base→World diff with the default context. nil when the diff is
	// not against the base (those hunks cannot be picked).
	HunkNumbers [][]int `json:"-"`
}

// HashAbsent stands for an absent version in FileChange's and Pick's hashes.
const HashAbsent = "absent"

// id is the version's hash as FileChange reports it and Pick expects it.
func (v version) id() string {
	if v.typ == 0 {
		return HashAbsent
	}
	return v.hash()
}

// OldText and NewText are the two versions the diff was computed from (a
// symlink's target; "" for an absent side), so a viewer can lay the same
// diff out with another context size.
func (fc FileChange) OldText() string { return fc.Old.text }
func (fc FileChange) NewText() string { return fc.New.text }

type diffSide struct {
	Type   string `json:"type,omitempty"` // "" = absent
	Mode   uint32 `json:"mode,omitempty"` // git mode
	Target string `json:"target,omitempty"`
	text   string
}

// Diff computes the diffs of a World's changed files against their base
// (or the source now, or another World).
func (e *Engine) Diff(ctx context.Context, name string, o DiffOptions) ([]FileChange, error) {
	w, err := e.World(name)
	if err != nil {
		return nil, err
	}
	if w.HasTrees() || o.Tree != "" && o.Tree != MainTree {
		return e.diffTrees(ctx, w, o) // each tree's on its own (trees.go)
	}
	return e.diffTree(ctx, w, o)
}

// diffTree is Diff of one tree: the World's source, or the tree a view
// (World.TreeView) stands for.
func (e *Engine) diffTree(ctx context.Context, w *World, o DiffOptions) ([]FileChange, error) {
	name := w.Name
	var other *World
	var err error
	if o.AgainstWorld != "" {
		if other, err = e.World(o.AgainstWorld); err != nil {
			return nil, err
		}
		if w.View != "" {
			if other, err = other.TreeView(w.View); err != nil {
				return nil, err
			}
		}
	}
	var changes []overlay.Change
	if o.Changes != nil && other == nil {
		changes = o.Changes
	} else if changes, err = e.changesToDiff(ctx, w, other, o.Paths); err != nil {
		return nil, fmt.Errorf("diff world %q: %w", name, err)
	}
	layers := w.Layers(e.Paths)
	if _, err := e.store(); err != nil { // opened once, before the workers share it
		return nil, fmt.Errorf("diff world %q: %w", name, err)
	}
	one := func(c overlay.Change) (*FileChange, error) {
		var err error
		if c.Type == overlay.TypeDir && (c.LowerType == overlay.TypeDir || c.LowerType == 0) && c.Kind != overlay.TypeChanged {
			return nil, nil // git has no directories: their files carry the change
		}
		// The base and the source now are read for every path: the hashes
		// and the drift mark are what apply will check and merge against.
		// (A diff against another World compares two Worlds: a path only
		// that World changed has no base here, and none is captured.)
		var base, now, old version
		late, baseErr := false, ""
		if other == nil {
			rec, data, err := e.baseOf(ctx, w, c.Path)
			if err != nil {
				return nil, err
			}
			base, late = baseSide(rec, data), rec != nil && rec.Late
			if rec != nil {
				baseErr = rec.CaptureError
			}
			if now, err = readSide(w.Source, c.Path); err != nil {
				return nil, fmt.Errorf("diff world %q: read the source's %s: %w", name, c.Path, err)
			}
			old = base
			if o.Against == "source" {
				old = now
			}
		} else if old, err = worldSide(other.Layers(e.Paths), c.Path); err != nil {
			return nil, err
		}
		nw, err := worldSide(layers, c.Path)
		if err != nil {
			return nil, err
		}
		if old.same(nw) {
			return nil, nil
		}
		fc := FileChange{Change: c, Path: c.Path, Kind: c.Kind.String(), Old: side(old), New: side(nw), LateBase: late, BaseUnknown: baseErr, WorldHash: nw.id()}
		if other == nil {
			fc.BaseHash, fc.SourceHash, fc.Drift = base.id(), now.id(), !now.same(base)
		}
		fc.Diff = diffview.Diff(old.text(), nw.text(), diffview.Options{Context: o.Context, Force: o.Force})
		fc.Hunks, fc.Added, fc.Removed = len(fc.Diff.Hunks), fc.Diff.Added, fc.Diff.Removed
		fc.Binary, fc.TooLarge = fc.Diff.Binary, fc.Diff.TooLarge
		if other == nil && o.Against != "source" && !fc.Diff.Summarised() {
			numbered := fc.Diff // apply numbers hunks in the default diff
			if fc.Diff.Context != diffview.DefaultContext || o.Force {
				numbered = diffview.Diff(old.text(), nw.text(), diffview.Options{})
			}
			if !numbered.Summarised() {
				fc.HunkNumbers = diffview.HunkNumbers(fc.Diff, numbered)
			}
		}
		return &fc, nil
	}
	// Each path is read and diffed on its own: spread over the CPUs (a
	// World with 100,000 changed files), the output in the changes' order
	// and the first failure in that order returned.
	fcs, errs := make([]*FileChange, len(changes)), make([]error, len(changes))
	workers := min(runtime.GOMAXPROCS(0), 8, max(len(changes)/64, 1))
	var next atomic.Int64
	var failed atomic.Bool // no new path after a failure; those before it finish
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(changes) {
					return
				}
				if fcs[i], errs[i] = one(changes[i]); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	var out []FileChange
	for i := range changes {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if fcs[i] != nil {
			out = append(out, *fcs[i])
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("diff world %q: %w", name, err)
	}
	return out, nil
}

// changesToDiff lists the changes of w (and other) under paths.
func (e *Engine) changesToDiff(ctx context.Context, w, other *World, paths []string) ([]overlay.Change, error) {
	cs, err := e.Changes(ctx, w, false)
	if err != nil {
		return nil, err
	}
	if other != nil {
		ocs, err := e.Changes(ctx, other, false)
		if err != nil {
			return nil, err
		}
		cs = unionChanges(cs, ocs)
	}
	var picks []Pick
	for _, p := range paths {
		rel, err := e.relToSource(w, p)
		if err != nil {
			return nil, err
		}
		picks = append(picks, Pick{Path: rel})
	}
	changes, _, err := selectChanges(cs, picks)
	return changes, err
}

func (v version) text() string {
	if v.typ == overlay.TypeSymlink {
		return v.target
	}
	return string(v.data)
}

func side(v version) diffSide {
	if v.typ == 0 || v.typ == overlay.TypeDir {
		return diffSide{}
	}
	return diffSide{Type: v.typ.String(), Mode: diffview.GitMode(v.mode | typeBits(v.typ)), Target: v.target, text: v.text()}
}

func typeBits(t overlay.FileType) fs.FileMode {
	if t == overlay.TypeSymlink {
		return fs.ModeSymlink
	}
	return 0
}

// unionChanges merges two change sets by path (for diffs between Worlds).
func unionChanges(a, b *overlay.ChangeSet) *overlay.ChangeSet {
	seen := map[string]bool{}
	out := &overlay.ChangeSet{Dialect: a.Dialect}
	for _, cs := range []*overlay.ChangeSet{a, b} {
		for _, c := range cs.Changes {
			if !seen[c.Path] {
				seen[c.Path] = true
				out.Changes = append(out.Changes, c)
			}
		}
	}
	sortChanges(out.Changes)
	return out
}

// Patch renders diffs as a unified patch that `git apply` accepts in the
// source: a/ b/ prefixes, new and deleted file modes, type changes as a
// deletion then an addition, binary files noted; each pickable hunk's
// header ends with the number apply counts it as ("@@ -3,4 +3,5 @@ hunk 2").
func Patch(fcs []FileChange) string {
	var b strings.Builder
	for _, fc := range fcs {
		// A path of an extra tree is written NAME:path (trees.go).
		if !strings.HasPrefix(fc.Path, fc.Tree+":") { // FlatChanges paths have it already
			fc.Path = TreePath(fc.Tree, fc.Path)
		}
		oldT, newT := fc.Old.Type, fc.New.Type
		if oldT != "" && newT != "" && oldT != newT {
			// A type change is two entries, as git writes it.
			del := diffview.Diff(fc.Old.text, "", diffview.Options{Context: fc.Diff.Context})
			add := diffview.Diff("", fc.New.text, diffview.Options{Context: fc.Diff.Context})
			b.WriteString(diffview.UnifiedPatch(diffview.PatchFile{OldPath: fc.Path, NewPath: fc.Path, OldMode: fc.Old.Mode, Diff: del}))
			b.WriteString(diffview.UnifiedPatch(diffview.PatchFile{OldPath: fc.Path, NewPath: fc.Path, NewMode: fc.New.Mode, Diff: add}))
			continue
		}
		var labels []string
		for _, nums := range fc.HunkNumbers {
			labels = append(labels, diffview.HunkLabel(nums))
		}
		b.WriteString(diffview.UnifiedPatch(diffview.PatchFile{OldPath: fc.Path, NewPath: fc.Path, OldMode: fc.Old.Mode, NewMode: fc.New.Mode, Diff: fc.Diff, HunkLabels: labels}))
	}
	return b.String()
}

func sortChanges(cs []overlay.Change) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
}
