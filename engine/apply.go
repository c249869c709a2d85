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
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/overlay"
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
	Path   string `json:"path"`
	Action string `json:"action"` // write, merge, symlink, mkdir, delete, rmdir, nothing
	Hunks  []int  `json:"hunks,omitempty"`
	Note   string `json:"note,omitempty"`
}

// ApplyResult says what an apply did (or, with DryRun, would do).
type ApplyResult struct {
	ID       string        `json:"id,omitempty"`
	World    string        `json:"world"`
	Source   string        `json:"source"`
	DryRun   bool          `json:"dry_run"`
	Paths    []AppliedPath `json:"paths"`
	Branch   string        `json:"branch,omitempty"`
	Commit   string        `json:"commit,omitempty"`
	Dropped  []string      `json:"dropped,omitempty"`
	Warnings []string      `json:"warnings,omitempty"` // for the person, of a publication that succeeded: stripped setuid bits, a World that kept its version
	Duration string        `json:"duration"`
}

// Conflict is one path that cannot be published as picked.
type Conflict struct {
	Path    string              `json:"path"`
	Reason  string              `json:"reason"`
	Regions []diffview.Conflict `json:"regions,omitempty"`
	Base    string              `json:"base,omitempty"`
	Ours    string              `json:"ours,omitempty"`
	Theirs  string              `json:"theirs,omitempty"`
	Merged  string              `json:"merged,omitempty"` // with conflict markers
	// TheirsHash identifies the source version the conflict was found
	// against; pass it back in Pick.TheirsHash with a resolution.
	TheirsHash string `json:"theirs_hash,omitempty"`
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
	fmt.Fprintf(&b, "apply world %q: %d conflict(s), nothing was written:", e.World, len(e.Conflicts))
	for _, c := range e.Conflicts {
		fmt.Fprintf(&b, "\n  %s: %s", c.Path, c.Reason)
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

// readSide reads rel under root without following symlinks in any component.
func readSide(root, rel string) (version, error) {
	st, err := overlay.LstatBeneath(root, rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return version{}, nil
	}
	if err != nil {
		return version{}, err
	}
	v := version{typ: overlay.FileTypeOf(st.Mode()), mode: st.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
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
	v := version{typ: ent.Type, mode: ent.Mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), target: ent.Target}
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
	return version{typ: r.Type, mode: fs.FileMode(r.Mode&0o777) | specialFromBits(r.Mode), data: data, target: r.Target}
}

func specialFromBits(b uint32) fs.FileMode {
	var m fs.FileMode
	if b&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if b&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if b&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
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
	ops       []overlay.PublishOp
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
	if err := e.captureAllBases(ctx, w, cs); err != nil {
		return nil, fmt.Errorf("apply world %q: capture bases: %w", name, err)
	}
	res := &ApplyResult{World: name, Source: w.Source, DryRun: o.DryRun}
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
	idx := e.bases(name)
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	for rel, v := range p.written {
		if keepBase[rel] {
			continue
		}
		rec := BaseRecord{Path: rel, CapturedAt: time.Now().UTC(), Absent: v.typ == 0, Type: v.typ, Mode: ModeBits(v.mode), Target: v.target}
		if v.typ == overlay.TypeFile {
			if v.streamed() {
				// The source now holds exactly the checked content.
				rec.Object = overlay.ObjectID(v.sum)
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
	res.Paths, res.Warnings = p.paths, p.warnings
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
	pr, err := overlay.Publish(ctx, w.Source, e.Paths.Journal(), p.ops, overlay.PublishOptions{})
	if err == nil {
		res.ID = pr.ID
		return p, false, nil
	}
	var stale *overlay.StaleError
	if errors.As(err, &stale) {
		cs := &ConflictError{World: name}
		for _, sp := range stale.Paths {
			cs.Conflicts = append(cs.Conflicts, Conflict{Path: sp.Path, Reason: "the source changed while the publication was prepared; run apply again"})
		}
		return p, false, cs
	}
	var changed *overlay.ContentError
	if errors.As(err, &changed) {
		if attempt < captureAttempts {
			e.Log.Debug("apply: a streamed file changed before it was staged, capturing again", "world", name, "path", changed.Path)
			return p, true, nil
		}
		return nil, false, fmt.Errorf("apply world %q: the World kept changing %s while it was published; nothing was written; wait for its writer or stop it, then apply again: %w", name, changed.Path, err)
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
// cs is w's change set, already read by the caller.
func (e *Engine) captureAllBases(ctx context.Context, w *World, cs *overlay.ChangeSet) error {
	ws, err := e.Worlds()
	if err != nil {
		return err
	}
	for _, other := range ws {
		if other.Source != w.Source {
			continue
		}
		ocs := cs
		if other.Name != w.Name {
			if ocs, err = e.Changes(ctx, other, false); err != nil {
				return err
			}
		}
		if _, err := e.CaptureBases(ctx, other, ocs); err != nil {
			return err
		}
	}
	return nil
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
				cf := Conflict{Path: c.Path, Reason: fmt.Sprintf("%d overlapping edit(s) in the World and the source", len(mr.Conflicts)), Regions: mr.Conflicts, Merged: mr.Merged, TheirsHash: theirs.hash()}
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
	expect := func(op overlay.PublishOp) overlay.PublishOp {
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
			p.ops = append(p.ops, overlay.PublishOp{Path: c.Path, Kind: overlay.OpRmdir})
		default:
			p.ops = append(p.ops, expect(overlay.PublishOp{Path: c.Path, Kind: overlay.OpDelete}))
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
		op := overlay.PublishOp{Path: c.Path, Kind: overlay.OpWrite, Data: ours.data, SourceFile: ours.file, ContentHash: ours.hash(), Mode: ours.mode}
		if theirs.typ == overlay.TypeFile {
			op = expect(op)
		}
		p.ops = append(p.ops, op)
		ap.Action = "write"
	case overlay.TypeSymlink:
		op := overlay.PublishOp{Path: c.Path, Kind: overlay.OpSymlink, Target: ours.target}
		if theirs.typ == overlay.TypeSymlink {
			op = expect(op)
		}
		p.ops = append(p.ops, op)
		ap.Action = "symlink"
	case overlay.TypeDir:
		p.ops = append(p.ops, overlay.PublishOp{Path: c.Path, Kind: overlay.OpMkdir, Mode: ours.mode})
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
		if err := dropUpperPath(e.Paths.Upper(w.Name), rel); err != nil {
			return dropped, err
		}
		dropped = append(dropped, rel)
	}
	_ = os.Remove(e.statCachePath(w.Name))
	if err := resetWorkDir(e.Paths.Work(w.Name)); err != nil {
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
	dir, base := filepath.Split(p)
	for _, marker := range []string{
		filepath.Join(dir, ".wh."+base),
		filepath.Join(upper, ".unionfs-fuse", filepath.FromSlash(rel)+"_HIDDEN~"),
		filepath.Join(upper, ".unionfs", filepath.FromSlash(rel)+"_HIDDEN~"),
	} {
		if err := os.RemoveAll(marker); err != nil {
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
