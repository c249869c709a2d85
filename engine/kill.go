package engine

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/session"
)

// KillSession sends sig to the session command's process group.
func KillSession(dir string, sig syscall.Signal) error {
	meta, err := ReadSessionMeta(dir)
	if err != nil {
		return fmt.Errorf("kill session: %w", err)
	}
	if meta.State.Ended() {
		return fmt.Errorf("kill session %s: %w", meta.ID, ErrSessionNotRunning)
	}
	if meta.PID <= 0 {
		return fmt.Errorf("kill session %s: command pid not recorded yet", meta.ID)
	}
	// meta.PID is the command, or a runner relaying to it (see sendSignal).
	session.MarkKilled(dir)
	sig = runtimeOf(nil, meta.Runtime).SendSignal(sig)
	err = unix.Kill(-meta.PID, sig)
	if errors.Is(err, unix.ESRCH) {
		// The command left its process group; signal it directly.
		err = unix.Kill(meta.PID, sig)
	}
	if err != nil && !errors.Is(err, unix.ESRCH) {
		session.UnmarkKilled(dir)
		return fmt.Errorf("kill session %s: %w", meta.ID, err)
	}
	return nil
}
