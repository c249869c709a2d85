package engine

import (
	"context"
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

func (localRuntime) kind() Runtime  { return RuntimeLocal }
func (localRuntime) hostView() bool { return true }
func (localRuntime) layerDirs() []string {
	// home/: the World's private layer over the user's home (sandbox level).
	return []string{"upper", "work", "merged", "sessions", "home", "home/upper", "home/work"}
}

// sendSignal: the recorded pid is the command's process group.
func (localRuntime) sendSignal(sig syscall.Signal) syscall.Signal { return sig }

func (localRuntime) sized() bool { return false }

func (localRuntime) details(*World) []Detail { return nil }

func (localRuntime) upperIn(worldDir string) string { return filepath.Join(worldDir, "upper") }

func (localRuntime) prepare(_ context.Context, w *World, _ CreateOptions, mb overlay.Backend) error {
	var err error
	if w.MountBackend, err = chooseMountBackend(mb); err != nil {
		return err
	}
	w.Dialect = w.MountBackend.Dialect()
	return nil
}

func (localRuntime) realize(context.Context, *World, CreateOptions) error { return nil }

func (r localRuntime) precheck(w *World) error { return r.e.CheckSource(w) }

func (r localRuntime) startSession(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error) {
	return r.e.execLocal(ctx, w, o)
}

// shellArgv: a local World's sessions see this machine's file system, so
// its $SHELL (else /bin/sh).
func (localRuntime) shellArgv(command string) []string {
	sh := os.Getenv("SHELL")
	if sh == "" {
		sh = "/bin/sh"
	}
	if command == "" {
		return []string{sh, "-i"}
	}
	return []string{sh, "-c", command}
}

func (r localRuntime) freeze(_ context.Context, w *World) func() { return r.e.freezeWorld(w) }

func (r localRuntime) writers(_ context.Context, w *World, changes []overlay.Change) []WritingPath {
	return r.e.writersOf(w, changes)
}

func (localRuntime) snapshot(context.Context, *World, string) (string, error) { return "", nil }
func (localRuntime) rollback(context.Context, *World, *Snapshot) error        { return nil }
func (localRuntime) quiesce(context.Context, *World) error                    { return nil }
func (localRuntime) resume(context.Context, *World)                           {}

func (r localRuntime) usage(_ context.Context, w *World, _ []SessionMeta, inits map[int]bool, res *Resources) {
	r.e.localUsage(w, inits, res)
}

func (localRuntime) destroy(context.Context, *World) error { return nil }

// reviveSession: a local session's processes died with its init.
func (localRuntime) reviveSession(_ context.Context, _ string, s SessionMeta) SessionMeta { return s }

// placement: a local World runs on this machine.
func (localRuntime) placement(*World) Placement { return Placement{} }
