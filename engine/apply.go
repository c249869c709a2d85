package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/publish"
	"github.com/stratahq/strata/overlay/store"
)

// Pick selects one path, or a directory and everything under it, and within
// a text file optionally some hunks or lines of its diff against the base.
type Pick struct {
	Path      string
	Hunks     []int               // 1-based hunk numbers of the base→World diff; nil = the whole file
	Selection *diffview.Selection // exact lines (the TUI); overrides Hunks
	// Resolved is the person's resolution of a conflict: the exact content to
	// publish. It is written only if the source still holds the version the
	// resolution was made against (TheirsHash, sha256 hex; "" = absent).
	Resolved   []byte
	TheirsHash string
	// BaseHash and WorldHash bind the pick to the versions it was made on
	// (FileChange.BaseHash/WorldHash: sha256 hex, HashAbsent; "" = not
	// checked). Hunk numbers and line selections mean something only in the
	// diff of those two versions: if either moved, apply refuses the pick
	// (*StalePickError) instead of publishing other lines than were reviewed.
	BaseHash, WorldHash string
}

// ErrStalePick is matched by errors.Is for a *StalePickError.
var ErrStalePick = errors.New("picked on versions that have since changed")

// StalePickError rejects a publication whose pick was made on a base or a
// World version that is no longer there; nothing was written.
type StalePickError struct {
	Path string
	// Side is "world" (the World's file was written since) or "base" (a
	// publication from this World moved its base, so hunks renumber).
	Side      string
	Want, Got string // the hashes picked on and found
	hunks     bool
}

func (e *StalePickError) Error() string {
	what := "it was picked"
	if e.hunks {
		what = "the hunks were picked"
	}
	if e.Side == "base" {
		return fmt.Sprintf("%s: the base changed since %s (part of this World's change was applied meanwhile, so the diff and its hunk numbers moved); review the diff again", e.Path, what)
	}
	return fmt.Sprintf("%s: the World's file changed since %s (a session may still be writing it); review the diff again", e.Path, what)
}

func (e *StalePickError) Is(target error) bool { return target == ErrStalePick }

// checkVersions refuses a pick bound to versions that moved.
func (pk Pick) checkVersions(rel string, base, ours version) error {
	// The base is checked first: when part of the change was applied, the
	// base moved and the World took on the merged result too, and the moved
	// base is what renumbered the hunks.
	hunks := len(pk.Hunks) > 0 || pk.Selection != nil
	if pk.BaseHash != "" && base.id() != pk.BaseHash {
		return &StalePickError{Path: rel, Side: "base", Want: pk.BaseHash, Got: base.id(), hunks: hunks}
	}
	if pk.WorldHash != "" && ours.id() != pk.WorldHash {
		return &StalePickError{Path: rel, Side: "world", Want: pk.WorldHash, Got: ours.id(), hunks: hunks}
	}
	return nil
}

// ApplyOptions are the flags of `strata apply`.
type ApplyOptions struct {
	Picks       []Pick // empty = every change of the World
	DryRun      bool
	DropApplied bool   // remove applied paths from the World's upper afterwards
	ToBranch    string // commit on a new git branch instead of the working tree
	Message     string
	Context     int // diff context for hunk numbering; 0 = default
	// AllowSetuid publishes setuid/setgid bits the World set; without it they
	// are stripped, and the result says so (AppliedPath.Note, Warnings).
	AllowSetuid bool
}

// AppliedPath is one path of a publication.
type AppliedPath struct {
	// Tree is the tree Path is in, in a World with several (trees_apply.go).
	Tree string `json:"tree,omitempty"`
	Path string `json:"path"`
	// PathBytes is only set in JSON, for a path that is not valid UTF-8
	// (overlay.JSONPath); in memory Path holds the exact bytes.
	PathBytes []byte `json:"path_bytes,omitempty"`
	Action    string `json:"action"` // write, merge, symlink, mkdir, delete, rmdir, nothing
	Hunks     []int  `json:"hunks,omitempty"`
	Note      string `json:"note,omitempty"`
}

// MarshalJSON writes the path byte for byte (overlay.JSONPath).
func (a AppliedPath) MarshalJSON() ([]byte, error) {
	type plain AppliedPath
	v := plain(a)
	v.Path, v.PathBytes = overlay.JSONPath(a.Path)
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON wrote (history.jsonl).
func (a *AppliedPath) UnmarshalJSON(data []byte) error {
	type plain AppliedPath
	var v plain
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*a = AppliedPath(v)
	a.Path, a.PathBytes = overlay.PathFromJSON(v.Path, v.PathBytes), nil
	return nil
}

// ApplyResult says what an apply did (or, with DryRun, would do).
type ApplyResult struct {
	ID      string        `json:"id,omitempty"`
	World   string        `json:"world"`
	Source  string        `json:"source"`
	DryRun  bool          `json:"dry_run"`
	Paths   []AppliedPath `json:"paths"`
	Branch  string        `json:"branch,omitempty"`
	Commit  string        `json:"commit,omitempty"`
	Dropped []string      `json:"dropped,omitempty"`
	// Warnings are for the person: what the publication changed from what
	// was picked (stripped setuid bits, a World that kept its own version)
	// and what went wrong outside this World without stopping it (another
	// World's bases that could not be recorded).
	Warnings []string `json:"warnings,omitempty"`
	Duration string   `json:"duration"`
	// Trees are the publications of a World with several trees, one per
	// tree that had something to publish, in the World's tree order.
	Trees []TreeApplied `json:"trees,omitempty"`
	// others are the Warnings about other Worlds, gathered before planning
	// (a retried plan starts again from them).
	others []string
}

// MarshalJSON writes each dropped path that is not valid UTF-8 in its
// quoted form (overlay.QuotePath), which keeps every byte.
func (r ApplyResult) MarshalJSON() ([]byte, error) {
	type plain ApplyResult
	v := plain(r)
	if r.Dropped != nil {
		v.Dropped = make([]string, len(r.Dropped))
		for i, p := range r.Dropped {
			v.Dropped[i], _ = overlay.JSONPath(p)
		}
	}
	return json.Marshal(v)
}

// Conflict is one path that cannot be published as picked.
type Conflict struct {
	// Tree is the tree Path is in, in a World with several.
	Tree string `json:"tree,omitempty"`
	Path string `json:"path"`
	// PathBytes: as in AppliedPath, only in JSON.
	PathBytes []byte              `json:"path_bytes,omitempty"`
	Reason    string              `json:"reason"`
	Regions   []diffview.Conflict `json:"regions,omitempty"`
	Base      string              `json:"base,omitempty"`
	Ours      string              `json:"ours,omitempty"`
	Theirs    string              `json:"theirs,omitempty"`
	Merged    string              `json:"merged,omitempty"` // with conflict markers
	// TheirsHash identifies the source version the conflict was found
	// against; pass it back in Pick.TheirsHash with a resolution.
	TheirsHash string `json:"theirs_hash,omitempty"`
}

// MarshalJSON writes the path byte for byte (overlay.JSONPath).
func (c Conflict) MarshalJSON() ([]byte, error) {
	type plain Conflict
	v := plain(c)
	v.Path, v.PathBytes = overlay.JSONPath(c.Path)
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (c *Conflict) UnmarshalJSON(data []byte) error {
	type plain Conflict
	var v plain
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*c = Conflict(v)
	c.Path, c.PathBytes = overlay.PathFromJSON(v.Path, v.PathBytes), nil
	return nil
}

// ConflictError rejects a whole publication: nothing was written.
type ConflictError struct {
	World     string
	Conflicts []Conflict
}

// ErrConflict is matched by errors.Is for a *ConflictError.
var ErrConflict = errors.New("apply conflicts")

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apply world %q: %s, nothing was written:", e.World, countOf(len(e.Conflicts), "conflict", "conflicts"))
	for _, c := range e.Conflicts {
		fmt.Fprintf(&b, "\n  %s: %s", TreePath(c.Tree, overlay.QuotePath(c.Path)), c.Reason)
	}
	return b.String()
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// version is one side of a path: absent, or a file, dir or symlink. A large
// World file is not held in memory: file names where its content lives, sum
// is the hash it had while the World was paused, size its length.
type version struct {
	typ    overlay.FileType // 0 = absent
	mode   fs.FileMode      // permission and special bits
	data   []byte
	target string
	file   string
	size   int64
	sum    string
}

// streamed reports whether the content is in v.file, not v.data.
func (v version) streamed() bool { return v.file != "" }

func (v version) length() int64 {
	if v.streamed() {
		return v.size
	}
	return int64(len(v.data))
}

func (v version) hash() string {
	if v.sum != "" {
		return v.sum
	}
	switch v.typ {
	case overlay.TypeFile:
		h := sha256.Sum256(v.data)
		return hex.EncodeToString(h[:])
	case overlay.TypeSymlink:
		h := sha256.Sum256([]byte(v.target))
		return hex.EncodeToString(h[:])
	}
	return ""
}

func (v version) sameContent(o version) bool {
	if v.typ != o.typ {
		return false
	}
	switch v.typ {
	case overlay.TypeFile:
		if v.streamed() || o.streamed() {
			return v.length() == o.length() && v.hash() == o.hash()
		}
		return bytes.Equal(v.data, o.data)
	case overlay.TypeSymlink:
		return v.target == o.target
	}
	return true
}

func (v version) same(o version) bool {
	return v.sameContent(o) && (v.typ == 0 || v.typ == overlay.TypeSymlink || v.mode == o.mode)
}

// readSide reads rel under root without following symlinks in any
// component. A path under a symlink is absent: the source holds nothing
// there beneath its root, and what the link points at is never read.
func readSide(root, rel string) (version, error) {
	st, err := overlay.LstatBeneath(root, rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, overlay.ErrUnsafePath) {
		return version{}, nil
	}
	if err != nil {
		return version{}, err
	}
	v := version{typ: overlay.FileTypeOf(st.Mode()), mode: st.Mode() & fsx.PermBits}
	switch v.typ {
	case overlay.TypeFile:
		if st.Size() >= streamThreshold {
			return hashedSide(v, root, rel)
		}
		if v.data, _, err = overlay.ReadFileBeneath(root, rel); err != nil {
			return v, err
		}
	case overlay.TypeSymlink:
		if v.target, err = overlay.ReadlinkBeneath(root, rel); err != nil {
			return v, err
		}
	}
	return v, nil
}

func worldSide(l overlay.Layers, rel string) (version, error) {
	ent, err := l.Stat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return version{}, nil
	}
	if err != nil {
		return version{}, err
	}
	v := version{typ: ent.Type, mode: ent.Mode & fsx.PermBits, target: ent.Target}
	if v.typ == overlay.TypeFile {
		if v.data, err = l.ReadFile(rel); err != nil {
			return v, err
		}
	}
	return v, nil
}

func baseSide(r *BaseRecord, data []byte) version {
	if r == nil || r.Absent {
		return version{}
	}
	return version{typ: r.Type, mode: fsx.FileMode(r.Mode), data: data, target: r.Target}
}

// selectChanges resolves picks against the change set: a pick names a path
// or a directory (everything under it). Unknown paths are an error.
func selectChanges(cs *overlay.ChangeSet, picks []Pick) ([]overlay.Change, map[string]Pick, error) {
	byPath := map[string]Pick{}
	if len(picks) == 0 {
		for _, c := range cs.Changes {
			byPath[c.Path] = Pick{Path: c.Path}
		}
		return cs.Changes, byPath, nil
	}
	var out []overlay.Change
	seen := map[string]bool{}
	for _, p := range picks {
		clean := strings.Trim(filepath.ToSlash(filepath.Clean(p.Path)), "/")
		matched := false
		for _, c := range cs.Changes {
			if c.Path == clean || strings.HasPrefix(c.Path, clean+"/") || clean == "." {
				matched = true
				if !seen[c.Path] {
					seen[c.Path] = true
					out = append(out, c)
				}
				if c.Path == clean {
					byPath[c.Path] = p
				} else if _, ok := byPath[c.Path]; !ok {
					byPath[c.Path] = Pick{Path: c.Path}
				}
			}
		}
		if !matched {
			return nil, nil, fmt.Errorf("%s: the World has no change at this path (strata status lists them)", p.Path)
		}
		if (len(p.Hunks) > 0 || p.Selection != nil) && byPath[clean].Path != clean {
			return nil, nil, fmt.Errorf("%s: hunks can only be picked in a file", p.Path)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, byPath, nil
}

// plan is the outcome of deciding every picked path.
type plan struct {
	ops       []publish.PublishOp
	paths     []AppliedPath
	conflicts []Conflict
	written   map[string]version // new source content per path, for base updates
	whole     map[string]bool    // paths applied whole (droppable from the upper)
	// takeOn lists the paths whose published content is not the World's own
	// (merges, resolutions): the World takes it on afterwards.
	takeOn      map[string]takeOn
	allowSetuid bool
	warnings    []string
}

// takeOn is what the World had and started from for a path whose published
// content differs from its own version.
type takeOn struct {
	base, world version
	partial     bool // only some hunks were picked: the World keeps the others
}

// Apply publishes the picked paths and hunks to the source as one atomic
// publication. For each path: base (what the World started from), ours (the
// World, only the picked hunks), theirs (the source now). theirs == base:
// ours is written; theirs == ours: nothing; otherwise a 3-way merge, and an
// overlapping edit is a conflict. Any conflict rejects the whole
// publication and nothing is written (*ConflictError).
func (e *Engine) Apply(ctx context.Context, name string, o ApplyOptions) (*ApplyResult, error) {
	start := time.Now()
	w, err := e.World(name)
	if err != nil {
		return nil, err
	}
	if w.HasTrees() {
		return e.applyTrees(ctx, w, o, start) // one publication per tree (trees_apply.go)
	}
	if err := e.checkTrees(w); err != nil { // the source still the directory it was
		return nil, fmt.Errorf("apply: %w (nothing was written)", err)
	}
	return e.applyTree(ctx, w, o, start)
}

// applyTree is Apply to one tree: the World's source, or the tree a view
// (World.TreeView) stands for, as one atomic publication.
func (e *Engine) applyTree(ctx context.Context, w *World, o ApplyOptions, start time.Time) (*ApplyResult, error) {
	name := w.Name
	cs, err := e.Changes(ctx, w, false)
	if err != nil {
		return nil, err
	}
	changes, picks, err := selectChanges(cs, o.Picks)
	if err != nil {
		return nil, fmt.Errorf("apply world %q: %w", name, err)
	}
	if len(changes) == 0 {
		return nil, fmt.Errorf("apply world %q: nothing to apply: the World has no changes", name)
	}
	// Every World over this source gets its bases captured before the
	// source changes, so their later applies merge instead of overwriting.
	warnings, err := e.captureAllBases(ctx, w, cs)
	if err != nil {
		return nil, fmt.Errorf("apply world %q: capture bases: %w", name, err)
	}
	res := &ApplyResult{World: name, Source: w.Source, DryRun: o.DryRun, Warnings: warnings, others: warnings}
	if o.ToBranch != "" {
		return e.applyToBranch(ctx, w, changes, picks, o, res, start)
	}
	if o.DropApplied && !o.DryRun {
		if running := e.runningSessions(w); len(running) > 0 {
			return nil, fmt.Errorf("apply world %q --drop-applied: %w (%s); the upper can only change while they are stopped", name, ErrSessionsRunning, strings.Join(running, ", "))
		}
	}
	var p *plan
	for attempt := 1; ; attempt++ {
		var retry bool
		if p, retry, err = e.publishAttempt(ctx, w, changes, picks, o, res, start, attempt); err != nil {
			if errors.Is(err, ErrConflict) {
				return res, err
			}
			return nil, err
		}
		if o.DryRun {
			return res, nil
		}
		if !retry {
			break
		}
	}
	// The World takes on what was published where that differs from its
	// own version (merges, resolutions), so a later apply cannot undo them.
	keepBase := e.takeOnPublished(ctx, w, p, res)
	// The published content is the new base of those paths.
	idx := e.basesOf(w)
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	for rel, v := range p.written {
		if keepBase[rel] {
			continue
		}
		rec := BaseRecord{Path: rel, CapturedAt: time.Now().UTC(), Absent: v.typ == 0, Type: v.typ, Mode: fsx.UnixMode(v.mode), Target: v.target}
		if v.typ == overlay.TypeFile {
			if v.streamed() {
				// The source now holds exactly the checked content.
				rec.Object = store.ObjectID(v.sum)
				_, err = st.PutFileSparse(filepath.Join(w.Source, filepath.FromSlash(rel)), rec.Object)
			} else {
				rec.Object, _, _, err = st.PutBytes(v.data)
			}
			if err != nil {
				return nil, err
			}
		}
		if err := idx.Set(rec); err != nil {
			return nil, err
		}
	}
	if o.DropApplied {
		if res.Dropped, err = e.dropApplied(ctx, w, p.whole); err != nil {
			return res, fmt.Errorf("apply world %q: published, but dropping the applied paths from the World failed: %w", name, err)
		}
	}
	res.Duration = time.Since(start).Round(time.Microsecond).String()
	if err := e.appendHistory(HistoryEntry{ID: res.ID, World: name, Source: w.Source, Time: time.Now().UTC(), Paths: res.Paths}); err != nil {
		e.Log.Warn("append history", "err", err)
	}
	e.activity(ctx, Event{Type: EventApplyDone, World: name, Detail: map[string]any{"id": res.ID, "paths": len(res.Paths)}})
	return res, nil
}

// publishAttempt captures the World's picked content, decides every path
// and publishes them; retry reports a streamed file that changed before it
// was staged (nothing was written: capture again). A *ConflictError comes
// with res filled in.
func (e *Engine) publishAttempt(ctx context.Context, w *World, changes []overlay.Change, picks map[string]Pick, o ApplyOptions, res *ApplyResult, start time.Time, attempt int) (*plan, bool, error) {
	name := w.Name
	// What is published is the World's content at one paused instant,
	// bound to the hashes taken then; a streamed file's World stays paused
	// until it is staged.
	ours, release, err := e.captureOurs(ctx, w, changes, true)
	defer release()
	if err != nil {
		return nil, false, fmt.Errorf("apply world %q: %w", name, err)
	}
	p, err := e.planApply(ctx, w, changes, picks, o, ours, func(rel string) (version, error) { return readSide(w.Source, rel) })
	if err != nil {
		return nil, false, fmt.Errorf("apply world %q: %w", name, err)
	}
	res.Paths = p.paths
	res.Warnings = append(slices.Clip(res.others), p.warnings...)
	if len(p.conflicts) > 0 {
		e.activity(ctx, Event{Type: EventApplyConflict, World: name, Detail: map[string]any{"paths": conflictPaths(p.conflicts)}})
		return p, false, &ConflictError{World: name, Conflicts: p.conflicts}
	}
	if o.DryRun {
		res.Duration = time.Since(start).Round(time.Microsecond).String()
		return p, false, nil
	}
	if len(p.ops) == 0 {
		return p, false, nil
	}
	pr, err := publish.Publish(ctx, w.Source, e.Paths.Journal(), p.ops, publish.PublishOptions{})
	if err == nil {
		res.ID = pr.ID
		return p, false, nil
	}
	var stale *publish.StaleError
	if errors.As(err, &stale) {
		cs := &ConflictError{World: name}
		for _, sp := range stale.Paths {
			cs.Conflicts = append(cs.Conflicts, Conflict{Path: sp.Path, Reason: "the source changed while the publication was prepared; run apply again"})
		}
		return p, false, cs
	}
	var changed *store.ContentError
	if errors.As(err, &changed) {
		if attempt < captureAttempts {
			e.Log.Debug("apply: a streamed file changed before it was staged, capturing again", "world", name, "path", changed.Path)
			return p, true, nil
		}
		return nil, false, fmt.Errorf("apply world %q: the World kept changing %s while it was published; nothing was written; wait for its writer or stop it, then apply again: %w", name, changed.Path, err)
	}
	var cj *publish.CorruptJournalError
	if errors.As(err, &cj) || errors.Is(err, publish.ErrUnverified) || errors.Is(err, publish.ErrForeignRoot) {
		return nil, false, fmt.Errorf("apply world %q: an earlier publication to %s cannot be completed, so nothing was written: %w; strata doctor explains it, strata doctor --repair resolves it", name, w.Source, err)
	}
	return nil, false, fmt.Errorf("apply world %q: %w", name, err)
}

func conflictPaths(cs []Conflict) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Path
	}
	return out
}

// captureAllBases captures missing bases of every World over w's source;
// cs is w's change set, already read by the caller. Each other World is
// captured on its own: what fails there never fails w's apply. It is
// returned as a warning (and logged), and the affected paths, or the whole
// World when its changes cannot even be listed, are marked so that World's
// own apply of them asks for a merge by hand instead of overwriting.
func (e *Engine) captureAllBases(ctx context.Context, w *World, cs *overlay.ChangeSet) ([]string, error) {
	ws, err := e.Worlds()
	if err != nil {
		return nil, err
	}
	if _, err := e.CaptureBases(ctx, w, cs); err != nil {
		return nil, err
	}
	var warnings []string
	for _, o := range ws {
		// Every overlay tree of every World over the same directory: a
		// World's extra tree may be another World's source (trees.go).
		for _, other := range treeViews(o) {
			if other.Source != w.Source || other.Name == w.Name {
				continue
			}
			if err := ctx.Err(); err != nil {
				return warnings, err
			}
			warnings = append(warnings, e.captureOtherBases(ctx, w.Name, other)...)
		}
	}
	return warnings, nil
}

// captureOtherBases captures the bases of other before by's publication and
// turns each failure into a warning and a mark in other's base index.
func (e *Engine) captureOtherBases(ctx context.Context, by string, other *World) []string {
	idx := e.basesOf(other)
	var warnings, paths []string
	fail := func(path string, cause error) {
		e.Log.Warn("capture base of another world", "world", other.Name, "by", by, "path", path, "err", cause)
		cause = errors.New(elide(cause.Error(), 300))
		paths = append(paths, path)
		if path == "" {
			warnings = append(warnings, fmt.Sprintf("world %q: its changes could not be listed, so their bases were not recorded before this publication (%v); "+
				"its apply of any path changed before now will ask for a merge by hand", other.Name, cause))
		} else {
			warnings = append(warnings, fmt.Sprintf("world %q: the base of %s could not be recorded before this publication (%v); "+
				"its apply of that path will ask for a merge by hand", other.Name, elide(overlay.QuotePath(path), 200), cause))
		}
	}
	ocs, err := e.Changes(ctx, other, false)
	if err == nil {
		var failed map[string]error
		if _, failed, err = e.captureBasesEach(ctx, other, ocs); err == nil {
			for _, c := range ocs.Changes {
				cause := failed[c.Path]
				if cause == nil {
					continue
				}
				if merr := idx.MarkUnknown(c.Path, errors.New(elide(cause.Error(), 300))); merr != nil {
					// The path cannot even be marked: mark the whole World.
					if merr := idx.MarkIncomplete(errors.New(elide(fmt.Sprintf("base of %s: %v", overlay.QuotePath(c.Path), cause), 300))); merr != nil {
						cause = fmt.Errorf("%w; marking it failed too: %w", cause, merr)
					}
				}
				fail(c.Path, cause)
			}
		}
	}
	if err != nil {
		if merr := idx.MarkIncomplete(errors.New(elide(err.Error(), 300))); merr != nil {
			err = fmt.Errorf("%w; marking the World failed too: %w", err, merr)
		}
		fail("", err)
	}
	if len(paths) > 0 {
		e.activity(ctx, Event{Type: EventBaseCaptureFailed, World: other.Name, Detail: map[string]any{"by": by, "paths": paths, "warnings": warnings}})
	}
	return warnings
}

// elide shortens s to about n bytes, keeping its start and end (a deep
// path in an error would otherwise fill the screen).
func elide(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n/2], "") + "…" + strings.ToValidUTF8(s[len(s)-n/2:], "")
}

// planApply decides every picked path; captured holds the World's versions
// (captureOurs), theirsOf reads the target's version.
func (e *Engine) planApply(ctx context.Context, w *World, changes []overlay.Change, picks map[string]Pick, o ApplyOptions, captured map[string]version, theirsOf func(string) (version, error)) (*plan, error) {
	p := &plan{written: map[string]version{}, whole: map[string]bool{}, takeOn: map[string]takeOn{}, allowSetuid: o.AllowSetuid}
	deleting := map[string]bool{}
	for _, c := range changes {
		if c.Kind == overlay.Deleted || c.Kind == overlay.TypeChanged {
			deleting[c.Path] = true
		}
	}
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, base, err := e.baseVersion(ctx, w, c.Path)
		if err != nil {
			return nil, err
		}
		ours, ok := captured[c.Path]
		if !ok {
			return nil, fmt.Errorf("%s: the World's version was not captured", c.Path)
		}
		world := ours
		theirs, err := theirsOf(c.Path)
		if err != nil {
			return nil, fmt.Errorf("read the source's %s: %w", c.Path, err)
		}
		pk := picks[c.Path]
		if err := pk.checkVersions(c.Path, base, ours); err != nil {
			return nil, err
		}
		if pk.Resolved != nil {
			if theirs.hash() != pk.TheirsHash {
				p.conflicts = append(p.conflicts, Conflict{Path: c.Path, Reason: "the source changed again after the conflict was resolved; resolve it once more"})
				p.paths = append(p.paths, AppliedPath{Path: c.Path})
				continue
			}
			res := version{typ: overlay.TypeFile, mode: ours.mode, data: pk.Resolved}
			if res.mode == 0 {
				res.mode = theirs.mode
			}
			ap := AppliedPath{Path: c.Path, Action: "write", Note: "resolved by hand"}
			if err := p.publish(c, base, res, theirs, deleting, &ap, theirsOf); err != nil {
				p.conflicts = append(p.conflicts, Conflict{Path: c.Path, Reason: err.Error()})
			}
			p.takeOn[c.Path] = takeOn{base: base, world: world}
			p.paths = append(p.paths, ap)
			continue
		}
		partial := len(pk.Hunks) > 0 || pk.Selection != nil
		if partial {
			if ours.typ != overlay.TypeFile || (base.typ != 0 && base.typ != overlay.TypeFile) {
				return nil, fmt.Errorf("%s: hunks can only be picked in a text file", c.Path)
			}
			if ours.streamed() || base.streamed() {
				return nil, fmt.Errorf("%s: too large to pick hunks in; pick the whole file", c.Path)
			}
			fd := diffview.Diff(string(base.data), string(ours.data), diffview.Options{Context: o.Context})
			if fd.Summarised() {
				return nil, fmt.Errorf("%s: binary or too large; pick the whole file", c.Path)
			}
			sel := pk.Selection
			if sel == nil {
				sel = diffview.NewSelection(fd, false)
				if err := sel.PickHunkNumbers(pk.Hunks); err != nil {
					return nil, fmt.Errorf("%s: %w (strata diff %s %s numbers them)", c.Path, err, w.Name, c.Path)
				}
			} else if sel, err = sel.Retarget(fd); err != nil {
				return nil, fmt.Errorf("%s: the World's file changed since the hunks were picked: %w", c.Path, err)
			}
			merged, err := fd.Apply(string(base.data), sel)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.Path, err)
			}
			ours.data = []byte(merged)
			if base.typ == overlay.TypeFile && len(pk.Hunks) == 0 && pk.Selection == nil {
				ours.mode = base.mode
			}
		}
		ap := AppliedPath{Path: c.Path, Hunks: pk.Hunks}
		conflict := func(reason string) {
			cf := Conflict{Path: c.Path, Reason: reason, TheirsHash: theirs.hash()}
			if isSmallText(base, ours, theirs) {
				cf.Base, cf.Ours, cf.Theirs = string(base.data), string(ours.data), string(theirs.data)
			}
			p.conflicts = append(p.conflicts, cf)
		}
		switch {
		case theirs.same(ours):
			ap.Action = "nothing"
			ap.Note = "the source already has this version"
		case rec != nil && rec.Late && rec.CaptureError != "" && ours.typ == overlay.TypeDir && (theirs.typ == 0 || theirs.typ == overlay.TypeDir):
			// An unknown base cannot hide an edit a directory would overwrite.
			if err := p.publish(c, base, ours, theirs, deleting, &ap, theirsOf); err != nil {
				conflict(err.Error())
			}
		case rec != nil && rec.Late && rec.CaptureError != "":
			conflict("the base of this path could not be recorded before the source changed (" + rec.CaptureError + "), so strata will not overwrite the source: merge it by hand")
		case rec != nil && rec.Late:
			conflict("the source was modified after the World copied this path up, so its base is unknown; strata will not overwrite that edit: merge it by hand")
		case theirs.same(base) || (theirs.sameContent(base) && ours.typ == 0):
			if err := p.publish(c, base, ours, theirs, deleting, &ap, theirsOf); err != nil {
				conflict(err.Error())
			}
		case ours.typ == overlay.TypeFile && theirs.typ == overlay.TypeFile && (base.typ == overlay.TypeFile || base.typ == 0):
			if ours.streamed() || theirs.streamed() || base.streamed() {
				conflict(fmt.Sprintf("too large to merge (%d bytes) and changed in both the World and the source", max(ours.length(), theirs.length())))
				break
			}
			if diffview.IsBinary(ours.data) || diffview.IsBinary(theirs.data) || diffview.IsBinary(base.data) {
				conflict("binary file changed in both the World and the source")
				break
			}
			mr := diffview.Merge3(string(base.data), string(ours.data), string(theirs.data))
			if !mr.Clean {
				cf := Conflict{Path: c.Path, Reason: countOf(len(mr.Conflicts), "overlapping edit", "overlapping edits") + " in the World and the source", Regions: mr.Conflicts, Merged: mr.Merged, TheirsHash: theirs.hash()}
				if isSmallText(base, ours, theirs) {
					cf.Base, cf.Ours, cf.Theirs = string(base.data), string(ours.data), string(theirs.data)
				}
				p.conflicts = append(p.conflicts, cf)
				break
			}
			mode := ours.mode
			if ours.mode == base.mode {
				mode = theirs.mode // only the source changed the mode
			}
			merged := version{typ: overlay.TypeFile, mode: mode, data: []byte(mr.Merged)}
			if merged.same(theirs) {
				// The World's side adds nothing to the source (its change is
				// already there, or was reverted there since it was applied):
				// say so rather than report a merge that writes nothing new.
				ap.Action = "nothing"
				ap.Note = "the merge is the source's version: the World adds nothing to it since its base"
				break
			}
			if err := p.publish(c, base, merged, theirs, deleting, &ap, theirsOf); err != nil {
				conflict(err.Error())
			}
			ap.Action = "merge"
			p.takeOn[c.Path] = takeOn{base: base, world: world, partial: partial}
		case ours.typ == overlay.TypeDir && theirs.typ == overlay.TypeDir:
			if err := p.publish(c, base, ours, theirs, deleting, &ap, theirsOf); err != nil {
				conflict(err.Error())
			}
		default:
			conflict(fmt.Sprintf("changed in both: the World has %s, the source now has %s, the base was %s", describe(ours), describe(theirs), describe(base)))
		}
		if !partial && ap.Action != "nothing" {
			p.whole[c.Path] = true
		}
		p.paths = append(p.paths, ap)
	}
	return p, nil
}

func specialNames(m fs.FileMode) []string {
	var out []string
	if m&fs.ModeSetuid != 0 {
		out = append(out, "setuid")
	}
	if m&fs.ModeSetgid != 0 {
		out = append(out, "setgid")
	}
	return out
}

func describe(v version) string {
	switch v.typ {
	case 0:
		return "nothing"
	case overlay.TypeFile:
		return fmt.Sprintf("a file (%d bytes)", v.length())
	case overlay.TypeSymlink:
		return "a symlink to " + v.target
	}
	return "a " + v.typ.String()
}

func isSmallText(vs ...version) bool {
	for _, v := range vs {
		if v.streamed() || len(v.data) > 256<<10 || diffview.IsBinary(v.data) {
			return false
		}
	}
	return true
}

// publish turns one decided path into publication ops with a last-moment
// check that the source still holds theirs.
func (p *plan) publish(c overlay.Change, base, ours, theirs version, deleting map[string]bool, ap *AppliedPath, theirsOf func(string) (version, error)) error {
	expect := func(op publish.PublishOp) publish.PublishOp {
		if theirs.typ == 0 {
			op.ExpectAbsent = true
		} else {
			op.ExpectHash = theirs.hash()
		}
		return op
	}
	// A path whose type changes is removed first.
	if theirs.typ != 0 && theirs.typ != ours.typ {
		switch theirs.typ {
		case overlay.TypeDir:
			p.ops = append(p.ops, publish.PublishOp{Path: c.Path, Kind: publish.OpRmdir})
		default:
			p.ops = append(p.ops, expect(publish.PublishOp{Path: c.Path, Kind: publish.OpDelete}))
		}
	}
	if special := ours.mode & (fs.ModeSetuid | fs.ModeSetgid); special != 0 && !p.allowSetuid && (ours.typ == overlay.TypeFile || ours.typ == overlay.TypeDir) {
		ours.mode &^= special
		what := strings.Join(specialNames(special), "/")
		note := what + " bit stripped (strata apply --allow-setuid publishes it)"
		if ap.Note != "" {
			note = ap.Note + "; " + note
		}
		ap.Note = note
		p.warnings = append(p.warnings, fmt.Sprintf("%s: %s in the World; published without that bit (strata apply --allow-setuid publishes it)", c.Path, what))
	}
	switch ours.typ {
	case 0:
		ap.Action = "delete"
		if theirs.typ == overlay.TypeDir {
			ap.Action = "rmdir"
		}
	case overlay.TypeFile:
		op := publish.PublishOp{Path: c.Path, Kind: publish.OpWrite, Data: ours.data, SourceFile: ours.file, ContentHash: ours.hash(), Mode: ours.mode}
		if theirs.typ == overlay.TypeFile {
			op = expect(op)
		}
		p.ops = append(p.ops, op)
		ap.Action = "write"
	case overlay.TypeSymlink:
		op := publish.PublishOp{Path: c.Path, Kind: publish.OpSymlink, Target: ours.target}
		if theirs.typ == overlay.TypeSymlink {
			op = expect(op)
		}
		p.ops = append(p.ops, op)
		ap.Action = "symlink"
	case overlay.TypeDir:
		p.ops = append(p.ops, publish.PublishOp{Path: c.Path, Kind: publish.OpMkdir, Mode: ours.mode})
		ap.Action = "mkdir"
	default:
		return fmt.Errorf("cannot publish a %s", ours.typ)
	}
	p.written[c.Path] = ours
	return nil
}

// dropApplied removes whole-applied paths from the World's upper so it reads
// them from the source again. The World is unmounted meanwhile.
func (e *Engine) dropApplied(ctx context.Context, w *World, paths map[string]bool) ([]string, error) {
	lk, err := e.lockWorld(ctx, w.Name)
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	wasMounted := e.Mounted(w)
	if err := e.unmountLocked(ctx, w); err != nil {
		return nil, err
	}
	if err := e.quiesceGuest(ctx, w); err != nil {
		return nil, err
	}
	defer e.resumeGuest(ctx, w)
	var dropped []string
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(keys))) // children before parents
	for _, rel := range keys {
		if err := dropUpperPath(e.Paths.UpperOf(w), rel); err != nil {
			return dropped, err
		}
		dropped = append(dropped, rel)
	}
	_ = os.Remove(e.statCachePath(w.Name))
	if err := resetWorkDir(e.Paths.WorkOf(w)); err != nil {
		return dropped, err
	}
	if wasMounted {
		return dropped, e.mountLocked(ctx, w)
	}
	sort.Strings(dropped)
	return dropped, nil
}

// HistoryEntry is one publication, in history.jsonl of the state root.
type HistoryEntry struct {
	ID     string        `json:"id"`
	World  string        `json:"world"`
	Source string        `json:"source"`
	Time   time.Time     `json:"time"`
	Branch string        `json:"branch,omitempty"`
	Commit string        `json:"commit,omitempty"`
	Paths  []AppliedPath `json:"paths"`
}

func (e *Engine) historyPath() string { return filepath.Join(e.Paths.Root, "history.jsonl") }

func (e *Engine) appendHistory(h HistoryEntry) error {
	line, err := json.Marshal(h)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(e.historyPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}

// History lists every publication, oldest first.
func (e *Engine) History() ([]HistoryEntry, error) {
	data, err := os.ReadFile(e.historyPath())
	if errorsIsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []HistoryEntry
	for _, line := range bytes.Split(data, []byte("\n")) {
		var h HistoryEntry
		if len(line) > 0 && json.Unmarshal(line, &h) == nil {
			out = append(out, h)
		}
	}
	return out, nil
}

// dropUpperPath removes the World's own entry for rel from its upper (a file,
// symlink, whiteout, or a directory once empty) and any marker that spells
// its deletion in a FUSE dialect, so the path reads from the source again.
func dropUpperPath(upper, rel string) error {
	p := filepath.Join(upper, filepath.FromSlash(rel))
	for _, marker := range overlay.DeletionMarkers(overlay.DialectAuto, rel) {
		if err := os.RemoveAll(filepath.Join(upper, filepath.FromSlash(marker))); err != nil {
			return err
		}
	}
	st, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() {
		// Only an emptied directory goes: unpicked children stay in the World.
		if err := os.Remove(p); err != nil && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return err
		}
		return nil
	}
	return os.Remove(p)
}

// countOf is "1 thing" or "N things", for messages a person reads.
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
