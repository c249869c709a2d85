package engine

import (
	"context"
)

// lockWorld serialises mutations of one World across processes.
func (e *Engine) lockWorld(ctx context.Context, name string) (*fileLock, error) {
	return e.Paths.LockWorld(ctx, name)
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
