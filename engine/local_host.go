package engine

import (
	"context"

	"github.com/stratahq/strata/engine/local"
	"github.com/stratahq/strata/overlay"
)

// localHost is the engine as the local runtime sees it (local.Host).
type localHost struct{ e *Engine }

var _ local.Host = localHost{}

func (h localHost) CheckSource(w *World) error { return h.e.CheckSource(w) }

func (h localHost) StartSession(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error) {
	return h.e.execLocal(ctx, w, o)
}

func (h localHost) Freeze(w *World) func() { return h.e.freezeWorld(w) }

func (h localHost) Writers(w *World, changes []overlay.Change) []WritingPath {
	return h.e.writersOf(w, changes)
}

func (h localHost) Usage(w *World, inits map[int]bool, res *Resources) {
	h.e.localUsage(w, inits, res)
}

func (localHost) ChooseMountBackend(b overlay.Backend) (overlay.Backend, error) {
	return chooseMountBackend(b)
}
