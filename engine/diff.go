package engine

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

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
}

// FileChange is one path's diff.
type FileChange struct {
	Change overlay.Change `json:"-"`
	Path   string         `json:"path"`
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
}

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
	var other *World
	if o.AgainstWorld != "" {
		if other, err = e.World(o.AgainstWorld); err != nil {
			return nil, err
		}
	}
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
	for _, p := range o.Paths {
		rel, err := e.relToSource(w, p)
		if err != nil {
			return nil, err
		}
		picks = append(picks, Pick{Path: rel})
	}
	changes, _, err := selectChanges(cs, picks)
	if err != nil {
		return nil, fmt.Errorf("diff world %q: %w", name, err)
	}
	layers := w.Layers(e.Paths)
	var out []FileChange
	for _, c := range changes {
		if c.Type == overlay.TypeDir && (c.LowerType == overlay.TypeDir || c.LowerType == 0) && c.Kind != overlay.TypeChanged {
			continue // git has no directories: their files carry the change
		}
		var old version
		late, baseErr := false, ""
		switch {
		case other != nil:
			if old, err = worldSide(other.Layers(e.Paths), c.Path); err != nil {
				return nil, err
			}
		case o.Against == "source":
			if old, err = readSide(w.Source, c.Path); err != nil {
				return nil, err
			}
		default:
			rec, data, err := e.baseOf(ctx, w, c.Path)
			if err != nil {
				return nil, err
			}
			old = baseSide(rec, data)
			late = rec != nil && rec.Late
			if rec != nil {
				baseErr = rec.CaptureError
			}
		}
		nw, err := worldSide(layers, c.Path)
		if err != nil {
			return nil, err
		}
		if old.same(nw) {
			continue
		}
		fc := FileChange{Change: c, Path: c.Path, Kind: c.Kind.String(), Old: side(old), New: side(nw), LateBase: late, BaseUnknown: baseErr}
		fc.Diff = diffview.Diff(old.text(), nw.text(), diffview.Options{Context: o.Context, Force: o.Force})
		fc.Hunks, fc.Added, fc.Removed = len(fc.Diff.Hunks), fc.Diff.Added, fc.Diff.Removed
		fc.Binary, fc.TooLarge = fc.Diff.Binary, fc.Diff.TooLarge
		out = append(out, fc)
	}
	return out, nil
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
// deletion then an addition, binary files noted.
func Patch(fcs []FileChange) string {
	var b strings.Builder
	for _, fc := range fcs {
		oldT, newT := fc.Old.Type, fc.New.Type
		if oldT != "" && newT != "" && oldT != newT {
			// A type change is two entries, as git writes it.
			del := diffview.Diff(fc.Old.text, "", diffview.Options{Context: fc.Diff.Context})
			add := diffview.Diff("", fc.New.text, diffview.Options{Context: fc.Diff.Context})
			b.WriteString(diffview.UnifiedPatch(diffview.PatchFile{OldPath: fc.Path, NewPath: fc.Path, OldMode: fc.Old.Mode, Diff: del}))
			b.WriteString(diffview.UnifiedPatch(diffview.PatchFile{OldPath: fc.Path, NewPath: fc.Path, NewMode: fc.New.Mode, Diff: add}))
			continue
		}
		b.WriteString(diffview.UnifiedPatch(diffview.PatchFile{OldPath: fc.Path, NewPath: fc.Path, OldMode: fc.Old.Mode, NewMode: fc.New.Mode, Diff: fc.Diff}))
	}
	return b.String()
}

func sortChanges(cs []overlay.Change) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
}
