package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/store"
)

// Snapshots of a World with several trees: the source's upper is frozen
// into snapshots/<id>.manifest as always, each extra overlay tree's into
// snapshots/<id>@<tree>.manifest ('@' is in no snapshot id or tree name),
// all in one freeze. A snapshot of a World with one tree, and every
// snapshot made before trees existed, is read exactly as before.

// treeManifestPath is the manifest of one extra tree of snapshot id.
func (e *Engine) treeManifestPath(id, tree string) string {
	return filepath.Join(e.Paths.Snapshots(), id+"@"+tree+".manifest")
}

// snapshotIDOfManifest is the snapshot a manifest file belongs to.
func snapshotIDOfManifest(file string) (string, bool) {
	id, ok := strings.CutSuffix(file, ".manifest")
	if !ok {
		return "", false
	}
	id, _, _ = strings.Cut(id, "@")
	return id, true
}

// statCacheOf is the stat cache of the tree w stands for.
func (e *Engine) statCacheOf(w *World) string {
	if w.View == "" {
		return e.statCachePath(w.Name)
	}
	return filepath.Join(e.Paths.Tree(w.Name, w.View), "statcache")
}

// treeCapture is one extra tree frozen by a snapshot.
type treeCapture struct {
	view  *World
	m     *store.Manifest
	cache *store.StatCache
}

// captureTrees freezes every extra overlay tree of w (its sessions are
// paused by the caller) and adds their counts to stats.
func (e *Engine) captureTrees(ctx context.Context, st *store.Store, w *World, build *overlay.Ignore, stats *store.CaptureStats) ([]treeCapture, error) {
	var out []treeCapture
	for _, v := range treeViews(w)[1:] {
		cache, err := store.LoadStatCache(e.statCacheOf(v))
		if err != nil {
			cache = store.NewStatCache()
		}
		m, ts, err := store.CaptureUpperWith(ctx, st, e.Paths.UpperOf(v), v.Dialect, cache, store.CaptureOptions{BuildState: build})
		if err != nil {
			return nil, fmt.Errorf("tree %s: %w", v.View, err)
		}
		stats.Files += ts.Files
		stats.Dirs += ts.Dirs
		stats.Symlinks += ts.Symlinks
		stats.Whiteouts += ts.Whiteouts
		stats.Opaque += ts.Opaque
		stats.Hashed += ts.Hashed
		stats.BuildState += ts.BuildState
		stats.NewObjects += ts.NewObjects
		stats.NewBytes += ts.NewBytes
		out = append(out, treeCapture{view: v, m: m, cache: cache})
	}
	return out, nil
}

// writeTreeManifests writes the trees' manifests of snapshot id, before
// the source's manifest and the timeline entry that make it a snapshot.
func (e *Engine) writeTreeManifests(id string, trees []treeCapture) error {
	for _, tc := range trees {
		if err := store.WriteManifest(e.treeManifestPath(id, tc.view.View), tc.m); err != nil {
			return fmt.Errorf("tree %s: %w", tc.view.View, err)
		}
	}
	return nil
}

func (e *Engine) saveTreeCaches(trees []treeCapture) {
	for _, tc := range trees {
		if err := tc.cache.Save(e.statCacheOf(tc.view)); err != nil {
			e.Log.Warn("save stat cache", "world", tc.view.Name, "tree", tc.view.View, "err", err)
		}
	}
}

// readTreeManifests reads the extra trees' manifests of snapshot id; one
// missing is an error naming the tree (a snapshot of a World with trees
// always has them all).
func (e *Engine) readTreeManifests(w *World, id string) (map[string]*store.Manifest, error) {
	out := map[string]*store.Manifest{}
	for _, v := range treeViews(w)[1:] {
		m, err := store.ReadManifest(e.treeManifestPath(id, v.View))
		if err != nil {
			return nil, fmt.Errorf("snapshot %s, tree %s: %w", id, v.View, err)
		}
		out[v.View] = m
	}
	return out, nil
}

// stagedTree is one extra tree's upper restored next to the live one.
type stagedTree struct {
	view   *World
	staged *store.StagedUpper
}

// stageTrees builds and verifies every extra tree's upper of a snapshot
// (Rollback), before anything of the World changes.
func (e *Engine) stageTrees(ctx context.Context, w *World, ms map[string]*store.Manifest) ([]stagedTree, error) {
	// A tree whose dir is gone (or now a link) could not be mounted again
	// after the swap: the rollback would land and still report failure.
	if err := e.checkTrees(w); err != nil {
		return nil, fmt.Errorf("%w; the World was not changed", err)
	}
	var out []stagedTree
	for _, v := range treeViews(w)[1:] {
		su, err := e.stageUpper(ctx, v, ms[v.View])
		if err != nil {
			discardTrees(out)
			return nil, fmt.Errorf("tree %s: %w", v.View, err)
		}
		out = append(out, stagedTree{view: v, staged: su})
	}
	return out, nil
}

func discardTrees(ts []stagedTree) {
	for _, t := range ts {
		_ = t.staged.Discard()
	}
}

// swapTrees puts the staged trees in place, the World unmounted (called
// by swapUpper right after the source's upper is swapped).
func (e *Engine) swapTrees(ts []stagedTree) error {
	var errs []error
	for _, t := range ts {
		upper := e.Paths.UpperOf(t.view)
		if err := t.staged.Swap(); err != nil {
			errs = append(errs, fmt.Errorf("tree %s: %w", t.view.View, err))
			continue
		}
		if err := store.RemoveRestoreLeftovers(upper); err != nil {
			e.Log.Warn("remove the replaced upper", "world", t.view.Name, "tree", t.view.View, "err", err)
		}
		_ = os.Remove(e.statCacheOf(t.view))
		if err := resetWorkDir(e.Paths.WorkOf(t.view)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// touchTrees and carryTrees are the build-state keep of a rollback for the
// extra trees (see Rollback): rolled-back sources get the current time,
// build outputs move over to the restored upper.
func (e *Engine) touchTrees(ts []stagedTree, saved, target map[string]*store.Manifest, build *overlay.Ignore, now time.Time) (int, error) {
	n := 0
	for _, t := range ts {
		k, err := store.TouchRestored(t.staged.Dir(), t.view.Source, saved[t.view.View], target[t.view.View], build, now)
		if err != nil {
			return n, fmt.Errorf("tree %s: %w", t.view.View, err)
		}
		n += k
	}
	return n, nil
}

func (e *Engine) carryTrees(ts []stagedTree, build *overlay.Ignore) (kept, dropped int, err error) {
	for i, t := range ts {
		k, d, cerr := store.CarryBuildState(e.Paths.UpperOf(t.view), t.staged.Dir(), t.view.Dialect, build)
		kept, dropped = kept+k, dropped+d
		if cerr != nil {
			// Put back what moved, in this tree and the ones before it.
			for _, b := range ts[:i+1] {
				if _, _, berr := store.CarryBuildState(b.staged.Dir(), e.Paths.UpperOf(b.view), b.view.Dialect, build); berr != nil {
					cerr = errors.Join(cerr, fmt.Errorf("put build state of tree %s back: %w", b.view.View, berr))
				}
			}
			return kept, dropped, fmt.Errorf("tree %s: %w", t.view.View, cerr)
		}
	}
	return kept, dropped, nil
}

// restoreTreesInto restores every extra tree of snapshot id into the
// staged World dir of a fork.
func (e *Engine) restoreTreesInto(ctx context.Context, st *store.Store, from *World, ms map[string]*store.Manifest, worldDir string, nw *World) error {
	for _, v := range treeViews(from)[1:] {
		upper := filepath.Join(world.TreeDirIn(worldDir, v.View), "upper")
		if err := store.RestoreUpperWith(ctx, st, ms[v.View], upper, nw.Dialect, store.RestoreOptions{UserXattr: !isRoot(), Lower: v.Source, NoSync: true}); err != nil {
			return fmt.Errorf("tree %s: %w", v.View, err)
		}
	}
	return nil
}

// treeDeltas are the differences of every extra tree between two
// snapshots (b nil: the World now), each path written NAME:path.
func (e *Engine) treeDeltas(ctx context.Context, w *World, a string, b string) ([]store.ManifestDelta, error) {
	ma, err := e.readTreeManifests(w, a)
	if err != nil {
		return nil, err
	}
	var mb map[string]*store.Manifest
	if b != "" {
		if mb, err = e.readTreeManifests(w, b); err != nil {
			return nil, err
		}
	}
	var out []store.ManifestDelta
	for _, v := range treeViews(w)[1:] {
		now := mb[v.View]
		if now == nil {
			if now, err = e.captureNow(ctx, v); err != nil {
				return nil, err
			}
		}
		for _, d := range store.DiffManifests(ma[v.View], now) {
			d.Path = TreePath(v.View, d.Path)
			out = append(out, d)
		}
	}
	return out, nil
}

// snapIDOf resolves a SnapDiff operand to a snapshot id ("" = now).
func snapIDOf(tl *Timeline, ref string) string {
	if ref == "" {
		return ""
	}
	if s, err := tl.Find(ref); err == nil {
		return s.ID
	}
	return ""
}

// unsavedTreeChanges is unsavedChanges over every overlay tree of w: the
// changes (no snapshot yet) or the differences from the head snapshot.
func (e *Engine) unsavedTreeChanges(ctx context.Context, w *World, cs *overlay.ChangeSet) (int, error) {
	tl, err := e.Timeline(w.Name)
	if err != nil {
		return 0, err
	}
	if tl.Head == "" {
		n := len(cs.Changes)
		for _, v := range treeViews(w)[1:] {
			tcs, err := e.Changes(ctx, v, false)
			if err != nil {
				return 0, err
			}
			n += len(tcs.Changes)
		}
		return n, nil
	}
	head, err := store.ReadManifest(e.manifestPath(tl.Head))
	if err != nil {
		return 0, err
	}
	now, err := e.captureNow(ctx, w)
	if err != nil {
		return 0, err
	}
	td, err := e.treeDeltas(ctx, w, tl.Head, "")
	if err != nil {
		return 0, err
	}
	return len(store.DiffManifests(head, now)) + len(td), nil
}
