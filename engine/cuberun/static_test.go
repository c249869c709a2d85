package cuberun

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stratahq/strata/engine/world"
)

// The engine asks a runtime's static questions with no engine at hand
// (KillSession, staging, policy): a nil *Runtime must answer them, and
// answer them as the cube runtime.
func TestStaticMethodsOnNilRuntime(t *testing.T) {
	var r *Runtime
	if r.Kind() != world.RuntimeCube || r.HostView() || !r.Sized() {
		t.Errorf("kind %s hostView %v sized %v", r.Kind(), r.HostView(), r.Sized())
	}
	if got, want := r.UpperIn("/w"), filepath.Join("/w", world.LayersDir, "upper"); got != want {
		t.Errorf("UpperIn = %s, want %s", got, want)
	}
	if len(r.LayerDirs()) == 0 {
		t.Error("no layer dirs")
	}
	// The recorded pid is the runner, which relays what it gets to the
	// command in the sandbox: TERM must reach it as something it relays.
	if sig := r.SendSignal(syscall.SIGTERM); sig == 0 {
		t.Error("SendSignal(TERM) = 0")
	}
	if d := r.Details(&world.World{}); d != nil {
		t.Errorf("details of a World without a [cube] table: %v", d)
	}
	w := &world.World{Cube: &world.CubeWorld{SandboxID: "sb-1", Template: "tpl"}}
	if d := r.Details(w); len(d) != 2 || d[0].Value != "sb-1" || d[1].Value != "tpl" {
		t.Errorf("details: %v", d)
	}
}
