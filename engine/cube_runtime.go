package engine

import (
	"context"
	"errors"
)

// errCubeUnavailable is returned until the cube runtime is wired in.
var errCubeUnavailable = errors.New("the cube backend is not available in this build yet; use --backend local")

func (e *Engine) planCube(ctx context.Context, w *World, o CreateOptions) error {
	return errCubeUnavailable
}

func (e *Engine) realizeCubeBestEffort(ctx context.Context, w *World) {}

func (e *Engine) execCube(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error) {
	return SessionMeta{}, errCubeUnavailable
}

func (e *Engine) stopWorldRuntime(ctx context.Context, w *World) error { return nil }

func (e *Engine) cubeDoctor(ctx context.Context) CubeDoctor {
	if e.Config.Cube.Endpoint == "" {
		return CubeDoctor{Status: "not configured"}
	}
	return CubeDoctor{Endpoint: e.Config.Cube.Endpoint, Status: "not checked"}
}

func (e *Engine) cubeSnapshot(ctx context.Context, w *World, snapID string) (string, error) {
	return "", errCubeUnavailable
}

func (e *Engine) cubeRollback(ctx context.Context, w *World, target *Snapshot) error {
	return errCubeUnavailable
}

func cubeTemplateOf(w *World) string {
	if w.Cube == nil {
		return ""
	}
	return w.Cube.Template
}
