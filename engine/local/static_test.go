package local

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stratahq/strata/engine/world"
)

// The engine asks a runtime's static questions with no engine at hand
// (KillSession, staging, policy): a nil *Runtime must answer them, without
// reaching for its Host, and answer them as the local runtime.
func TestStaticMethodsOnNilRuntime(t *testing.T) {
	var r *Runtime
	if r.Kind() != world.RuntimeLocal || !r.HostView() || r.Sized() {
		t.Errorf("kind %s hostView %v sized %v", r.Kind(), r.HostView(), r.Sized())
	}
	if got, want := r.UpperIn("/w"), filepath.Join("/w", "upper"); got != want {
		t.Errorf("UpperIn = %s, want %s", got, want)
	}
	if len(r.LayerDirs()) == 0 {
		t.Error("no layer dirs")
	}
	// The recorded pid is the command's process group: signals go as sent.
	if sig := r.SendSignal(syscall.SIGTERM); sig != syscall.SIGTERM {
		t.Errorf("SendSignal(TERM) = %v", sig)
	}
	if d := r.Details(&world.World{}); d != nil {
		t.Errorf("details: %v", d)
	}
	if p := r.Placement(&world.World{}); p != (Placement{}) {
		t.Errorf("placement: %+v", p)
	}
	t.Setenv("SHELL", "/bin/zsh")
	if a := r.ShellArgv("ls"); len(a) != 3 || a[0] != "/bin/zsh" || a[1] != "-c" || a[2] != "ls" {
		t.Errorf("ShellArgv: %q", a)
	}
}
