package engine

import (
	"context"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/overlay"
)

// The cube runtime's parts the engine's cube tests reach into, by the names
// they had when the runtime lived in package engine.

func (e *Engine) cubeClient() (*cube.Client, error)         { return e.cube.Client() }
func (e *Engine) cubeSandbox(w *World) *cube.Sandbox        { return e.cube.Sandbox(w) }
func (e *Engine) cubeDoctor(ctx context.Context) CubeDoctor { return e.cube.Doctor(ctx) }
func (e *Engine) cubeTemplatesFile() string                 { return e.cube.TemplatesFile() }

func (e *Engine) cubeFreeze(ctx context.Context, w *World) func() { return e.cube.Freeze(ctx, w) }

func (e *Engine) cubeUnmountGuest(ctx context.Context, w *World) error {
	return e.cube.UnmountGuest(ctx, w)
}

func (e *Engine) cubeRemountGuest(ctx context.Context, w *World) error {
	return e.cube.RemountGuest(ctx, w)
}

func (e *Engine) setupGuestOverlay(ctx context.Context, c *cube.Client, w *World, sb *cube.Sandbox, force bool, env map[string]string) (overlay.Backend, bool, error) {
	return e.cube.SetupGuestOverlay(ctx, c, w, sb, force, env)
}
