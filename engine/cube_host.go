package engine

import (
	"context"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/cuberun"
)

// cubeHost is the engine as the cube runtime sees it (cuberun.Host).
type cubeHost struct{ e *Engine }

var _ cuberun.Host = cubeHost{}

func (h cubeHost) Settings() cuberun.Settings {
	c := h.e.Config
	return cuberun.Settings{
		Cube: c.Cube, Boundary: c.Boundary, EnvRedact: c.EnvRedact, Isolation: c.Isolation,
		AutoSnapshot: c.AutoSnapshot, Path: c.Path(),
	}
}

func (h cubeHost) World(name string) (*World, error) { return h.e.World(name) }

func (h cubeHost) LockWorld(ctx context.Context, name string) (*fileLock, error) {
	return h.e.lockWorld(ctx, name)
}

func (h cubeHost) LockedWorld(ctx context.Context, name string) (*World, func(), error) {
	return h.e.lockedWorld(ctx, name)
}

func (h cubeHost) SessionDir(world, id string) string { return h.e.SessionDir(world, id) }

func (h cubeHost) RunningSessions(w *World) []string { return h.e.runningSessions(w) }

func (h cubeHost) StopSessions(ctx context.Context, w *World, ids []string) (int, error) {
	return h.e.stopSessions(ctx, w, ids)
}

func (h cubeHost) SnapshotBeforeExec(ctx context.Context, world string, argv []string) error {
	_, err := h.e.Snapshot(ctx, world, SnapshotOptions{Message: "before exec: " + shellQuote(argv), Auto: true})
	return err
}

func (h cubeHost) RuntimeSnapshots(world string) ([]string, error) {
	tl, err := h.e.Timeline(world)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(tl.Snapshots))
	for _, s := range tl.Snapshots {
		ids = append(ids, s.Cube)
	}
	return ids, nil
}

func (h cubeHost) SessionStarted(ctx context.Context, world, id string, detail map[string]any) {
	h.e.activity(ctx, Event{Type: EventSessionStarted, World: world, Session: id, Detail: detail})
}

func (h cubeHost) SessionEnded(ctx context.Context, world, id string, detail map[string]any) {
	h.e.activity(ctx, Event{Type: EventSessionEnded, World: world, Session: id, Detail: detail})
}

func (h cubeHost) SessionNetwork(w *World, iso Isolation, o ExecOptions) (boundary.Network, error) {
	return h.e.sessionNetwork(w, iso, o)
}

func (h cubeHost) EgressAllowlist(world string) (boundary.Allowlist, error) {
	return h.e.EgressAllowlist(world)
}

// CubeCluster describes the cube deployment (templates, nodes).
func (e *Engine) CubeCluster(ctx context.Context) (CubeCluster, error) {
	return e.cube.CubeCluster(ctx)
}

// The cube runtime's types and entry points, under the names engine's
// callers have always used.
type (
	CubeConfig        = cuberun.CubeConfig
	CubeTemplate      = cuberun.CubeTemplate
	CubeResources     = cuberun.CubeResources
	CubeDoctor        = cuberun.CubeDoctor
	CubeCluster       = cuberun.CubeCluster
	BuiltCubeTemplate = cuberun.BuiltCubeTemplate
	GuestOverlayError = cuberun.GuestOverlayError
)

// CubeSessionArg is the hidden command that runs a cube session's runner.
const CubeSessionArg = cuberun.CubeSessionArg

var (
	ErrCubeNotConfigured   = cuberun.ErrCubeNotConfigured
	ErrNoTemplateFits      = cuberun.ErrNoTemplateFits
	ErrCubeTemplateUnknown = cuberun.ErrCubeTemplateUnknown

	ResolveCubeTemplate = cuberun.ResolveCubeTemplate
	CubeSessionMain     = cuberun.CubeSessionMain
)
