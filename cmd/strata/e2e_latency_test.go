package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// initCost is one package's line of GODEBUG=inittrace=1.
type initCost struct {
	pkg           string
	bytes, allocs int
}

// packageInitsOf runs bin with GODEBUG=inittrace=1 and returns what each
// package's init allocated, most allocations first. Allocation counts, not
// times: they are the same on a busy machine as on a quiet one.
func packageInitsOf(t *testing.T, bin string, args ...string) []initCost {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, _ := c.CombinedOutput()
	var costs []initCost
	for line := range strings.Lines(string(out)) {
		// init github.com/x/y @1.2 ms, 0.41 ms clock, 200656 bytes, 1982 allocs
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" || f[10] != "allocs" {
			continue
		}
		b, err1 := strconv.Atoi(f[7])
		a, err2 := strconv.Atoi(f[9])
		if err1 != nil || err2 != nil {
			t.Fatalf("unexpected inittrace line %q", line)
		}
		costs = append(costs, initCost{pkg: f[1], bytes: b, allocs: a})
	}
	if len(costs) == 0 {
		t.Fatalf("strata %v with GODEBUG=inittrace=1 printed no init lines:\n%s", args, out)
	}
	sort.Slice(costs, func(i, j int) bool { return costs[i].allocs > costs[j].allocs })
	return costs
}

// TestPackageInitsStayCheap: every strata process, the CLI and each
// session's re-executed init alike, runs every linked package's init before
// main, so `strata exec W -- true` pays them twice. A package-level
// regexp.MustCompile (engine/agent's host-name pattern alone was ~2000
// allocations, 200 KB) or table built at init is paid by every exec; they
// are built on first use instead. The budget is on allocations, which a
// busy machine does not change.
func TestPackageInitsStayCheap(t *testing.T) {
	const (
		perStrataPackage = 200  // main's command table is ~130
		total            = 1200 // ~760, of which the standard library and deps ~500
		// A package-level buffer (overlay/store's two zero blocks were
		// 1.3 MB) is paid by every exec twice, in page faults and in the
		// GC's first cycle, though no exec uses it; main's table is ~25 KB.
		perStrataPackageBytes = 64 << 10
	)
	initBin := filepath.Join(filepath.Dir(strataBin), "strata-init")
	for _, run := range []struct {
		bin  string
		args []string
	}{{strataBin, []string{"--version"}}, {strataBin, []string{"__session-init"}}, {initBin, nil}} {
		costs := packageInitsOf(t, run.bin, run.args...)
		name := filepath.Base(run.bin)
		sum := 0
		for _, c := range costs {
			sum += c.allocs
			ours := c.pkg == "main" || strings.HasPrefix(c.pkg, "github.com/stratahq/strata/")
			if ours && c.allocs > perStrataPackage {
				t.Errorf("%s %v: package %s allocates %d times (%d bytes) at init, over %d: build it on first use (sync.OnceValue)",
					name, run.args, c.pkg, c.allocs, c.bytes, perStrataPackage)
			}
			if ours && c.bytes > perStrataPackageBytes {
				t.Errorf("%s %v: package %s allocates %d bytes at init, over %d: make the buffer on first use (sync.OnceValue)",
					name, run.args, c.pkg, c.bytes, perStrataPackageBytes)
			}
		}
		if sum > total {
			top := costs[:min(5, len(costs))]
			t.Errorf("%s %v: package inits allocate %d times in all, over %d; the most: %+v", name, run.args, sum, total, top)
		}
	}
}

// runWith runs the strata binary bin (not strataBin) in e's installation.
func (e *env) runWith(bin string, args ...string) (string, string, int) {
	e.t.Helper()
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), e.vars...)
	c.Dir = e.source
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out.String(), errb.String(), code
}

// copyBinary copies the executable src to dst.
func copyBinary(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// initComm is the name of the session's init (PID 1 of its namespaces) as
// the command sees it, and the session's init.log.
func initComm(t *testing.T, e *env, bin, world string) (string, string) {
	t.Helper()
	out, errs, code := e.runWith(bin, "exec", world, "--", "cat", "/proc/1/comm")
	if code != 0 {
		t.Fatalf("%s exec: exit %d\nstdout: %s\nstderr: %s", bin, code, out, errs)
	}
	sessions := filepath.Join(e.home, "worlds", world, "sessions")
	ents, err := os.ReadDir(sessions)
	if err != nil || len(ents) == 0 {
		t.Fatalf("no session dirs in %s: %v", sessions, err)
	}
	newest := ""
	for _, d := range ents {
		newest = max(newest, d.Name()) // session ids sort by start time
	}
	log, _ := os.ReadFile(filepath.Join(sessions, newest, "init.log"))
	return strings.TrimSpace(out), string(log)
}

// Every exec starts the session's init as a process: strata-init, which
// links the init alone, when it lies beside strata (as make build and the
// release install it), else strata re-executed. A strata-init that may
// not match the strata beside it is never trusted with a session: an older
// one is passed over, one of another build hands the session back to
// strata, which runs it in the same namespaces.
func TestE2EExecInitBinary(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "w", "--source", e.source)

	if comm, log := initComm(t, e, strataBin, "w"); comm != "strata-init" {
		t.Errorf("with strata-init beside strata, the init is %q, want strata-init (init.log: %s)", comm, log)
	}

	alone := filepath.Join(t.TempDir(), "strata")
	copyBinary(t, strataBin, alone)
	if comm, log := initComm(t, e, alone, "w"); comm != "strata" {
		t.Errorf("strata alone (go install): the init is %q, want strata (init.log: %s)", comm, log)
	}

	// Older than strata: strata was rebuilt or reinstalled without it.
	stale := filepath.Join(filepath.Dir(alone), "strata-init")
	copyBinary(t, filepath.Join(filepath.Dir(strataBin), "strata-init"), stale)
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(stale, old, old))
	if comm, log := initComm(t, e, alone, "w"); comm != "strata" {
		t.Errorf("strata-init older than strata: the init is %q, want strata (init.log: %s)", comm, log)
	}

	// As new as strata, but of another build.
	out, err := exec.Command("go", "build", "-ldflags", "-X github.com/stratahq/strata/engine/local.buildSalt=another-build",
		"-o", stale, "../strata-init").CombinedOutput()
	if err != nil {
		t.Fatalf("build strata-init: %v\n%s", err, out)
	}
	comm, log := initComm(t, e, alone, "w")
	if comm != "strata" {
		t.Errorf("strata-init of another build: the init is %q, want strata (init.log: %s)", comm, log)
	}
	if !strings.Contains(log, "is not from the build of") {
		t.Errorf("strata-init of another build: init.log does not say so: %q", log)
	}
	// The session it handed over is whole: its output, its exit, its end.
	if out, _, code := e.runWith(alone, "exec", "w", "--", "sh", "-c", "echo handed-over; exit 3"); code != 3 || !strings.Contains(out, "handed-over") {
		t.Errorf("handed-over session: exit %d, stdout %q; want 3 and its output", code, out)
	}
}

// egressPIDOf is the pid of World w's running egress proxy (0: none).
func egressPIDOf(e *env, w string) int {
	data, err := os.ReadFile(filepath.Join(e.home, "worlds", w, "egress", "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid <= 0 || exec.Command("kill", "-0", strconv.Itoa(pid)).Run() != nil {
		return 0
	}
	return pid
}

// An exec a few seconds after the last one finds the World's egress proxy
// still running: starting one (a strata process and its sockets) costs a
// short exec as much again, and it used to idle out 2 s after the last
// session, so every exec after a pause paid it.
func TestE2EEgressProxyOutlivesAPause(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "w", "--source", e.source)
	e.ok("exec", "w", "--", "true") // the default: sandbox, network proxy
	first := egressPIDOf(e, "w")
	if first == 0 {
		t.Fatal("no egress proxy after an exec at the default level")
	}
	time.Sleep(4 * time.Second)
	if pid := egressPIDOf(e, "w"); pid != first {
		t.Fatalf("4 s after the exec the proxy is %d, was %d: it idled out", pid, first)
	}
	e.ok("exec", "w", "--", "true")
	if pid := egressPIDOf(e, "w"); pid != first {
		t.Errorf("the exec after the pause started proxy %d, the running one was %d", pid, first)
	}
}

// TestSessionInitLinksNoHTTP: strata-init is started by every exec, and its
// runtime start grows with what it links. It runs the egress bridge (net)
// but never the egress proxy: net/http, crypto/tls and their inits stay in
// strata (they came in with package egress, proxy and bridge in one).
func TestSessionInitLinksNoHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../strata-init").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ../strata-init: %v\n%s", err, out)
	}
	for _, pkg := range []string{"net/http", "crypto/tls", "github.com/stratahq/strata/engine/egress"} {
		for dep := range strings.Lines(string(out)) {
			if strings.TrimSpace(dep) == pkg {
				t.Errorf("strata-init links %s: the session init must not (move what it needs into a package of its own)", pkg)
			}
		}
	}
}
