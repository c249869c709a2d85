package engine

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
)

var lookPath = exec.LookPath

// EnsureMounted mounts the World's merged view on the host if it is not
// mounted yet. Sessions bind it over the source path in their own mount
// namespace; one host mount serves every session of the World, because two
// overlay mounts sharing an upper are undefined behaviour.
func (e *Engine) EnsureMounted(ctx context.Context, w *World) error {
	merged := e.Paths.Merged(w.Name)
	if _, ok, err := mount.MountedAt(merged); err != nil {
		return fmt.Errorf("mount world %q: %w", w.Name, err)
	} else if ok {
		return nil
	}
	lk, err := e.lockWorld(ctx, w.Name)
	if err != nil {
		return err
	}
	defer lk.Unlock()
	return e.mountLocked(ctx, w)
}

func (e *Engine) mountLocked(ctx context.Context, w *World) error {
	merged := e.Paths.Merged(w.Name)
	if _, ok, err := mount.MountedAt(merged); err != nil {
		return fmt.Errorf("mount world %q: %w", w.Name, err)
	} else if ok {
		return nil
	}
	if !e.runtimeFor(w).HostView() {
		return fmt.Errorf("mount world %q: it runs on the %s backend", w.Name, w.Backend)
	}
	spec := mount.MountSpec{
		Lower:     w.Source,
		Upper:     e.Paths.Upper(w.Name),
		Work:      e.Paths.Work(w.Name),
		Target:    merged,
		Backend:   w.MountBackend,
		UserXattr: w.MountBackend == overlay.BackendKernel && !isRoot(),
	}
	if err := mount.Mount(ctx, spec); err != nil {
		return fmt.Errorf("mount world %q: %w (strata doctor shows which backends work)", w.Name, err)
	}
	_ = mount.WriteMountRecord(e.Paths.World(w.Name), mount.MountRecord{
		Backend: w.MountBackend, Dialect: w.Dialect, Target: merged, MountedAt: time.Now().UTC(),
	})
	return nil
}

// unmountLocked takes the World's merged view down; the caller holds the lock.
func (e *Engine) unmountLocked(ctx context.Context, w *World) error {
	merged := e.Paths.Merged(w.Name)
	_, ok, err := mount.MountedAt(merged)
	if err != nil || !ok {
		return err
	}
	if err := mount.Unmount(ctx, merged); err != nil {
		return fmt.Errorf("unmount world %q: %w", w.Name, err)
	}
	return nil
}

// Mounted reports whether the World's merged view is mounted.
func (e *Engine) Mounted(w *World) bool { return e.mountedAt(e.Paths.Merged(w.Name)) }

func (e *Engine) mountedAt(merged string) bool {
	_, ok, _ := mount.MountedAt(merged)
	return ok
}
