package engine

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
	"github.com/stratahq/strata/engine/cuberun"
	"github.com/stratahq/strata/overlay"
)

func TestCubePlannedWorldRealisedLater(t *testing.T) {
	// Serial: the default allow-list's names resolve the same at plan and at
	// up (a stub, not this machine's DNS, whose answer, or 3 s timeout,
	// differed between the two now and then and changed the request).
	old := cuberun.CubeResolve
	t.Cleanup(func() { cuberun.CubeResolve = old })
	cuberun.CubeResolve = func(_ context.Context, host string) ([]net.IPAddr, error) {
		return []net.IPAddr{{IP: net.ParseIP("192.0.2.9")}}, nil
	}
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	ce.srv.Down()
	w := ce.create("p", CreateOptions{})
	if w.State != StatePlanned || w.Cube.SandboxID != "" || !strings.Contains(w.Cube.Request, `"templateID":"base"`) ||
		!strings.Contains(w.Cube.Request, "host-mount") {
		t.Fatalf("planned world: %+v %+v", w, w.Cube)
	}
	info := ce.e.Info(ctx, w)
	if info.Status != "planned" || info.Error != "" || info.Cube.Request != w.Cube.Request {
		t.Errorf("info of a planned world: %+v", info)
	}
	_, err := ce.e.Exec(ctx, "p", ExecOptions{Argv: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "planned") || !strings.Contains(err.Error(), "strata up p") {
		t.Errorf("exec in a planned world with Cube down: %v", err)
	}
	if _, err := ce.e.Up(ctx, "p"); !errors.Is(err, cube.ErrUnavailable) {
		t.Errorf("up with Cube down: %v", err)
	}
	if w, _ := ce.e.World("p"); w.State != StatePlanned {
		t.Errorf("failed up changed the state to %s", w.State)
	}

	if err := ce.srv.Up(); err != nil {
		t.Fatal(err)
	}
	w, err = ce.e.Up(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if w.State != StateReady || w.Cube.Driver != "kernel" {
		t.Fatalf("after up: %+v %+v", w, w.Cube)
	}
	creates := requestsMatching(ce.srv, "POST /sandboxes")
	if len(creates) != 1 || string(creates[0].Body) != info.Cube.Request {
		t.Errorf("up sent %d creates; want exactly the recorded request\n%s", len(creates), info.Cube.Request)
	}
	if out := ce.mustSh("p", "cat a.txt && echo x > new.txt"); out != "hello\n" {
		t.Errorf("exec after up: %q", out)
	}
	if ce.changes("p")["new.txt"] != overlay.Added {
		t.Error("a change made after up is not in the World")
	}
	if _, err := ce.e.Remove(ctx, "p", RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if ids := ce.srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
}

func TestCubeNotConfiguredPlans(t *testing.T) {
	t.Parallel()
	ce := newCubeEnv(t, cubetest.Options{}, func(cc *CubeConfig) { cc.Endpoint = "" })
	w := ce.create("p", CreateOptions{})
	if w.State != StatePlanned || w.Cube.Request == "" {
		t.Fatalf("%+v", w)
	}
	if n := len(ce.srv.Requests()); n != 0 {
		t.Errorf("%d requests reached Cube without an endpoint configured", n)
	}
	if _, err := ce.e.Up(context.Background(), "p"); !errors.Is(err, ErrCubeNotConfigured) {
		t.Errorf("up without an endpoint: %v", err)
	}
}

func TestCubeTemplateFitFailsBeforeAnyCall(t *testing.T) {
	t.Parallel()
	ce := newCubeEnv(t, cubetest.Options{}, func(cc *CubeConfig) {
		cc.Template = ""
		cc.Templates = []CubeTemplate{{ID: "base", CPU: 2000, MemoryMB: 2048, DiskMB: 10240}}
	})
	_, err := ce.e.Create(context.Background(), CreateOptions{Name: "big", Source: ce.src, Backend: RuntimeCube, CPU: 2000, MemoryMB: 4096})
	if !errors.Is(err, ErrNoTemplateFits) || !strings.Contains(err.Error(), "closest: base") {
		t.Fatalf("too big: %v", err)
	}
	if n := len(ce.srv.Requests()); n != 0 || cubePathExists(ce.e.Paths.World("big")) {
		t.Errorf("%d requests sent / world left behind for a request no template fits", n)
	}
	w := ce.create("fits", CreateOptions{CPU: 1000, MemoryMB: 2048})
	if w.Cube.Template != "base" || w.State != StateReady {
		t.Errorf("%+v", w.Cube)
	}
}

func TestCubeStoppedAndPlannedForkReviewAndApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeWorld(t, cubetest.Options{})
	ce.mustSh("w", "echo changed > a.txt && echo n > n.txt")
	s1, err := ce.e.Snapshot(ctx, "w", SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ce.e.Stop(ctx, "w", StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if w, _ := ce.e.World("w"); w.State != StateStopped || ce.e.Info(ctx, w).Status != "stopped" {
		t.Fatalf("after stop: %+v", w)
	}
	// Stopped: status and diff read the layers on the host.
	if got := ce.changes("w"); got["a.txt"] != overlay.Modified || got["n.txt"] != overlay.Added {
		t.Errorf("status of a stopped world: %v", got)
	}
	if fcs, err := ce.e.Diff(ctx, "w", DiffOptions{}); err != nil || len(fcs) != 2 {
		t.Errorf("diff of a stopped world: %v %d", err, len(fcs))
	}
	// Cube down: a fork from the snapshot is planned, its upper restored.
	ce.srv.Down()
	forks, err := ce.e.Fork(ctx, "w", ForkOptions{Snap: s1.ID, Names: []string{"f"}})
	if err != nil {
		t.Fatal(err)
	}
	if forks[0].State != StatePlanned || !strings.Contains(forks[0].Cube.Request, s1.Cube) {
		t.Fatalf("fork with Cube down: %+v %+v", forks[0], forks[0].Cube)
	}
	if got := ce.changes("f"); got["a.txt"] != overlay.Modified {
		t.Errorf("status of a planned fork: %v", got)
	}
	if _, err := ce.e.Apply(ctx, "f", ApplyOptions{Picks: []Pick{{Path: "a.txt"}}}); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(ce.src, "a.txt")) != "changed\n" {
		t.Error("apply from a planned world did not publish")
	}
	if err := ce.srv.Up(); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.e.Up(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if out := ce.mustSh("f", "cat n.txt"); out != "n\n" {
		t.Errorf("planned fork after up: %q", out)
	}
	// Exec in a stopped World resumes it.
	if out := ce.mustSh("w", "cat n.txt"); out != "n\n" {
		t.Errorf("stopped world after exec: %q", out)
	}
	if w, _ := ce.e.World("w"); w.State != StateReady {
		t.Errorf("exec did not bring the stopped world up: %s", w.State)
	}
}

func TestCubeCreateFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	noWorldNoSandbox := func(name string) {
		t.Helper()
		if cubePathExists(ce.e.Paths.World(name)) {
			t.Errorf("world %s left behind", name)
		}
		if ids := ce.srv.SandboxIDs(); len(ids) != 0 {
			t.Errorf("sandboxes leaked: %v", ids)
		}
	}
	for _, tc := range []struct {
		name  string
		fault cubetest.Fault
		is    error
	}{
		{"e500", cubetest.Fault{Route: "POST /sandboxes", Status: 500, Message: "boom"}, nil},
		{"e408", cubetest.Fault{Route: "POST /sandboxes", Status: 408}, cube.ErrTimeout},
		{"lost-reply", cubetest.Fault{Route: "POST /sandboxes", DropReply: true}, nil},
		{"setup-fails", cubetest.Fault{Route: "POST /process.Process/Start", Status: 500, Message: "envd broke"}, nil},
	} {
		ce.srv.ResetRequests()
		ce.srv.Inject(tc.fault)
		_, err := ce.e.Create(ctx, CreateOptions{Name: tc.name, Source: ce.src, Backend: RuntimeCube})
		ce.srv.ClearFaults()
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: create: %v", tc.name, err)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
		noWorldNoSandbox(tc.name)
	}
	// 503 with Retry-After: Cube said it did nothing; the create is retried.
	ce.srv.Inject(cubetest.Fault{Route: "POST /sandboxes", Status: 503, RetryAfter: time.Second})
	w := ce.create("retried", CreateOptions{})
	if w.State != StateReady || len(requestsMatching(ce.srv, "POST /sandboxes")) < 2 {
		t.Errorf("503+Retry-After: %s after %d creates", w.State, len(requestsMatching(ce.srv, "POST /sandboxes")))
	}
	// A plain 503 means unreachable: planned, nothing left remotely.
	ce.srv.Inject(cubetest.Fault{Route: "POST /sandboxes", Status: 503, Count: -1})
	p := ce.create("planned", CreateOptions{})
	ce.srv.ClearFaults()
	if p.State != StatePlanned {
		t.Errorf("create on 503: %s", p.State)
	}
	// Slow replies: everything just takes longer.
	ce.srv.Inject(cubetest.Fault{Delay: 200 * time.Millisecond, Count: 6})
	if out := ce.mustSh("retried", "cat a.txt"); out != "hello\n" {
		t.Errorf("slow cube: %q", out)
	}
	ce.srv.ClearFaults()
	// Delete while pausing: 503 + Retry-After, retried by rm.
	ce.srv.Inject(cubetest.Fault{Route: "DELETE /sandboxes/*", Status: 503, RetryAfter: time.Second})
	if _, err := ce.e.Remove(ctx, "retried", RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.e.Remove(ctx, "planned", RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if ids := ce.srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left after rm: %v", ids)
	}
	// A delete that keeps failing is an error, and the World stays.
	ce.create("stays", CreateOptions{})
	ce.srv.Inject(cubetest.Fault{Route: "DELETE /sandboxes/*", Status: 500, Count: -1})
	if _, err := ce.e.Remove(ctx, "stays", RemoveOptions{Force: true}); err == nil {
		t.Error("rm succeeded although the sandbox could not be deleted")
	}
	ce.srv.ClearFaults()
	if w, err := ce.e.World("stays"); err != nil || w.Cube.SandboxID == "" || w.State != StateReady {
		t.Errorf("world after a failed rm: %+v %v", w, err)
	}
}

func TestCubeSnapshotFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeWorld(t, cubetest.Options{})
	ce.mustSh("w", "echo 1 > a.txt")
	// 409: another snapshot runs; retried.
	ce.srv.Inject(cubetest.Fault{Route: "POST /sandboxes/*/snapshots", Status: 409})
	s1, err := ce.e.Snapshot(ctx, "w", SnapshotOptions{})
	if err != nil || s1.Cube == "" {
		t.Fatalf("snapshot after a 409: %+v %v", s1, err)
	}
	// 500: the snapshot fails as a whole; the timeline does not change.
	ce.srv.Inject(cubetest.Fault{Route: "POST /sandboxes/*/snapshots", Status: 500, Count: -1})
	if _, err := ce.e.Snapshot(ctx, "w", SnapshotOptions{}); err == nil || !strings.Contains(err.Error(), "cube snapshot") {
		t.Errorf("snapshot on 500: %v", err)
	}
	ce.srv.ClearFaults()
	if tl, _ := ce.e.Timeline("w"); len(tl.Snapshots) != 1 || tl.Head != s1.ID {
		t.Errorf("timeline after a failed snapshot: %+v", tl)
	}
	// A rollback Cube refuses in place replaces the sandbox from the snapshot.
	ce.mustSh("w", "echo 2 > a.txt")
	old, _ := ce.e.World("w")
	ce.srv.Inject(cubetest.Fault{Route: "POST /sandboxes/*/rollback", Status: 500})
	if _, err := ce.e.Rollback(ctx, "w", s1.ID, RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	now, _ := ce.e.World("w")
	if now.Cube.SandboxID == old.Cube.SandboxID || now.State != StateReady {
		t.Errorf("sandbox not replaced: %s -> %s", old.Cube.SandboxID, now.Cube.SandboxID)
	}
	if out := ce.mustSh("w", "cat a.txt"); out != "1\n" {
		t.Errorf("after rollback: %q", out)
	}
	if ids := ce.srv.SandboxIDs(); len(ids) != 1 || ids[0] != now.Cube.SandboxID {
		t.Errorf("sandboxes %v, want only %s", ids, now.Cube.SandboxID)
	}
}

func TestCubeSessionDroppedStreamAndKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeWorld(t, cubetest.Options{})
	// The first start of the exec is the overlay check; cut the second.
	// The command runs on in the sandbox (as under envd): the runner
	// re-attaches through Process.Connect and the session ends with the
	// command's own exit, not as lost.
	ce.srv.Inject(cubetest.Fault{Route: "POST /process.Process/Start", Skip: 1, DropStreamAfter: 3})
	out, errs, m := ce.sh("w", "echo one; sleep 1; echo two; sleep 1; echo three; exit 7")
	if m.State != SessionFailed || m.ExitCode != 7 || !strings.Contains(errs, "re-attaching to process") || !strings.Contains(out, "three") {
		t.Errorf("dropped stream: %+v stdout %q stderr %q", m, out, errs)
	}
	if n := len(ce.srv.Requests()); n == 0 {
		t.Fatal("no requests recorded")
	}
	attached := 0
	for _, r := range ce.srv.Requests() {
		if r.Path == "/process.Process/Connect" {
			attached++
		}
	}
	if attached != 1 {
		t.Errorf("%d Process.Connect calls, want 1", attached)
	}
	ce.srv.ClearFaults()

	// A signal to the session reaches the command in the sandbox.
	meta, err := ce.e.Exec(ctx, "w", ExecOptions{Argv: []string{"sh", "-c", "echo started; exec sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	if meta.State != SessionRunning || meta.PID <= 0 || meta.InitPID != meta.PID {
		t.Fatalf("running meta: %+v", meta)
	}
	if ss, _ := ce.e.Sessions("w"); ce.e.Info(ctx, cubeWorld(t, ce.e, "w")).Running != 1 || len(ss) == 0 {
		t.Errorf("the running session is not listed")
	}
	dir := ce.e.SessionDir("w", meta.ID)
	ce.waitRecords(dir, 0)
	if _, err := ce.e.Kill(ctx, "w", meta.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	end, err := WaitSession(wctx, dir)
	if err != nil || end.State != SessionKilled || end.Signal != "SIGTERM" || end.ExitCode != 143 {
		t.Errorf("killed session: %+v %v", end, err)
	}
	// A snapshot with a session running freezes nothing on this host.
	meta, err = ce.e.Exec(ctx, "w", ExecOptions{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if pids := ce.e.worldPIDs(cubeWorld(t, ce.e, "w")); len(pids) != 0 {
		t.Errorf("a cube session's runner namespace holds host processes %v", pids)
	}
	if _, err := ce.e.Remove(ctx, "w", RemoveOptions{Force: true, Kill: true}); err != nil {
		t.Fatal(err)
	}
	if ids := ce.srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
}

func cubeWorld(t *testing.T, e *Engine, name string) *World {
	t.Helper()
	w, err := e.World(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func cubeWaitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("condition not met within 10s")
}

func TestCubeGuestDrivers(t *testing.T) {
	t.Parallel()
	for _, d := range []overlay.Backend{overlay.BackendUnionfs, overlay.BackendFuseOverlayfs} {
		t.Run(string(d), func(t *testing.T) {
			bin := map[overlay.Backend]string{overlay.BackendUnionfs: "unionfs", overlay.BackendFuseOverlayfs: "fuse-overlayfs"}[d]
			if _, err := exec.LookPath(bin); err != nil {
				t.Skipf("%s is not installed", bin)
			}
			ce := newCubeEnv(t, cubetest.Options{})
			w := ce.create("w", CreateOptions{MountBackend: d})
			if w.Cube.Driver != string(d) || w.Dialect != d.Dialect() {
				t.Fatalf("driver %q dialect %q", w.Cube.Driver, w.Dialect)
			}
			ce.mustSh("w", "echo more >> a.txt && rm gone.txt && echo n > n.txt")
			got := ce.changes("w")
			if got["a.txt"] != overlay.Modified || got["gone.txt"] != overlay.Deleted || got["n.txt"] != overlay.Added || len(got) != 3 {
				t.Errorf("%s changes: %v", d, got)
			}
			if _, err := ce.e.Remove(context.Background(), "w", RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The drivers are tried in order; one whose mount fails is skipped.
func TestCubeGuestDriverFallback(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("unionfs"); err != nil {
		t.Skip("unionfs-fuse is not installed")
	}
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	w := ce.create("w", CreateOptions{})
	// A mount(8) that refuses overlays, where the guest finds it first (the
	// World's layers dir is the only host directory under /tmp it sees).
	fake := filepath.Join(ce.e.Paths.Layers("w"), "fakebin")
	writeFile(t, filepath.Join(fake, "mount"), "#!/bin/sh\necho 'overlay: not supported here' >&2\nexit 32\n")
	if err := os.Chmod(filepath.Join(fake, "mount"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.Cube.Driver, w.MountBackend = "", ""
	c, err := ce.e.cubeClient()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PATH": "/mnt/strata/world/fakebin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	driver, fresh, err := ce.e.setupGuestOverlay(ctx, c, w, ce.e.cubeSandbox(w), true, env)
	if err != nil || driver != overlay.BackendUnionfs || !fresh {
		t.Fatalf("fallback: %q %v %v", driver, fresh, err)
	}
	// Nothing works: every driver's reason is reported.
	w.MountBackend = overlay.BackendKernel
	_, _, err = ce.e.setupGuestOverlay(ctx, c, w, ce.e.cubeSandbox(w), true, env)
	var ge *GuestOverlayError
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), "kernel: overlay: not supported here") {
		t.Errorf("no driver: %v", err)
	}
}

func TestCubeDoctor(t *testing.T) {
	ctx := context.Background()
	t.Setenv("STRATA_TEST_CUBE_KEY", "")
	ce := newCubeEnv(t, cubetest.Options{APIKey: "sekrit"}, func(cc *CubeConfig) { cc.APIKeyEnv = "STRATA_TEST_CUBE_KEY" })
	d := ce.e.cubeDoctor(ctx)
	if d.Status != "unauthorized" || !strings.Contains(d.Detail, "$STRATA_TEST_CUBE_KEY is empty") {
		t.Errorf("doctor without the key: %+v", d)
	}
	t.Setenv("STRATA_TEST_CUBE_KEY", "sekrit")
	d = ce.e.cubeDoctor(ctx)
	if d.Status != "ok" || !strings.Contains(d.Detail, "host mount ok") {
		t.Errorf("doctor: %+v", d)
	}
	if ids := ce.srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("the probe sandbox was left: %v", ids)
	}
	for _, r := range requestsMatching(ce.srv, "POST /sandboxes") {
		if r.Header.Get("X-Api-Key") != "sekrit" {
			t.Errorf("create without the key: %v", r.Header)
		}
	}
	// The key is never written to the state root.
	ce.create("w", CreateOptions{})
	_ = filepath.Walk(ce.e.Paths.Root, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), "sekrit") {
				t.Errorf("%s holds the API key", p)
			}
		}
		return nil
	})
	ce2 := newCubeEnv(t, cubetest.Options{}, func(cc *CubeConfig) { cc.Template = "" })
	if d := ce2.e.cubeDoctor(ctx); d.Status != "ok" || !strings.Contains(d.Detail, "not checked: no template") {
		t.Errorf("doctor without a template: %+v", d)
	}
	ce2.srv.Down()
	if d := ce2.e.cubeDoctor(ctx); d.Status != "unreachable" {
		t.Errorf("doctor with Cube down: %+v", d)
	}
}

func TestCubeRollbackStoppedWorld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeWorld(t, cubetest.Options{})
	ce.mustSh("w", "echo one > /tmp/vm && echo 1 > a.txt")
	s1, err := ce.e.Snapshot(ctx, "w", SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ce.mustSh("w", "echo two > /tmp/vm && echo 2 > a.txt")
	if _, err := ce.e.Stop(ctx, "w", StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.e.Rollback(ctx, "w", s1.ID, RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if w := cubeWorld(t, ce.e, "w"); w.State != StateReady {
		t.Errorf("state after rolling back a stopped world: %s", w.State)
	}
	if out := ce.mustSh("w", "cat /tmp/vm a.txt"); out != "one\n1\n" {
		t.Errorf("after rollback: %q", out)
	}
	// Cube down: the rollback fails before anything changes.
	ce.srv.Down()
	if _, err := ce.e.Rollback(ctx, "w", s1.ID, RollbackOptions{}); !errors.Is(err, cube.ErrUnavailable) {
		t.Errorf("rollback with Cube down: %v", err)
	}
	if err := ce.srv.Up(); err != nil {
		t.Fatal(err)
	}
	if tl, _ := ce.e.Timeline("w"); len(tl.Snapshots) != 2 || tl.Head != s1.ID {
		t.Errorf("timeline after a failed rollback: head %s, %d snapshots", tl.Head, len(tl.Snapshots))
	}
}

// A sandbox that went away behind strata's back (deleted on the cluster,
// lost with its node) is found out on the next exec: CubeProxy answers
// the guest call 500 with retcode 310507, not 404, 410 or 502, and exec
// repairs the World, a new sandbox from the template mounting the same
// layers, instead of failing; the World's changes are all there.
func TestCubeExecRepairsGoneSandbox(t *testing.T) {
	t.Parallel()
	ce := newCubeEnv(t, cubetest.Options{})
	w := ce.create("w", CreateOptions{})
	ce.mustSh("w", "echo mine > mine.txt")
	old := w.Cube.SandboxID
	c, err := ce.e.cubeClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	ce.srv.ResetRequests()
	if got := ce.mustSh("w", "cat mine.txt"); got != "mine\n" {
		t.Fatalf("exec after the sandbox vanished: %q", got)
	}
	var noRoute bool
	for _, r := range ce.srv.Requests() {
		if r.Server == "proxy" && r.Status == 500 && strings.Contains(r.Host, old) {
			noRoute = true
		}
	}
	if !noRoute {
		t.Error("the fake's proxy never answered 500 for the gone sandbox: the test proves nothing")
	}
	if n := len(requestsMatching(ce.srv, "POST /sandboxes")); n != 1 {
		t.Errorf("%d creates, want one new sandbox", n)
	}
	w2, err := ce.e.World("w")
	if err != nil {
		t.Fatal(err)
	}
	if w2.Cube.SandboxID == old || w2.Cube.SandboxID == "" || w2.State != StateReady {
		t.Errorf("after repair: sandbox %q (was %q), state %s", w2.Cube.SandboxID, old, w2.State)
	}
	if got := ce.changes("w"); got["mine.txt"] != overlay.Added || len(got) != 1 {
		t.Errorf("changes after repair: %v", got)
	}
}
