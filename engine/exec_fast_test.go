package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/cgroup"

	"github.com/stratahq/strata/engine/session"
)

// A session start whose World's proxy already has the allow-list does not
// talk to it again (a round trip on the control socket per exec): with the
// control socket gone, the running proxy still serves the next session and
// no second proxy is started. Before, every exec pushed the list, found no
// control socket and started a new proxy.
func TestEgressPushSkippedWhenProxyHasList(t *testing.T) {
	allowed, _ := countingServer(t, "127.0.0.2", "ok")
	e := netEngine(t, "127.0.0.2")
	proxied := ExecOptions{Network: boundary.NetworkProxy, Isolation: IsolationSandbox}
	if out, code := execOut(t, e, proxied, "curl -sS -m 10 http://"+allowed+"/"); code != 0 || out != "ok" {
		t.Fatalf("first session: %q (exit %d)", out, code)
	}
	pid := egressPID(e, "w")
	if pid <= 0 {
		t.Fatal("no proxy after a proxied session")
	}
	if err := os.Remove(filepath.Join(e.EgressDir("w"), egressControl)); err != nil {
		t.Fatal(err)
	}
	if out, code := execOut(t, e, proxied, "curl -sS -m 10 http://"+allowed+"/"); code != 0 || out != "ok" {
		t.Fatalf("second session: %q (exit %d)", out, code)
	}
	if got := egressPID(e, "w"); got != pid {
		t.Errorf("proxy pid %d after the second session, want %d (the list was pushed again)", got, pid)
	}
}

// The skip never leaves a proxy with a list other than the World's: a host
// allowed and then taken off the list again is denied; a host added to the
// config is allowed; a marker naming a proxy that died is not believed.
func TestEgressPushFollowsListChanges(t *testing.T) {
	other, otherHits := countingServer(t, "127.0.0.3", "other")
	e := netEngine(t, "127.0.0.2")
	proxied := ExecOptions{Network: boundary.NetworkProxy, Isolation: IsolationSandbox}
	get := "curl -sS -m 10 -o /dev/null -w '%{http_code}' http://" + other + "/"
	if out, _ := execOut(t, e, proxied, get); out != "403" {
		t.Fatalf("a host not on the list: %q, want 403", out)
	}
	host, _, _ := strings.Cut(other, ":")
	if _, err := e.AllowEgress(context.Background(), "w", host); err != nil {
		t.Fatal(err)
	}
	if out, _ := execOut(t, e, proxied, get); out != "200" {
		t.Fatalf("after strata allow: %q, want 200", out)
	}
	// Taken off by hand: the list is the one of the first session again,
	// which the proxy had before strata allow changed it.
	if err := os.Remove(filepath.Join(e.EgressDir("w"), egressAllowFile)); err != nil {
		t.Fatal(err)
	}
	hits := otherHits.Load()
	if out, _ := execOut(t, e, proxied, get); out != "403" {
		t.Errorf("after the host was taken off the list: %q, want 403 (the proxy kept a list the World no longer has)", out)
	}
	if otherHits.Load() != hits {
		t.Errorf("the host taken off the list was reached")
	}
	// Added in the config.
	e.Config.Boundary.Worlds["w"] = boundary.Policy{Allow: []string{"127.0.0.2", host}}
	if out, _ := execOut(t, e, proxied, get); out != "200" {
		t.Errorf("after the config allowed it: %q, want 200", out)
	}
	// A proxy that died: its successor starts with no list and gets it.
	stopEgress(t, e, "w")
	if out, _ := execOut(t, e, proxied, get); out != "200" {
		t.Errorf("after the proxy was killed: %q, want 200 from a new proxy with the list", out)
	}
}

// The init finishes its work (fsyncs, the activity log) after the caller has
// the exit status: 200 execs in the default level still leave no mount, no
// process and no unbounded cgroups behind once their inits have ended.
func TestExecLeavesNothingBehind(t *testing.T) {
	e := netEngine(t, "127.0.0.2")
	o := ExecOptions{Isolation: IsolationSandbox, Network: boundary.NetworkProxy}
	run := func() {
		t.Helper()
		if out, code := execOut(t, e, o, "true"); code != 0 {
			t.Fatalf("exec true: exit %d: %s", code, out)
		}
	}
	run() // the World mounted, its proxy started
	waitInits := func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			left := sessionInits(e.Paths.Root)
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("session inits still running: %v", left)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitInits()
	// Only mounts of this test's own tree: other tests on the host mount
	// and unmount meanwhile.
	base := filepath.Dir(e.Paths.Root)
	mounts := mountCount(t, base)
	n := 200
	if testing.Short() {
		n = 20
	}
	for range n {
		run()
	}
	waitInits()
	// Session cgroups younger than the sweeps' grace (5 s) are left alone
	// (one may be about to get its init); after it, one more exec sweeps.
	time.Sleep(5*time.Second + 100*time.Millisecond)
	run()
	waitInits()
	if got := mountCount(t, base); got > mounts {
		t.Errorf("%d mounts after %d execs, %d before", got, n, mounts)
	}
	w, err := e.World("w")
	if err != nil {
		t.Fatal(err)
	}
	if wdir := cgroup.WorldDir(w); wdir != "" {
		ents, _ := os.ReadDir(wdir)
		var subs int
		for _, d := range ents {
			if !d.IsDir() {
				continue
			}
			subs++
			// A process still being torn down with its pid namespace is
			// listed for a moment after its init has gone: wait for the
			// cgroup to empty (bounded), then name what stayed.
			procsFile := filepath.Join(wdir, d.Name(), "cgroup.procs")
			var procs []byte
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				procs, _ = os.ReadFile(procsFile)
				if len(bytes.TrimSpace(procs)) == 0 || time.Now().After(deadline) {
					break
				}
			}
			if pids := strings.Fields(string(procs)); len(pids) != 0 {
				var what []string
				for _, pid := range pids {
					st, _ := os.ReadFile("/proc/" + pid + "/stat")
					cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
					what = append(what, fmt.Sprintf("%s: %q %q", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}), st))
				}
				t.Errorf("cgroup %s still holds %v", d.Name(), what)
			}
		}
		if subs > 17 {
			t.Errorf("%d session cgroups after %d execs, want at most 17 (swept)", subs, n+1)
		}
	}
	ss, err := e.Sessions("w")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.State != SessionExited {
			t.Errorf("session %s: %s (%s)", s.ID, s.State, s.Error)
		}
	}
}

// sessionInits lists the live session inits of sessions under root.
func sessionInits(root string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, d := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if len(args) >= 3 && args[1] == SessionInitArg && strings.HasPrefix(args[2], root+"/") {
			if st, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
				continue // a zombie is no longer running; its parent reaps it
			}
			out = append(out, fmt.Sprintf("%s %s", d.Name(), args[2]))
		}
	}
	return out
}

// mountCount counts the host's mounts at or under dir.
func mountCount(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			n++
		}
	}
	return n
}

// isMountRoot: the exec path's one-statx answer to "is the World mounted".
func TestIsMountRoot(t *testing.T) {
	if !isMountRoot("/") {
		t.Skip("statx reports no STATX_ATTR_MOUNT_ROOT here (kernel before 5.8)")
	}
	dir := t.TempDir()
	if isMountRoot(dir) {
		t.Errorf("%s: a plain directory reads as a mount root", dir)
	}
	f := filepath.Join(dir, "f")
	writeFile(t, f, "x")
	if isMountRoot(f) || isMountRoot(filepath.Join(dir, "missing")) {
		t.Errorf("a file or a missing path reads as a mount root")
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, ""); err == nil {
			defer syscall.Unmount(dir, syscall.MNT_DETACH)
			if !isMountRoot(dir) {
				t.Errorf("%s: a tmpfs mounted there does not read as a mount root", dir)
			}
		}
	}
}

// The proxy's idle check remembers ended sessions and still sees every
// live one: a session starting after many ended ones, a running one, and
// one that ends later.
func TestWorldLiveSkipping(t *testing.T) {
	e := &Engine{Paths: Paths{Root: t.TempDir()}}
	sessions := filepath.Join(e.Paths.World("w"), "sessions")
	write := func(id string, m SessionMeta) {
		t.Helper()
		dir := filepath.Join(sessions, id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		m.ID = id
		if err := session.WriteMetaPath(dir, m); err != nil {
			t.Fatal(err)
		}
	}
	self, _ := session.ReadProcStat(os.Getpid())
	running := SessionMeta{State: SessionRunning, InitPID: os.Getpid(), InitStartTime: self.StartTime, StartedAt: time.Now()}
	ended := map[string]bool{}
	if e.worldLiveSkipping("w", ended) {
		t.Fatal("a World with no sessions dir is live")
	}
	for i := range 50 {
		write(fmt.Sprintf("old-%02d", i), SessionMeta{State: SessionExited, EndedAt: time.Now()})
	}
	if e.worldLiveSkipping("w", ended) || len(ended) != 50 {
		t.Fatalf("50 ended sessions: live, or %d remembered", len(ended))
	}
	if err := os.MkdirAll(filepath.Join(sessions, "creating"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("run", running)
	if !e.worldLiveSkipping("w", ended) {
		t.Fatal("a running session after 50 ended ones is not seen")
	}
	write("run", SessionMeta{State: SessionExited, EndedAt: time.Now()})
	if e.worldLiveSkipping("w", ended) {
		t.Fatal("the session ended and the World still reads live")
	}
	if ended["creating"] {
		t.Error("a session being created (no meta.json yet) was remembered as ended")
	}
	// A dead init: lost, which is ended.
	write("lost", SessionMeta{State: SessionRunning, InitPID: 1 << 22, StartedAt: time.Now()})
	if e.worldLiveSkipping("w", ended) || !ended["lost"] {
		t.Error("a session whose init is gone reads live")
	}
}
