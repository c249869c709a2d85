package engine

import (
	"strings"
	"testing"

	"github.com/stratahq/strata/cube/cubetest"
)

// A command's background children end with its session, on cube as on the
// local runtime (whose session PID namespace ends with the command): envd
// leaves them running, so the runner ends what is left of the command's
// process group before it records the end. (They lived on in the sandbox.)
// One that left the group (setsid) is out of reach of that and lives on.
func TestCubeSessionEndsItsBackgroundChildren(t *testing.T) {
	t.Parallel()
	ce := newCubeEnv(t, cubetest.Options{})
	ce.create("w", CreateOptions{})
	ce.mustSh("w", `sleep 600 & echo $! > bg.pid
setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > daemon.pid`)
	bg := strings.TrimSpace(ce.mustSh("w", "cat bg.pid"))
	daemon := strings.TrimSpace(ce.mustSh("w", "cat daemon.pid"))
	t.Cleanup(func() { ce.sh("w", "kill -9 "+daemon) })
	// A zombie not reaped yet counts as gone.
	alive := func(pid string) bool {
		out := ce.mustSh("w", `s=; read -r s </proc/`+pid+`/stat 2>/dev/null; s=${s##*) }; echo "${s%% *}"`)
		st := strings.TrimSpace(out)
		return st != "" && st != "Z" && st != "X"
	}
	if alive(bg) {
		t.Errorf("background child %s of an ended session still runs in the sandbox", bg)
	}
	if !alive(daemon) {
		t.Errorf("a process that left the session's group (setsid, pid %s) was ended too", daemon)
	}
}
