package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// fileLock is an flock(2) on a file; released when the process dies, so a
// crashed strata never leaves a World locked.
type fileLock struct{ f *os.File }

// lockFile takes an exclusive flock on path, waiting until ctx is done.
func lockFile(ctx context.Context, path string) (*fileLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	delay := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: another strata process holds it: %w", path, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

func (l *fileLock) Unlock() {
	if l != nil && l.f != nil {
		_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}

// lockWorld serialises mutations of one World across processes.
func (e *Engine) lockWorld(ctx context.Context, name string) (*fileLock, error) {
	return lockFile(ctx, filepath.Join(e.Paths.Worlds(), "."+name+".lock"))
}

// lockedWorld takes the World's lock and reads it; the caller defers unlock.
func (e *Engine) lockedWorld(ctx context.Context, name string) (*World, func(), error) {
	lk, err := e.lockWorld(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	w, err := e.World(name)
	if err != nil {
		lk.Unlock()
		return nil, nil, err
	}
	return w, lk.Unlock, nil
}
