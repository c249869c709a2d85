package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/engine/session"
)

// residentPIDs lists the live resident inits of World w in e's state root.
func (e *env) residentPIDs(w string) []int {
	return engine.ResidentPIDs(filepath.Join(e.home, "worlds", w))
}

// The default level's execs run in the World's resident init, as a user
// sees them: the same init for each (its command line names it), a
// detached session killed alone, a snapshot freezing the running session,
// and `strata rm` leaving no process behind.
func TestE2EExecResident(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "w", "--source", e.source)
	first := e.ok("exec", "w", "--", "sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline")
	if !strings.Contains(first, engine.ResidentInitArg) {
		t.Fatalf("the session's PID 1 is %q, want the World's resident init (%s)", first, engine.ResidentInitArg)
	}
	if again := e.ok("exec", "w", "--", "sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"); again != first {
		t.Errorf("second exec's init %q, first's %q: want the same", again, first)
	}
	pids := e.residentPIDs("w")
	if len(pids) != 1 {
		t.Fatalf("resident inits of w: %v, want one", pids)
	}
	// Exit codes and output pass through as with an init of its own.
	if out, _, code := e.run("exec", "w", "--", "sh", "-c", "echo out; echo err >&2; exit 7"); code != 7 || out != "out\n" {
		t.Errorf("exec: exit %d, stdout %q; want 7 and out", code, out)
	}
	if _, errs, code := e.run("exec", "w", "--", "no-such-command-xyz"); code != 127 || !strings.Contains(errs, "not found") {
		t.Errorf("a missing command: exit %d, stderr %q; want 127 and not found", code, errs)
	}
	id := strings.TrimSpace(e.ok("exec", "--detach", "w", "--", "sh", "-c", "while :; do echo tick >> ticks; sleep 0.05; done"))
	e.ok("snap", "w", "-m", "with a session running")
	e.ok("kill", "w", id)
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := e.ok("sessions", "w", "--json")
		if strings.Contains(out, `"id": "`+id+`"`) && !strings.Contains(out, `"state": "running"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed session still runs: %s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := e.residentPIDs("w"); len(got) != 1 || got[0] != pids[0] {
		t.Errorf("after killing one session: resident inits %v, want %v still", got, pids)
	}
	if out := e.ok("exec", "w", "--", "echo", "still"); out != "still\n" {
		t.Errorf("after the kill: %q", out)
	}
	e.ok("rm", "w", "--purge")
	for _, pid := range pids {
		if st, err := session.ReadProcStat(pid); err == nil && st.State != 'Z' {
			t.Errorf("strata rm left the World's resident init %d running", pid)
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, "worlds", "w")); err == nil {
		t.Errorf("the World's dir is still there after rm --purge")
	}
}

// A command gets the process attributes of the `strata exec` that asked for
// it (umask, nice, limits, CPU affinity, signals ignored), as with an init of its own, even
// though the World's resident init was started by another exec: that one
// gets an init of its own, and the next plain exec the resident init again.
func TestE2EExecResidentKeepsTheCallersAttributes(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "w", "--source", e.source)
	probe := `tr '\0' ' ' < /proc/1/cmdline; echo; echo umask=$(umask) nice=$(nice) nofile=$(ulimit -Sn)/$(ulimit -Hn); grep -E 'Cpus_allowed_list|SigIgn' /proc/self/status`
	plain := e.ok("exec", "w", "--", "sh", "-c", probe)
	if !strings.Contains(plain, engine.ResidentInitArg) {
		t.Fatalf("a plain exec did not run in the World's resident init: %q", plain)
	}
	pids := e.residentPIDs("w")
	if len(pids) != 1 {
		t.Fatalf("resident inits of w: %v, want one", pids)
	}
	wrap := `umask 077; ulimit -n 512; trap '' HUP; exec nice -n 5 "$0" "$@"`
	want := []string{"umask=0077", "nice=5", "nofile=512/512"}
	if _, err := exec.LookPath("taskset"); err == nil {
		wrap = `umask 077; ulimit -n 512; trap '' HUP; exec nice -n 5 taskset -c 0 "$0" "$@"`
		want = append(want, "Cpus_allowed_list:\t0\n")
	}
	c := exec.Command("sh", "-c", wrap, strataBin, "exec", "w", "--", "sh", "-c", probe)
	c.Env, c.Dir = append(os.Environ(), e.vars...), e.source
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("strata exec under umask, ulimit, nice and taskset: %v\n%s", err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("the command does not have the caller's %q:\n%s", w, out)
		}
	}
	// SIGHUP ignored (bit 0 of the mask; the environment may ignore others).
	if _, rest, ok := strings.Cut(string(out), "SigIgn:\t"); !ok {
		t.Errorf("no SigIgn in %q", out)
	} else if m, err := strconv.ParseUint(strings.Fields(rest)[0], 16, 64); err != nil || m&1 == 0 {
		t.Errorf("the command does not ignore SIGHUP as its caller did: SigIgn %q", strings.Fields(rest)[0])
	}
	if again := e.ok("exec", "w", "--", "sh", "-c", probe); again != plain {
		t.Errorf("a plain exec after it: %q, want what the first had: %q", again, plain)
	}
	if got := e.residentPIDs("w"); len(got) != 1 || got[0] != pids[0] {
		t.Errorf("resident inits after: %v, want %v still", got, pids)
	}
}
