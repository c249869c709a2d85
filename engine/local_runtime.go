package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/stratahq/strata/overlay"
)

// localRuntime runs a World's sessions on this host: Linux namespaces over
// an overlay mounted here (mount.go, session.go, session_init_linux.go),
// frozen by the cgroup freezer or SIGSTOP (snapshot.go), accounted by
// cgroup or /proc (resources.go).
type localRuntime struct{ e *Engine }

func (localRuntime) Kind() Runtime  { return RuntimeLocal }
func (localRuntime) HostView() bool { return true }
func (localRuntime) LayerDirs() []string {
	// home/: the World's private layer over the user's home (sandbox level).
	return []string{"upper", "work", "merged", "sessions", "home", "home/upper", "home/work"}
}

// sendSignal: the recorded pid is the command's process group.
func (localRuntime) SendSignal(sig syscall.Signal) syscall.Signal { return sig }

func (localRuntime) Sized() bool { return false }

func (localRuntime) Details(*World) []Detail { return nil }

func (localRuntime) UpperIn(worldDir string) string { return filepath.Join(worldDir, "upper") }

func (localRuntime) Prepare(_ context.Context, w *World, _ CreateOptions, mb overlay.Backend) error {
	var err error
	if w.MountBackend, err = chooseMountBackend(mb); err != nil {
		return err
	}
	w.Dialect = w.MountBackend.Dialect()
	return nil
}

func (localRuntime) Realize(context.Context, *World, CreateOptions) error { return nil }

func (r localRuntime) Precheck(w *World) error { return r.e.CheckSource(w) }

func (r localRuntime) StartSession(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error) {
	return r.e.execLocal(ctx, w, o)
}

// shellArgv: a local World's sessions see this machine's file system, so
// its $SHELL (else /bin/sh).
func (localRuntime) ShellArgv(command string) []string {
	sh := os.Getenv("SHELL")
	if sh == "" {
		sh = "/bin/sh"
	}
	if command == "" {
		return []string{sh, "-i"}
	}
	return []string{sh, "-c", command}
}

func (r localRuntime) Freeze(_ context.Context, w *World) func() { return r.e.freezeWorld(w) }

func (r localRuntime) Writers(_ context.Context, w *World, changes []overlay.Change) []WritingPath {
	return r.e.writersOf(w, changes)
}

func (localRuntime) Snapshot(context.Context, *World, string) (string, error) { return "", nil }
func (localRuntime) Rollback(context.Context, *World, string) error           { return nil }
func (localRuntime) Quiesce(context.Context, *World) error                    { return nil }
func (localRuntime) Resume(context.Context, *World)                           {}

func (r localRuntime) Usage(_ context.Context, w *World, _ []SessionMeta, inits map[int]bool, res *Resources) {
	r.e.localUsage(w, inits, res)
}

// Up: a local World needs no bringing up.
func (localRuntime) Up(_ context.Context, w *World) error {
	return fmt.Errorf("it runs on the %s backend, which needs no bringing up", w.Backend)
}

// Stop: a local World has no sandbox to pause.
func (localRuntime) Stop(_ context.Context, w *World, _ bool) error {
	return fmt.Errorf("it runs on the %s backend; stop its sessions with strata kill", w.Backend)
}

func (localRuntime) Destroy(context.Context, *World) error { return nil }

// reviveSession: a local session's processes died with its init.
func (localRuntime) ReviveSession(_ context.Context, _ string, s SessionMeta) SessionMeta { return s }

// placement: a local World runs on this machine.
func (localRuntime) Placement(*World) Placement { return Placement{} }
