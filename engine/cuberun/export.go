package cuberun

import (
	"context"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/overlay"
)

// What the engine (and its tests, which drive the runtime through the
// engine against cube/cubetest) call besides the Runtime interface.

// Client is the runtime's cube client: the one New was given, else one per
// deployment made from the config on first use.
func (e *Runtime) Client() (*cube.Client, error) { return e.cubeClient() }

// Sandbox is the World's sandbox as last recorded (nil: none).
func (e *Runtime) Sandbox(w *World) *cube.Sandbox { return e.cubeSandbox(w) }

// Doctor checks the deployment for strata doctor.
func (e *Runtime) Doctor(ctx context.Context) CubeDoctor { return e.cubeDoctor(ctx) }

// Configured reports whether the runtime has a cube to talk to.
func (e *Runtime) Configured() bool { return e.cubeConfigured() }

// TemplatesFile is where the templates strata built are recorded.
func (e *Runtime) TemplatesFile() string { return e.cubeTemplatesFile() }

// SetupGuestOverlay mounts the World's overlay inside sandbox sb (force:
// even when one is mounted) and reports the driver and whether it mounted.
func (e *Runtime) SetupGuestOverlay(ctx context.Context, c *cube.Client, w *World, sb *cube.Sandbox, force bool, env map[string]string) (overlay.Backend, bool, error) {
	return e.setupGuestOverlay(ctx, c, w, sb, force, env)
}

// UnmountGuest and RemountGuest are Quiesce and Resume with their errors.
func (e *Runtime) UnmountGuest(ctx context.Context, w *World) error {
	return e.cubeUnmountGuest(ctx, w)
}

func (e *Runtime) RemountGuest(ctx context.Context, w *World) error {
	return e.cubeRemountGuest(ctx, w)
}

// TemplateOf is the template a World's sandbox was (or will be) made from.
func TemplateOf(w *World) string { return cubeTemplateOf(w) }
