package local

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// InitBinaryName is the session init's own binary (cmd/strata-init), which
// StartSession starts instead of re-executing strata when it lies beside
// the strata binary. It links the init alone (no CLI, TUI or cube client):
// its process starts in about half the time of strata's, and every
// `strata exec` pays one such start. Without it (`go install` installs
// strata alone) strata re-executes itself, as before.
const InitBinaryName = "strata-init"

// initMTimeSlack: strata-init may be this much older than strata and still
// count as built with it (a build writes the two one after the other).
const initMTimeSlack = 2 * time.Second

// initExe is the binary to start as a session's init for the strata binary
// exe, and whether it is strata-init: the strata-init beside exe when it is
// a regular executable file of exe's owner that nobody else may write and
// it is not older than exe (a strata rebuilt or reinstalled alone makes a
// stale strata-init count as absent); else exe itself. A strata-init of
// another build that passes these checks is caught by the init itself
// (BuildStamp), which then executes exe in its place.
func initExe(exe string) (string, bool) {
	p := filepath.Join(filepath.Dir(exe), InitBinaryName)
	var ist, est unix.Stat_t
	if unix.Stat(p, &ist) != nil || ist.Mode&unix.S_IFMT != unix.S_IFREG || ist.Mode&0o111 == 0 || ist.Mode&0o022 != 0 {
		return exe, false
	}
	if unix.Stat(exe, &est) != nil || ist.Uid != est.Uid {
		return exe, false
	}
	if time.Unix(ist.Mtim.Unix()).Add(initMTimeSlack).Before(time.Unix(est.Mtim.Unix())) {
		return exe, false
	}
	return p, true
}

// buildSalt is set with -ldflags -X by tests, to build a strata-init that
// is of another build than the strata beside it.
var buildSalt string

// BuildStamp identifies the build of this binary as far as a session's
// init is concerned: the Go version, the module's version and checksum, the
// VCS revision, time and dirtiness, and the build flags. strata and the
// strata-init built with it from the same tree have the same stamp; the
// main package's path and its //go:debug defaults are left out.
var BuildStamp = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	parts := []string{bi.GoVersion, bi.Main.Path, bi.Main.Version, bi.Main.Sum, buildSalt}
	for _, s := range bi.Settings {
		switch s.Key {
		case "DefaultGODEBUG":
		case "-ldflags":
			// The version stamp (-X main.version=...) counts; strata-init
			// has no main.version and its own -X flags are left out with it.
			var keep []string
			for f := range strings.FieldsSeq(s.Value) {
				if strings.Contains(f, "main.version=") {
					keep = append(keep, f)
				}
			}
			parts = append(parts, s.Key+"="+strings.Join(keep, " "))
		default:
			parts = append(parts, s.Key+"="+s.Value)
		}
	}
	return strings.Join(parts, "\x00")
})

// reexecAs replaces this init with exe as the session's init (a strata-init
// of another build hands over to strata): the spec goes to the new init on
// fd 3 again, from a memfd; the ready and stdin fds stay where they are.
// The namespaces, the cgroup and PID 1 are kept. It returns only on error.
func reexecAs(exe, dir string, spec []byte, hasStdin bool) error {
	fd, err := unix.MemfdCreate("strata-session-spec", 0)
	if err != nil {
		return err
	}
	if _, err := unix.Write(fd, spec); err != nil {
		return err
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return err
	}
	if fd != initSpecFD {
		if err := unix.Dup3(fd, initSpecFD, 0); err != nil {
			return err
		}
		unix.Close(fd)
	}
	keep := []int{initReadyFD}
	if hasStdin {
		keep = append(keep, initStdinFD)
	}
	for _, k := range keep {
		if _, err := unix.FcntlInt(uintptr(k), unix.F_SETFD, 0); err != nil {
			return err
		}
	}
	return unix.Exec(exe, []string{exe, SessionInitArg, dir}, os.Environ())
}
