package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"

	"github.com/stratahq/strata/engine/session"
)

// Tracing and Trace are STRATA_TRACE phase tracing (engine/session's).
var (
	Tracing = session.Tracing
	Trace   = session.Trace
)

// egressPushedFile records which list the World's running proxy was last
// handed: "PID STARTTIME SHA256" (the proxy's pid and start time in clock
// ticks, the list's hash). A session start whose list and proxy are the
// same skips the round trip on the control socket.
const egressPushedFile = "pushed"

// egressListKey is the hash of an allow-list as pushed.
func egressListKey(list []string) string {
	h := sha256.New()
	for _, s := range list {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// egressPushed reports whether the proxy named in dir's pid file is alive
// and was handed list last (see egressPushedFile). Anything unsure is false:
// the caller pushes, which also finds a dead proxy.
func egressPushed(dir string, list []string) bool {
	data, err := os.ReadFile(filepath.Join(dir, egressPushedFile))
	if err != nil {
		return false
	}
	f := strings.Fields(string(data))
	if len(f) != 3 || f[2] != egressListKey(list) {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if running, ok := egressProxyPID(dir); err != nil || pid <= 0 || !ok || running != pid {
		return false
	}
	st, err := session.ReadProcStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X' && strconv.FormatUint(st.StartTime, 10) == f[1]
}

// egressProxyPID is the pid dir's pid file names (a proxy that ended by
// itself removed it).
func egressProxyPID(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, egressPIDFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid, err == nil && pid > 0
}

// markEgressPushed records that the proxy in dir's pid file has list.
func markEgressPushed(dir string, list []string) {
	pid, ok := egressProxyPID(dir)
	if !ok {
		return
	}
	st, err := session.ReadProcStat(pid)
	if err != nil {
		return
	}
	line := fmt.Sprintf("%d %d %s\n", pid, st.StartTime, egressListKey(list))
	_ = writeFileAtomic(filepath.Join(dir, egressPushedFile), []byte(line))
}

// ensureMountedFast is EnsureMounted for the exec path: a World whose merged
// view is a mount already (one statx, where EnsureMounted reads the whole
// mount table, a ms or more on a host with many mounts) needs nothing. Only
// for the kernel overlay: a statx of a FUSE mount asks its daemon, which may
// hang, where the mount table does not.
func (e *Engine) ensureMountedFast(ctx context.Context, w *World) error {
	if w.MountBackend == overlay.BackendKernel && isMountRoot(e.Paths.Merged(w.Name)) && e.treesMountRoots(w) {
		return nil
	}
	return e.EnsureMounted(ctx, w)
}

// isMountRoot reports whether p is the root of a mount, by statx's
// STATX_ATTR_MOUNT_ROOT; false when unsure (an old kernel, an error such as
// a FUSE mount whose daemon died), for the caller to look closer.
func isMountRoot(p string) bool {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx); err != nil {
		return false
	}
	return stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 &&
		stx.Mode&unix.S_IFMT == unix.S_IFDIR
}

// worldLiveSkipping is worldLive for the egress proxy's idle check, which
// runs every egressIdle/4 for as long as the proxy lives: a session seen
// ended is put in ended and never read again (it cannot run again), so a
// tick reads the meta.json of live sessions only, not of the hundreds a
// World collects (that was a third of the machine's CPU in a loop of execs).
func (e *Engine) worldLiveSkipping(name string, ended map[string]bool) bool {
	dir := filepath.Join(e.Paths.World(name), "sessions")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true // unsure: keep serving
	}
	for _, d := range ents {
		if !d.IsDir() || ended[d.Name()] {
			continue
		}
		meta, err := ReadSessionMeta(filepath.Join(dir, d.Name()))
		switch {
		case errors.Is(err, ErrNoSession):
			// Being created: its start holds the egress lock.
		case err != nil || meta.State.Ended():
			ended[d.Name()] = true // unreadable reads as ended, as in ListSessions
		default:
			return true
		}
	}
	return false
}
