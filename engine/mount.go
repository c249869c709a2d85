package engine

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
)

var lookPath = exec.LookPath

// EnsureMounted mounts the World's merged view on the host if it is not
// mounted yet, and the view of each of its extra overlay trees. Sessions
// bind them over the source path (and the trees' paths) in their own mount
// namespace; one host mount serves every session of the World, because two
// overlay mounts sharing an upper are undefined behaviour.
func (e *Engine) EnsureMounted(ctx context.Context, w *World) error {
	if ok, err := e.allMounted(w); err != nil {
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

// allMounted reports whether every overlay tree of w is mounted (a mount
// or unmount of a tree view acts on that tree only: treeViews).
func (e *Engine) allMounted(w *World) (bool, error) {
	for _, v := range treeViews(w) {
		if _, ok, err := mount.MountedAt(e.Paths.MergedOf(v)); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func (e *Engine) mountLocked(ctx context.Context, w *World) error {
	if !e.runtimeFor(w).HostView() {
		return fmt.Errorf("mount world %q: it runs on the %s backend", w.Name, w.Backend)
	}
	for _, v := range treeViews(w) {
		if err := e.mountTreeLocked(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) mountTreeLocked(ctx context.Context, w *World) error {
	merged := e.Paths.MergedOf(w)
	if _, ok, err := mount.MountedAt(merged); err != nil {
		return fmt.Errorf("mount world %q: %w", w.Name, err)
	} else if ok {
		return nil
	}
	spec := mount.MountSpec{
		Lower:     w.Source,
		Upper:     e.Paths.UpperOf(w),
		Work:      e.Paths.WorkOf(w),
		Target:    merged,
		Backend:   w.MountBackend,
		UserXattr: w.MountBackend == overlay.BackendKernel && !isRoot(),
	}
	if err := mount.Mount(ctx, spec); err != nil {
		if w.View != "" {
			return fmt.Errorf("mount tree %s of world %q: %w (strata doctor shows which backends work)", w.View, w.Name, err)
		}
		return fmt.Errorf("mount world %q: %w (strata doctor shows which backends work)", w.Name, err)
	}
	_ = mount.WriteMountRecord(filepath.Dir(merged), mount.MountRecord{
		Backend: w.MountBackend, Dialect: w.Dialect, Target: merged, MountedAt: time.Now().UTC(),
	})
	return nil
}

// unmountLocked takes the World's merged views down (only the tree's, for
// a tree view); the caller holds the lock.
func (e *Engine) unmountLocked(ctx context.Context, w *World) error {
	// A resident init holds the views (and the home layer) mounted in its
	// namespace: it goes first, so a remount is the only overlay on them.
	// One that still runs sessions ends with them (as their own inits
	// would keep the views they hold): no wait for it.
	wait := 2 * time.Second
	if len(e.runningSessions(w)) > 0 {
		wait = 0
	}
	RetireResidents(e.Paths.World(w.Name), wait)
	views := treeViews(w)
	for i := len(views) - 1; i >= 0; i-- {
		merged := e.Paths.MergedOf(views[i])
		_, ok, err := mount.MountedAt(merged)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := mount.Unmount(ctx, merged); err != nil {
			return fmt.Errorf("unmount world %q: %w", w.Name, err)
		}
	}
	return nil
}

// Mounted reports whether the World's merged view (a tree view's) is mounted.
func (e *Engine) Mounted(w *World) bool { return e.mountedAt(e.Paths.MergedOf(w)) }

func (e *Engine) mountedAt(merged string) bool {
	_, ok, _ := mount.MountedAt(merged)
	return ok
}
