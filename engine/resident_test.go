package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/cgroup"
	"github.com/stratahq/strata/engine/session"
)

// residentEngine is an engine with one mounted World "w" whose sessions run
// at the sandbox level with home as their HOME.
func residentEngine(t *testing.T) (*Engine, string) {
	t.Helper()
	if cgroup.V2Root() == "" {
		t.Skip("no writable cgroup v2 hierarchy: sessions get an init of their own")
	}
	e, src := evidenceEngine(t)
	mountedWorld(t, e, src, "w")
	// Not under /tmp: the sandbox's private /tmp would cover it.
	host, err := os.MkdirTemp("/var/lib", "strata-resident-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(host) })
	home := filepath.Join(host, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ws, _ := e.Worlds()
		for _, w := range ws {
			RetireResidents(e.Paths.World(w.Name), 5*time.Second)
		}
	})
	return e, home
}

// sandboxRun runs script in World name at the sandbox level and returns its
// output, its exit code and its meta.
func sandboxRun(t *testing.T, e *Engine, name, home, script string) (string, int, SessionMeta) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := sandboxStart(ctx, t, e, name, home, script)
	out, code := sessionOutput(ctx, t, e, name, m.ID)
	end, err := ReadSessionMeta(e.SessionDir(name, m.ID))
	if err != nil {
		t.Fatal(err)
	}
	return out, code, end
}

// sandboxStart starts script in World name at the sandbox level, with no
// network and HOME=home, and returns its session as started.
func sandboxStart(ctx context.Context, t *testing.T, e *Engine, name, home, script string) SessionMeta {
	t.Helper()
	m, err := e.Exec(ctx, name, ExecOptions{
		Argv: []string{"/bin/sh", "-c", script}, Env: []string{defaultPath, "HOME=" + home},
		Isolation: IsolationSandbox, Network: "none",
	})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return m
}

func procAlive(pid int) bool {
	st, err := session.ReadProcStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

// Sessions of a World run in its resident init: one process for all of
// them, each session in a cgroup of its own under it, its end recorded as
// with an init of its own, and whatever it left running ended with it.
func TestResidentRunsTheWorldsSessions(t *testing.T) {
	requireRoot(t)
	e, home := residentEngine(t)
	out, code, first := sandboxRun(t, e, "w", home, "echo one; cat /proc/self/cgroup; exit 3")
	if code != 3 || !strings.HasPrefix(out, "one\n") {
		t.Fatalf("first session: exit %d, output %q; want 3 and its output", code, out)
	}
	if first.InitPID <= 0 || !procAlive(first.InitPID) {
		t.Fatalf("first session: init pid %d is not a live resident init", first.InitPID)
	}
	// Its cgroup namespace is rooted at the resident's cgroup: the session
	// sees its own cgroup by its id, not the host's tree.
	if !strings.Contains(out, "0::/"+first.ID+"\n") {
		t.Errorf("/proc/self/cgroup %q, want 0::/%s", out, first.ID)
	}
	// A background process left behind, holding nothing of the session.
	_, code, second := sandboxRun(t, e, "w", home, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started")
	if code != 0 {
		t.Fatalf("second session: exit %d", code)
	}
	if second.InitPID != first.InitPID {
		t.Errorf("second session ran in init %d, the first in %d: want the World's one resident init", second.InitPID, first.InitPID)
	}
	if second.State != SessionExited || second.EndedAt.IsZero() {
		t.Errorf("second session: %s, ended %v; want exited", second.State, second.EndedAt)
	}
	// A running session's cgroup is under the resident's (looked at while
	// it runs: an ended session's is removed).
	w := e.mustWorld(t, "w")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	running := sandboxStart(ctx, t, e, "w", home, "sleep 30")
	if dir := cgroup.SessionDir(w, running.ID); !strings.Contains(dir, "/"+cgroup.ResidentPrefix) {
		t.Errorf("a running session's cgroup %q, want one under the resident's (%s*)", dir, cgroup.ResidentPrefix)
	}
	if running.InitPID != first.InitPID {
		t.Errorf("the running session's init %d, want the resident %d", running.InitPID, first.InitPID)
	}
	if err := KillSession(e.SessionDir("w", running.ID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitSession(ctx, e.SessionDir("w", running.ID)); err != nil {
		t.Fatal(err)
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(first.InitPID) + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []int
		for _, pid := range pidsInNS(ns) {
			if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended session's background sleep still runs (host pids %v): a session's end must end what it left", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another World: another resident init, another pid namespace.
	mountedWorld(t, e, e.mustWorld(t, "w").Source, "other")
	_, _, o := sandboxRun(t, e, "other", home, "true")
	if o.InitPID == first.InitPID || o.InitPID <= 0 {
		t.Errorf("World other ran in init %d, World w in %d: want one each", o.InitPID, first.InitPID)
	}
}

func pidsInNS(ns string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + d.Name() + "/ns/pid"); err == nil && l == ns {
			out = append(out, pid)
		}
	}
	return out
}

// A resident init set up before a credential appeared, or before the
// World was remounted, must not serve the next session with that stale
// view: the credential would be readable, the old mount's files seen.
func TestResidentViewFollowsTheBoundary(t *testing.T) {
	requireRoot(t)
	e, home := residentEngine(t)
	_, _, first := sandboxRun(t, e, "w", home, "true")
	// Planted after the resident init set up its view.
	writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), "ssh-secret-marker\n")
	out, _, second := sandboxRun(t, e, "w", home, `cat "$HOME/.ssh/id_ed25519" 2>&1; echo done`)
	if strings.Contains(out, "ssh-secret-marker") {
		t.Fatalf("a credential planted after the resident init started was readable: %q", out)
	}
	if second.InitPID == first.InitPID {
		t.Errorf("the session after the credential appeared ran in the same init %d: its view hides no credential", first.InitPID)
	}
	deadline := time.Now().Add(5 * time.Second)
	for procAlive(first.InitPID) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if procAlive(first.InitPID) {
		t.Errorf("the resident init of the old view (pid %d) still runs with no session", first.InitPID)
	}
	// A remount: the old init would hold the old overlay.
	w, unlock, err := e.lockedWorld(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	err = e.unmountLocked(context.Background(), w)
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	if procAlive(second.InitPID) {
		t.Errorf("unmount left the resident init %d running: it holds the World's views mounted", second.InitPID)
	}
	if err := e.EnsureMounted(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	out, code, third := sandboxRun(t, e, "w", home, "echo after-remount > remount.txt && cat remount.txt")
	if code != 0 || out != "after-remount\n" || third.InitPID == second.InitPID {
		t.Errorf("after a remount: %q exit %d init %d (before %d)", out, code, third.InitPID, second.InitPID)
	}
	if data, err := os.ReadFile(filepath.Join(e.Paths.Upper("w"), "remount.txt")); err != nil || string(data) != "after-remount\n" {
		t.Errorf("the write after the remount is not in the World's upper: %q %v", data, err)
	}
}

// A hostile command cannot take the resident init down for the World's
// other sessions, read what it holds, or reach its socket.
func TestResidentResistsItsSessions(t *testing.T) {
	requireRoot(t)
	e, home := residentEngine(t)
	stateRoot := e.Paths.Root
	out, code, first := sandboxRun(t, e, "w", home, `
kill -9 1; kill -STOP 1; sleep 0.1
for f in /proc/1/fd/*; do readlink "$f" >/dev/null 2>&1 && echo init-fds-readable; ls "$f/" >/dev/null 2>&1 && echo init-fds-readable; done
ls /proc/1/cwd/ >/dev/null 2>&1 && echo init-cwd-readable
ls /proc/1/root/ >/dev/null 2>&1 && echo init-root-readable
cat /proc/1/environ >/dev/null 2>&1 && echo init-environ-readable
ls `+stateRoot+`/worlds/w/`+ResidentDir+` 2>/dev/null | grep -q . && echo resident-dir-visible
(echo 0 > /sys/fs/cgroup/cgroup.procs) 2>/dev/null && echo cgroup-writable
(echo 1 > /sys/fs/cgroup/cgroup.kill) 2>/dev/null && echo cgroup-kill-writable
echo survived`)
	if code != 0 || !strings.HasSuffix(out, "survived\n") {
		t.Fatalf("exit %d, output %q", code, out)
	}
	for _, bad := range []string{"init-fds-readable", "init-cwd-readable", "init-root-readable", "init-environ-readable", "resident-dir-visible", "cgroup-writable", "cgroup-kill-writable"} {
		if strings.Contains(out, bad) {
			t.Errorf("a command of the World: %s\n%s", bad, out)
		}
	}
	if !procAlive(first.InitPID) {
		t.Fatalf("kill -9 1 from a session ended the resident init")
	}
	if st, _ := session.ReadProcStat(first.InitPID); st.State == 'T' {
		t.Errorf("kill -STOP 1 from a session stopped the resident init")
	}
	// The second session's command, started by the same init: no
	// capability it may not have, no_new_privs (the init keeps its own).
	status, _, second := sandboxRun(t, e, "w", home, "grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status")
	if second.InitPID != first.InitPID {
		t.Errorf("after kill -9 1: the next session ran in init %d, want the same %d", second.InitPID, first.InitPID)
	}
	for line := range strings.Lines(status) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":\t")
		if k == "NoNewPrivs" {
			if v != "1" {
				t.Errorf("NoNewPrivs %q, want 1", v)
			}
			continue
		}
		caps, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		for _, c := range []struct {
			bit  uint
			name string
		}{{21, "SYS_ADMIN"}, {19, "SYS_PTRACE"}, {16, "SYS_MODULE"}, {27, "MKNOD"}, {12, "NET_ADMIN"}, {2, "DAC_READ_SEARCH"}, {8, "SETPCAP"}} {
			if caps&(1<<c.bit) != 0 {
				t.Errorf("%s has CAP_%s (%s)", k, c.name, v)
			}
		}
	}
	if !strings.Contains(status, "NoNewPrivs") {
		t.Errorf("no NoNewPrivs line in %q", status)
	}
	// SIGTERM retires it: the session that sent it ends normally, the
	// next one gets a new resident init.
	out, code, third := sandboxRun(t, e, "w", home, "kill -TERM 1; sleep 0.2; echo after-term")
	if code != 0 || out != "after-term\n" {
		t.Errorf("the session that sent SIGTERM to its init: exit %d, %q", code, out)
	}
	_, code, fourth := sandboxRun(t, e, "w", home, "true")
	if code != 0 || fourth.InitPID == third.InitPID {
		t.Errorf("after SIGTERM: exit %d in init %d (retired one %d)", code, fourth.InitPID, third.InitPID)
	}
}

// A resident init with no session ends after its idle time, with its
// pid file; the next session starts a new one.
func TestResidentIdlesOut(t *testing.T) {
	requireRoot(t)
	t.Setenv("STRATA_RESIDENT_IDLE", "300ms")
	e, home := residentEngine(t)
	_, _, first := sandboxRun(t, e, "w", home, "sleep 0.5")
	deadline := time.Now().Add(5 * time.Second)
	for procAlive(first.InitPID) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if procAlive(first.InitPID) {
		t.Fatalf("the resident init %d still runs 5 s after its last session, with a 300ms idle time", first.InitPID)
	}
	if pids, _ := filepath.Glob(filepath.Join(e.Paths.World("w"), ResidentDir, "*.pid")); len(pids) != 0 {
		t.Errorf("pid files left: %v", pids)
	}
	out, code, second := sandboxRun(t, e, "w", home, "echo again")
	if code != 0 || out != "again\n" || second.InitPID == first.InitPID {
		t.Errorf("after idling out: %q exit %d init %d", out, code, second.InitPID)
	}
}

// Execs racing for a World without a resident init: each runs once, whole,
// and the World ends up with one resident init (the others' starts see
// the lock taken and ask the one that won).
func TestResidentRacingFirstExecs(t *testing.T) {
	requireRoot(t)
	e, home := residentEngine(t)
	const n = 6
	type res struct {
		out  string
		code int
		m    SessionMeta
	}
	results := make([]res, n)
	done := make(chan int, n)
	for i := range n {
		go func() {
			defer func() { done <- i }()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			m, err := e.Exec(ctx, "w", ExecOptions{
				Argv: []string{"/bin/sh", "-c", "echo run-" + strconv.Itoa(i) + " >> runs.txt; echo ok-" + strconv.Itoa(i)},
				Env:  []string{defaultPath, "HOME=" + home}, Isolation: IsolationSandbox, Network: "none",
			})
			if err != nil {
				results[i] = res{out: err.Error(), code: -1}
				return
			}
			end, err := WaitSession(ctx, e.SessionDir("w", m.ID))
			if err != nil {
				results[i] = res{out: err.Error(), code: -1}
				return
			}
			recs, _, _ := ReadTranscript(filepath.Join(e.SessionDir("w", m.ID), TranscriptFile), 0)
			var b strings.Builder
			for _, r := range recs {
				b.Write(r.Data)
			}
			results[i] = res{out: b.String(), code: end.ExitCode, m: end}
		}()
	}
	for range n {
		<-done
	}
	inits := map[int]bool{}
	for i, r := range results {
		if r.code != 0 || r.out != "ok-"+strconv.Itoa(i)+"\n" {
			t.Errorf("exec %d: exit %d, output %q", i, r.code, r.out)
		}
		inits[r.m.InitPID] = true
	}
	data, err := os.ReadFile(filepath.Join(e.Paths.Upper("w"), "runs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != n {
		t.Errorf("runs.txt has %d lines, want %d (each command once):\n%s", lines, n, data)
	}
	if pids, _ := filepath.Glob(filepath.Join(e.Paths.World("w"), ResidentDir, "*.pid")); len(pids) != 1 {
		t.Errorf("resident inits after the race: %v, want one", pids)
	}
	if len(inits) != 1 {
		t.Errorf("the racing execs ran in inits %v: want the World's one resident init for all", inits)
	}
}

// Sessions one after the other get fresh private dirs, as with an init of
// their own; sessions running at once share them.
func TestResidentPrivateDirsPerSession(t *testing.T) {
	requireRoot(t)
	e, home := residentEngine(t)
	// System V IPC objects (ipcmk) live in the World's IPC namespace.
	ipc := "ipcmk -M 4096 -Q -S 1 >/dev/null; "
	if _, err := exec.LookPath("ipcmk"); err != nil {
		ipc = ""
	}
	out, code, first := sandboxRun(t, e, "w", home, ipc+"echo a > /var/tmp/left; echo b > /dev/shm/left; ls /var/tmp /dev/shm; cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | wc -l")
	if code != 0 || !strings.Contains(out, "left") || ipc != "" && !strings.HasSuffix(out, "6\n") {
		t.Fatalf("first session: exit %d, %q (want its files, and 3 IPC objects: 6 lines)", code, out)
	}
	out, _, second := sandboxRun(t, e, "w", home, "ls -A /var/tmp /dev/shm; cat /var/tmp/left /dev/shm/left 2>/dev/null; echo end; cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | wc -l")
	if second.InitPID != first.InitPID {
		t.Fatalf("the sessions ran in inits %d and %d", first.InitPID, second.InitPID)
	}
	if strings.Contains(out, "left") {
		t.Errorf("the next session saw the previous one's /var/tmp or /dev/shm:\n%s", out)
	}
	if !strings.HasSuffix(out, "end\n3\n") {
		t.Errorf("the next session saw the previous one's System V IPC objects (want only the 3 header lines):\n%s", out)
	}
	// A POSIX message queue too: the test binary, copied where the World
	// sees it, is the mq_open.
	mq := filepath.Join(filepath.Dir(home), "mq-open")
	if data, err := os.ReadFile(os.Args[0]); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(mq, data, 0o755); err != nil {
		t.Fatal(err)
	}
	mqOpen := mq + " " + testMQOpenArg + " strata-test-q"
	if out, code, _ := sandboxRun(t, e, "w", home, mqOpen+"; "+mqOpen); code == 0 || !strings.HasPrefix(out, "created\n") {
		t.Fatalf("creating a message queue, then again: exit %d, %q (want created, then it exists)", code, out)
	}
	if out, code, _ := sandboxRun(t, e, "w", home, mqOpen); code != 0 || out != "created\n" {
		t.Errorf("the next session found the previous one's message queue: exit %d, %q", code, out)
	}
	// Two at once: the second sees what the first wrote while it runs.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	long := sandboxStart(ctx, t, e, "w", home, "echo s > /var/tmp/shared; sleep 30")
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _, _ = sandboxRun(t, e, "w", home, "cat /var/tmp/shared 2>/dev/null; echo .")
		if out == "s\n.\n" || time.Now().After(deadline) {
			break
		}
	}
	if out != "s\n.\n" {
		t.Errorf("a session running beside another does not see its /var/tmp: %q", out)
	}
	if err := KillSession(e.SessionDir("w", long.ID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitSession(ctx, e.SessionDir("w", long.ID)); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := sandboxRun(t, e, "w", home, "cat /var/tmp/shared 2>/dev/null; echo ."); out != ".\n" {
		t.Errorf("after both ended, the next session sees %q in /var/tmp", out)
	}
	// The World's source lies under the private /tmp here (a test's temp
	// dir), and the state root too (hidden by /tmp, listed in mountinfo):
	// the next session gets a fresh /tmp with the World's view on it again,
	// whole and writable, and nothing else of what the last one left.
	w, err := e.World("w")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(w.Source, "/tmp/") {
		t.Fatalf("the test wants a source under /tmp, got %s", w.Source)
	}
	parent := filepath.Dir(w.Source)
	script := fmt.Sprintf("echo c > /tmp/left && echo d > %s/sibling && mkdir %s/dir && echo e > d0/new.txt && echo ok", parent, parent)
	if out, code, _ := sandboxRun(t, e, "w", home, script); code != 0 || out != "ok\n" {
		t.Fatalf("writing /tmp beside the source: exit %d, %q", code, out)
	}
	out, code, third := sandboxRun(t, e, "w", home, fmt.Sprintf("ls -A /tmp %s; cat d0/new.txt; head -1 d0/f0.txt; echo f > d0/new2.txt && echo wrote", parent))
	if third.InitPID != first.InitPID {
		t.Fatalf("the sessions ran in inits %d and %d", first.InitPID, third.InitPID)
	}
	if code != 0 || strings.Contains(out, "left") || strings.Contains(out, "sibling") || strings.Contains(out, "dir\n") {
		t.Errorf("the next session saw what the last one left in /tmp (exit %d):\n%s", code, out)
	}
	if !strings.Contains(out, "e\nline 0 0") || !strings.HasSuffix(out, "wrote\n") {
		t.Errorf("the World's view under the fresh /tmp is not whole and writable:\n%s", out)
	}
	if data, err := os.ReadFile(filepath.Join(e.Paths.Upper("w"), "d0", "new2.txt")); err != nil || string(data) != "f\n" {
		t.Errorf("a write through the view attached again is not the World's change: %q, %v", data, err)
	}
	// A hostile session renames the dir above the source: the World's view
	// goes with it in this init's namespace. The next session still finds
	// the source where it belongs (in a new resident init: that one retired).
	top := "/tmp/" + strings.Split(strings.TrimPrefix(w.Source, "/tmp/"), "/")[0]
	if out, code, _ := sandboxRun(t, e, "w", home, fmt.Sprintf("cd / && mv %s /tmp/moved && ls /tmp", top)); code != 0 || !strings.Contains(out, "moved") {
		t.Fatalf("renaming %s: exit %d, %q", top, code, out)
	}
	out, code, after := sandboxRun(t, e, "w", home, "pwd; cat d0/new.txt; ls /tmp")
	if code != 0 || !strings.HasPrefix(out, w.Source+"\ne\n") || strings.Contains(out, "moved") {
		t.Errorf("after a session moved the source's parent, the next one: exit %d, %q; want the World's view at %s and a fresh /tmp", code, out, w.Source)
	}
	if after.InitPID == first.InitPID && procAlive(first.InitPID) {
		t.Errorf("the resident init %d whose mounts moved still serves", first.InitPID)
	}
}
