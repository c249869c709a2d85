package sandbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeRange is unix.CloseRange, replaceable by tests to take the fallback.
var closeRange = unix.CloseRange

// CloseOnExecFrom marks every file descriptor from lowfd up close-on-exec, so
// the command exec'd next inherits none of them: the caller's fd 7 opened on
// a host directory, the init's transcript and control fds. Safe in a Go
// process (its own fds stay usable until exec). Uses close_range(2) with
// CLOSE_RANGE_CLOEXEC (Linux 5.11) and falls back to /proc/self/fd.
func CloseOnExecFrom(lowfd int) error {
	err := closeRange(uint(lowfd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("close inherited fds: close_range: %w", err)
	}
	fds, err := openFDs()
	if err != nil {
		return fmt.Errorf("close inherited fds: %w", err)
	}
	for _, fd := range fds {
		if fd < lowfd {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("close inherited fds: fd %d: %w", fd, err)
		}
	}
	return nil
}

// InheritableFDs lists the fds from lowfd up that a command exec'd now would
// inherit (not close-on-exec): what doctor and the tests check is empty.
func InheritableFDs(lowfd int) ([]int, error) {
	fds, err := openFDs()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, fd := range fds {
		if fd < lowfd {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			continue // the directory's own fd, closed by now
		}
		if flags&unix.FD_CLOEXEC == 0 {
			out = append(out, fd)
		}
	}
	return out, nil
}

func openFDs() ([]int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("list open fds: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list open fds: %w", err)
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil {
			out = append(out, fd)
		}
	}
	return out, nil
}

// CloseInherited closes every fd from 3 up that is not close-on-exec and
// not in keep: what the process that exec'd us leaked to it (Go opens its
// own fds close-on-exec; only what an exec meant to hand over is not). Best
// effort: a process whose fds cannot be listed keeps them.
func CloseInherited(keep []int) {
	fds, err := InheritableFDs(3)
	if err != nil {
		return
	}
	for _, fd := range fds {
		if !slices.Contains(keep, fd) {
			unix.Close(fd)
		}
	}
}
