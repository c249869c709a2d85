package engine

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/stratahq/strata/engine/baseidx"
	"github.com/stratahq/strata/overlay"
)

// The base index lives in the leaf package engine/baseidx (the local
// runtime's session watcher records bases too); these aliases keep engine's
// names.
type (
	BaseRecord = baseidx.Record
	BaseIndex  = baseidx.Index
)

// CaptureBase records the base of rel (baseidx.Capture).
var CaptureBase = baseidx.Capture

func (e *Engine) bases(name string) BaseIndex {
	return BaseIndex{Dir: filepath.Join(e.Paths.World(name), "bases")}
}

// CaptureBases records a base for every changed path that lacks one. The
// engine calls it at status, snapshot, session end and before publishing.
// It stops at the first path that fails.
func (e *Engine) CaptureBases(ctx context.Context, w *World, cs *overlay.ChangeSet) (int, error) {
	n, failed, err := e.captureBasesEach(ctx, w, cs)
	if err != nil {
		return n, err
	}
	for _, c := range cs.Changes {
		if err := failed[c.Path]; err != nil {
			return n, err
		}
	}
	return n, nil
}

// captureBasesEach tries every changed path on its own: one path that
// cannot be captured does not keep the others from being recorded. err is
// what stops them all (the object store, ctx).
func (e *Engine) captureBasesEach(ctx context.Context, w *World, cs *overlay.ChangeSet) (int, map[string]error, error) {
	st, err := e.store()
	if err != nil {
		return 0, nil, err
	}
	idx := e.basesOf(w)
	_, marked := idx.Incomplete()
	n := 0
	failed := map[string]error{}
	for _, c := range cs.Changes {
		if err := ctx.Err(); err != nil {
			return n, failed, err
		}
		ok, err := CaptureBase(st, idx, w.Source, e.Paths.UpperOf(w), c.Path)
		if err != nil {
			failed[c.Path] = err
			continue
		}
		if ok {
			n++
		}
	}
	if marked && len(failed) == 0 {
		idx.ClearIncomplete()
	}
	return n, failed, nil
}

// baseContent returns the base text of a path: the captured base, or when
// none was captured, the source now (capturing it first).
func (e *Engine) baseOf(ctx context.Context, w *World, rel string) (*BaseRecord, []byte, error) {
	st, err := e.store()
	if err != nil {
		return nil, nil, err
	}
	idx := e.basesOf(w)
	r, err := idx.Get(rel)
	if err != nil {
		return nil, nil, fmt.Errorf("base of %s: %w", rel, err)
	}
	if r == nil {
		if _, err := CaptureBase(st, idx, w.Source, e.Paths.UpperOf(w), rel); err != nil {
			return nil, nil, err
		}
		if r, err = idx.Get(rel); err != nil {
			return nil, nil, fmt.Errorf("base of %s: %w", rel, err)
		}
		if r == nil {
			return nil, nil, fmt.Errorf("base of %s: the record just captured cannot be read back", rel)
		}
	}
	if r.Object == "" {
		return r, nil, nil
	}
	data, err := st.ReadAll(r.Object)
	if err != nil {
		return r, nil, fmt.Errorf("base of %s: %w", rel, err)
	}
	return r, data, nil
}

// basesOf is the base index of the tree w stands for (World.TreeView).
func (e *Engine) basesOf(w *World) BaseIndex { return BaseIndex{Dir: e.Paths.BasesOf(w)} }
