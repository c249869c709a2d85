package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ReadyMessage is what the init sends back once the command runs or failed to start.
type ReadyMessage struct {
	Meta Meta `json:"meta"`
}

// AwaitReady waits for the message with which a session's init (or a cube
// session runner) says the command runs or failed to start.
func AwaitReady(ctx context.Context, proc *os.Process, exited <-chan error, readyR io.Reader, who, id, dir string, fail func(error) (Meta, error)) (Meta, error) {
	readyCh := make(chan readyResult, 1)
	go func() {
		var msg ReadyMessage
		err := json.NewDecoder(readyR).Decode(&msg)
		readyCh <- readyResult{msg, err}
	}()
	select {
	case <-ctx.Done():
		_ = proc.Kill()
		DrainErr(exited)
		return fail(ctx.Err())
	case r := <-readyCh:
		if r.err != nil {
			DrainErr(exited)
			// The init records the command as running just before it says
			// so on the ready pipe: if it died in between, the command did
			// start, and the session is lost, not a start that failed.
			if m, err := ReadMeta(dir); err == nil && m.PID > 0 && (m.State == Running || m.State == Lost) {
				return m, nil
			}
			return fail(fmt.Errorf("%s ended before the command started: %s", who, initFailure(dir, r.err)))
		}
		if r.msg.Meta.State == Failed {
			return r.msg.Meta, fmt.Errorf("start session %s: %s: %w", id, r.msg.Meta.Error, ErrStartFailed)
		}
		return r.msg.Meta, nil
	}
}

type readyResult struct {
	msg ReadyMessage
	err error
}

// initFailure explains an init that died early, from what it wrote to init.log.
func initFailure(dir string, readErr error) string {
	log, _ := os.ReadFile(filepath.Join(dir, InitLogFile))
	log = bytes.TrimSpace(log)
	if len(log) == 0 {
		return readErr.Error()
	}
	if len(log) > 2000 {
		log = log[:2000]
	}
	return string(log)
}
