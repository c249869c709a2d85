package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/overlay/mount"
)

// strataBin is the binary built once for the end-to-end tests.
var strataBin string

func TestMain(m *testing.M) {
	flag.Parse()
	raiseParallel()
	session.CatchIgnoredJobSignals() // run backgrounded, the tests still get resident inits
	dir, err := os.MkdirTemp("", "strata-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strataBin = filepath.Join(dir, "strata")
	out, err := exec.Command("go", "build", "-o", strataBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build strata: %v\n%s", err, out)
		os.Exit(1)
	}
	// strata-init beside strata, as make build and the release install them:
	// sessions start it as their init (the fallback is e2e_latency_test.go's).
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "strata-init"), "../strata-init").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build strata-init: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// raiseParallel lets at least 4 end-to-end tests run at once unless -parallel
// is given: they spend most of their time waiting on the strata processes
// and sessions they start (each test has its own state root and source), so
// GOMAXPROCS, go test's default, leaves a 2-core machine half idle.
func raiseParallel() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && runtime.GOMAXPROCS(0) < 4 {
		_ = flag.Set("test.parallel", "4") // the flag exists: testing registered it
	}
}

// env is one isolated strata installation: a state root, a config path and
// a source tree, all in temp dirs.
type env struct {
	t      *testing.T
	home   string
	source string
	vars   []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir())
}

// newTmpfsEnv is newEnv with the state root and the source on tmpfs when
// /dev/shm exists, for the crash harnesses: a SIGKILL loses no page cache,
// so the disk's durability plays no part in what they prove (that is the
// fsync discipline of overlay/publish.go), while a shared, busy disk makes
// every apply's fsyncs take seconds.
func newTmpfsEnv(t *testing.T) *env {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "strata-e2e-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) }) // after newEnvIn's cleanup unmounts
			return newEnvIn(t, dir)
		}
	}
	return newEnv(t)
}

// newEnvIn is newEnv under base.
func newEnvIn(t *testing.T, base string) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("end-to-end World tests mount overlays: run as root (CI does)")
	}
	e := &env{t: t, home: filepath.Join(base, "home"), source: filepath.Join(base, "src")}
	e.vars = []string{"STRATA_HOME=" + e.home, "STRATA_CONFIG=" + filepath.Join(base, "config.toml"), "XDG_STATE_HOME=" + filepath.Join(base, "state")}
	must(t, os.MkdirAll(filepath.Join(e.source, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.source, "a.txt"), []byte("hello\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(e.source, "sub", "b.txt"), []byte("bye\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(e.source, "keep.txt"), []byte("keep\n"), 0o644))
	t.Cleanup(func() { e.cleanup() })
	return e
}

// cleanup unmounts every World's merged view and kills leftover sessions.
func (e *env) cleanup() {
	ents, _ := os.ReadDir(filepath.Join(e.home, "worlds"))
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), ".") {
			continue
		}
		sess, _ := os.ReadDir(filepath.Join(e.home, "worlds", d.Name(), "sessions"))
		for _, s := range sess {
			_, _, _ = e.run("kill", d.Name(), s.Name(), "--signal", "KILL")
		}
		engine.RetireResidents(filepath.Join(e.home, "worlds", d.Name()), 2*time.Second)
		_ = mount.ForceUnmount(filepath.Join(e.home, "worlds", d.Name(), "merged"))
		stopEgress(filepath.Join(e.home, "worlds", d.Name(), "egress"))
	}
	e.waitSupervisors(10 * time.Second)
}

// waitSupervisors waits until every agent supervisor has recorded its
// session's end (agent.json "supervised": false): one still folding in the
// last events or taking a turn's snapshot would write into the state root
// while the test's temp dir is removed.
func (e *env) waitSupervisors(d time.Duration) {
	recs, _ := filepath.Glob(filepath.Join(e.home, "worlds", "*", "agents", "*", "agent.json"))
	deadline := time.Now().Add(d)
	for _, r := range recs {
		for time.Now().Before(deadline) {
			var rec struct {
				Supervised bool `json:"supervised"`
			}
			data, err := os.ReadFile(r)
			if err != nil || json.Unmarshal(data, &rec) != nil || !rec.Supervised {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// stopEgress kills the egress proxy whose pid file is in dir and waits for
// it to go: it outlives its World's last session by a moment, and one still
// removing its sockets when the test's temp dir is removed fails that
// removal ("directory not empty").
func stopEgress(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	if cmdline, err := os.ReadFile(proc + "/cmdline"); err != nil || !strings.Contains(string(cmdline), "__egress") {
		return // gone already, or the pid is another process's now
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, err := os.ReadFile(proc + "/stat"); err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) cmd(args ...string) *exec.Cmd {
	c := exec.Command(strataBin, args...)
	c.Env = append(os.Environ(), e.vars...)
	c.Dir = e.source
	return c
}

// run runs strata and returns stdout, stderr and the exit status.
func (e *env) run(args ...string) (string, string, int) {
	c := e.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("strata %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// ok runs strata and fails the test unless it exits 0.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	out, errs, code := e.run(args...)
	if code != 0 {
		e.t.Fatalf("strata %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func (e *env) fails(wantCode int, wantErr string, args ...string) string {
	e.t.Helper()
	out, errs, code := e.run(args...)
	if code != wantCode || !strings.Contains(errs, wantErr) {
		e.t.Fatalf("strata %s: exit %d (want %d), stderr %q (want it to contain %q), stdout %q", strings.Join(args, " "), code, wantCode, errs, wantErr, out)
	}
	return errs
}

func (e *env) readSource(rel string) string {
	b, err := os.ReadFile(filepath.Join(e.source, rel))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

type statusJSON struct {
	World   string `json:"world"`
	Changes []struct {
		Path     string `json:"path"`
		Kind     string `json:"kind"`
		Type     string `json:"type"`
		Whiteout bool   `json:"whiteout"`
	} `json:"changes"`
}

func (e *env) status(w string) statusJSON {
	var s statusJSON
	if err := json.Unmarshal([]byte(e.ok("status", w, "--json")), &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func TestE2EFullFlow(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "w1")
	e.ok("new", "w2", "--source", e.source)

	// An unmodified file is served from the source, at the source's own path.
	if out := e.ok("exec", "w1", "--", "cat", filepath.Join(e.source, "a.txt")); out != "hello\n" {
		t.Fatalf("read through the World: %q", out)
	}
	if out := e.ok("exec", "w1", "--", "pwd"); strings.TrimSpace(out) != e.source {
		t.Fatalf("default cwd = %q, want the source %s", out, e.source)
	}
	e.ok("exec", "w1", "--", "sh", "-c", "echo changed >> a.txt && echo new > c.txt && rm sub/b.txt && mkdir empty")
	// The source is untouched...
	if got := e.readSource("a.txt"); got != "hello\n" {
		t.Fatalf("source a.txt changed: %q", got)
	}
	if got := e.readSource("sub/b.txt"); got != "bye\n" {
		t.Fatalf("source sub/b.txt: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.source, "c.txt")); err == nil {
		t.Fatal("c.txt leaked into the source")
	}
	// ...the World sees its version at the source path...
	if out := e.ok("exec", "w1", "--", "cat", filepath.Join(e.source, "a.txt"), "c.txt"); out != "hello\nchanged\nnew\n" {
		t.Fatalf("World view: %q", out)
	}
	if _, _, code := e.run("exec", "w1", "--", "test", "-e", "sub/b.txt"); code != 1 {
		t.Fatalf("deleted file still visible in the World (test -e exit %d)", code)
	}
	// ...and a second World sees none of it.
	if out := e.ok("exec", "w2", "--", "sh", "-c", "cat a.txt sub/b.txt; test -e c.txt || echo no-c"); out != "hello\nbye\nno-c\n" {
		t.Fatalf("second World: %q", out)
	}
	st := e.status("w1")
	got := map[string]string{}
	for _, c := range st.Changes {
		got[c.Path] = c.Kind + "/" + c.Type + fmt.Sprint(c.Whiteout)
	}
	want := map[string]string{"a.txt": "modified/filefalse", "c.txt": "added/filefalse", "sub/b.txt": "deleted/filetrue", "empty": "added/dirfalse"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("status w1 = %v\nwant %v", got, want)
	}
	if len(e.status("w2").Changes) != 0 {
		t.Fatalf("w2 has changes: %+v", e.status("w2"))
	}

	var ls []map[string]any
	must(t, json.Unmarshal([]byte(e.ok("ls", "--json")), &ls))
	if len(ls) != 2 {
		t.Fatalf("ls --json: %d worlds", len(ls))
	}
	for _, k := range []string{"name", "source", "backend", "state", "changes", "status"} {
		if _, ok := ls[0][k]; !ok {
			t.Fatalf("ls --json lacks %q: %v", k, ls[0])
		}
	}
	if ls[0]["name"] != "w1" || ls[0]["changes"].(float64) != 4 || ls[0]["source"] != e.source {
		t.Fatalf("ls --json w1: %v", ls[0])
	}
}

func TestE2ECreateErrors(t *testing.T) {
	e := newEnv(t)
	e.fails(1, "invalid world name", "new", "Bad/Name")
	e.fails(1, "invalid world name", "new", "../x")
	e.ok("new", "dup")
	e.fails(1, "already exists", "new", "dup")
	e.fails(1, "no such file", "new", "x", "--source", filepath.Join(e.source, "missing"))
	// A state root inside the source would put the upper inside the lower.
	c := exec.Command(strataBin, "new", "inside", "--source", e.source)
	c.Env = append(os.Environ(), "STRATA_HOME="+filepath.Join(e.source, ".strata"), "STRATA_CONFIG=/nonexistent")
	out, err := c.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "inside the source") {
		t.Fatalf("state root inside source: %v %s", err, out)
	}
	e.fails(1, "world not found", "status", "nope")
	e.fails(2, "unknown command", "frobnicate")
}

func TestE2EExitCodesSignalsAndStreams(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "w")
	out, errs, code := e.run("exec", "w", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if code != 3 || out != "out\n" || errs != "err\n" {
		t.Fatalf("exit 3: code %d out %q err %q", code, out, errs)
	}
	if _, _, code := e.run("exec", "w", "--", "sh", "-c", "kill -9 $$"); code != 137 {
		t.Fatalf("killed by SIGKILL: exit %d, want 137", code)
	}
	if _, errs, code := e.run("exec", "w", "--", "no-such-command-xyz"); code != 127 {
		t.Fatalf("missing command: exit %d, stderr %q", code, errs)
	}
	var ss []map[string]any
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
	if len(ss) != 3 {
		t.Fatalf("sessions: %d", len(ss))
	}
}

func TestE2EDetachedSessionOutlivesCaller(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "w")
	// The caller is killed right after the session starts; the session runs on.
	c := e.cmd("exec", "w", "--", "sh", "-c", "for i in 1 2 3 4 5; do echo line $i; sleep 0.1; done; echo done > marker")
	must(t, c.Start())
	// Killed once the session runs (or has even ended: a fixed delay could
	// lose the race on a busy machine and kill the caller before it had
	// started anything).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var ss []struct {
			State string `json:"state"`
		}
		if out, _, code := e.run("sessions", "w", "--json"); code == 0 && json.Unmarshal([]byte(out), &ss) == nil && len(ss) == 1 && ss[0].State != "starting" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session never started")
		}
	}
	must(t, c.Process.Kill())
	_ = c.Wait()
	id := strings.TrimSpace(e.ok("exec", "w", "--detach", "--", "sh", "-c", "sleep 0.3; echo detached-done"))
	if id == "" {
		t.Fatal("--detach printed no session id")
	}
	out := e.ok("logs", "w", id, "-f")
	if out != "detached-done\n" {
		t.Fatalf("logs -f of the detached session: %q", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _, code := e.run("exec", "w", "--", "cat", "marker")
		if code == 0 && out == "done\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session whose caller was killed did not finish: %q", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var ss []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
	first := ss[0].ID
	if out := e.ok("logs", "w", first); out != "line 1\nline 2\nline 3\nline 4\nline 5\n" {
		t.Fatalf("transcript of the orphaned session is incomplete: %q", out)
	}
}

func TestE2EIsolation(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "victim")
	e.ok("exec", "victim", "--", "sh", "-c", "echo secret > victim.txt")
	e.ok("new", "w")
	victimUpper := filepath.Join(e.home, "worlds", "victim", "upper")
	attempts := []string{
		"umount " + e.source,
		"umount -l " + e.source,
		"mount -o remount,rw " + e.source,
		"mount --bind /tmp " + e.source,
		"mount -t tmpfs none /mnt",
		"echo evil > /proc/1/root" + e.source + "/a.txt.evil && test -e " + e.source + "/../src-escape",
		"cat " + victimUpper + "/victim.txt",
		"ls " + filepath.Join(e.home, "worlds"),
		"echo evil > " + filepath.Join(e.home, "evil"),
		"unshare -m true",
	}
	for _, a := range attempts {
		out, errs, code := e.run("exec", "w", "--", "sh", "-c", a)
		if code == 0 && !strings.HasPrefix(a, "echo evil > /proc/1/root") && !strings.HasPrefix(a, "ls ") {
			t.Errorf("inside a session, %q succeeded: %s %s", a, out, errs)
		}
		if strings.HasPrefix(a, "ls ") && strings.TrimSpace(out) != "" {
			t.Errorf("the state root is visible in a session: %q", out)
		}
	}
	// Writes through /proc/1/root land in the World, never in the source.
	if _, err := os.Stat(filepath.Join(e.source, "a.txt.evil")); err == nil {
		t.Error("a write through /proc/1/root reached the source")
	}
	if _, err := os.Stat(filepath.Join(e.home, "evil")); err == nil {
		t.Error("a session wrote into the state root")
	}
	if e.readSource("a.txt") != "hello\n" {
		t.Error("the source changed")
	}
	if got := e.ok("exec", "victim", "--", "cat", "victim.txt"); got != "secret\n" {
		t.Errorf("the victim World changed: %q", got)
	}
	if got := e.ok("exec", "w", "--", "hostname"); strings.TrimSpace(got) != "w" {
		t.Errorf("hostname in the World = %q, want its name", got)
	}
	if got := e.ok("exec", "w", "--no-network", "--", "sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); strings.TrimSpace(got) != "lo" {
		t.Errorf("--no-network interfaces: %q", got)
	}
}

func TestE2EConcurrentWorldsAndSessions(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 4; i++ {
		e.ok("new", fmt.Sprintf("c%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := 0; i < 4; i++ {
		for j := 0; j < 5; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := fmt.Sprintf("c%d", i)
				out, serr, code := e.run("exec", w, "--", "sh", "-c", fmt.Sprintf("echo %d-%d > f%d && cat f%d && exit %d", i, j, j, j, j))
				if code != j || out != fmt.Sprintf("%d-%d\n", i, j) {
					errs <- fmt.Sprintf("%s session %d: exit %d out %q err %q", w, j, code, out, serr)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for m := range errs {
		t.Error(m)
	}
	for i := 0; i < 4; i++ {
		if n := len(e.status(fmt.Sprintf("c%d", i)).Changes); n != 5 {
			t.Errorf("c%d: %d changes, want 5", i, n)
		}
	}
}

func TestE2ERemoveTrashRestore(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo x > new.txt")
	errs := e.fails(1, "never applied or snapshotted", "rm", "w")
	if !strings.Contains(errs, "--force") {
		t.Fatalf("rm refusal does not say how to proceed: %s", errs)
	}
	e.ok("rm", "w", "--force")
	e.fails(1, "world not found", "status", "w")
	if !strings.Contains(e.ok("trash"), "w") {
		t.Fatal("trash does not list the removed World")
	}
	e.ok("restore-world", "w")
	if got := e.ok("exec", "w", "--", "cat", "new.txt"); got != "x\n" {
		t.Fatalf("restored World lost its change: %q", got)
	}
	e.ok("snap", "w", "-m", "keep")
	e.ok("rm", "w") // snapshotted: nothing unsaved
	e.ok("new", "p")
	e.ok("exec", "p", "--", "sh", "-c", "echo y > y.txt")
	e.ok("rm", "p", "--purge")
	if strings.Contains(e.ok("trash"), " p ") {
		t.Fatal("a purged World is in the trash")
	}
}
