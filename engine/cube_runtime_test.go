package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
	"github.com/stratahq/strata/overlay"
)

// The tests re-execute their own binary as the cube session runner (the
// local session init is dispatched by TestMain).
//
// The main goroutine keeps the main thread: the fake's sandboxes are
// threads in mount namespaces of their own, and one that ran on the main
// thread would leave it there when it ends (Go parks a locked main thread
// instead of ending it); /proc/self/mountinfo, which the mount code reads, is
// the main thread's, so no later mount of the process would show up in it.
func init() {
	if len(os.Args) > 1 && os.Args[1] == CubeSessionArg {
		os.Exit(CubeSessionMain(os.Args[2:]))
	}
	runtime.LockOSThread()
}

// cubeEnv is an engine configured for a fake CubeSandbox, and a source tree.
type cubeEnv struct {
	t   testing.TB
	srv *cubetest.Server
	e   *Engine
	src string
}

func newCubeEnv(t testing.TB, opts cubetest.Options, edit ...func(*CubeConfig)) *cubeEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the cube fake runs sandboxes in mount namespaces and the guest mounts overlays: run as root")
	}
	srv := cubetest.New(t, opts)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "a.txt"), "hello\n")
	writeFile(t, filepath.Join(src, "sub", "b.txt"), "bye\n")
	writeFile(t, filepath.Join(src, "gone.txt"), "delete me\n")
	cc := CubeConfig{Endpoint: srv.URL(), ProxyAddr: srv.ProxyAddr(), Domain: srv.Domain(), Template: "base"}
	for _, f := range edit {
		f(&cc)
	}
	cfg := (&Config{Cube: cc}).withDefaults()
	e, err := Open(context.Background(), Options{StateRoot: filepath.Join(base, "state"), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ce := &cubeEnv{t: t, srv: srv, e: e, src: src}
	// Sandboxes first (they hold the guest overlays), then any runner.
	t.Cleanup(ce.cleanup)
	return ce
}

// newCubeWorld is newCubeEnv with the cube World "w" made of its source.
func newCubeWorld(t testing.TB, opts cubetest.Options, edit ...func(*CubeConfig)) *cubeEnv {
	t.Helper()
	ce := newCubeEnv(t, opts, edit...)
	ce.create("w", CreateOptions{})
	return ce
}

// timeout is a context that ends after d or with the test.
func (ce *cubeEnv) timeout(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(ce.t.Context(), d)
	ce.t.Cleanup(cancel)
	return ctx
}

func (ce *cubeEnv) cleanup() {
	ws, _ := ce.e.Worlds()
	for _, w := range ws {
		ss, _ := ce.e.Sessions(w.Name)
		for _, s := range ss {
			if !s.State.Ended() {
				_ = KillSession(ce.e.SessionDir(w.Name, s.ID), 9)
			}
		}
	}
}

func (ce *cubeEnv) create(name string, o CreateOptions) *World {
	ce.t.Helper()
	o.Name, o.Backend = name, RuntimeCube
	if o.Source == "" {
		o.Source = ce.src
	}
	w, err := ce.e.Create(context.Background(), o)
	if err != nil {
		ce.t.Fatalf("create %s: %v", name, err)
	}
	return w
}

// run executes a command in a World and waits for it: stdout, stderr, meta.
func (ce *cubeEnv) run(name string, argv ...string) (string, string, SessionMeta) {
	ce.t.Helper()
	return ce.runWith(name, ExecOptions{Argv: argv, Env: []string{"LANG=C"}})
}

// runWith is run with any exec options.
func (ce *cubeEnv) runWith(name string, o ExecOptions) (string, string, SessionMeta) {
	ce.t.Helper()
	argv := o.Argv
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	meta, err := ce.e.Exec(ctx, name, o)
	if err != nil {
		ce.t.Fatalf("exec %v in %s: %v", argv, name, err)
	}
	dir := ce.e.SessionDir(name, meta.ID)
	out, errs := followAll(ce.t, ctx, dir)
	end, err := WaitSession(ctx, dir)
	if err != nil {
		ce.t.Fatal(err)
	}
	return out, errs, end
}

// start starts a session in World name and returns without waiting for it:
// its meta as Exec returned it, and its dir. A session still running at the
// end of the test is killed.
func (ce *cubeEnv) start(ctx context.Context, name string, o ExecOptions) (SessionMeta, string) {
	ce.t.Helper()
	meta, err := ce.e.Exec(ctx, name, o)
	if err != nil {
		ce.t.Fatalf("exec %v in %s: %v", o.Argv, name, err)
	}
	ce.t.Cleanup(func() { _, _ = ce.e.Kill(context.Background(), name, meta.ID, syscall.SIGKILL) })
	return meta, ce.e.SessionDir(name, meta.ID)
}

// startSh starts sh -c script in World name (start).
func (ce *cubeEnv) startSh(ctx context.Context, name, script string) (SessionMeta, string) {
	ce.t.Helper()
	return ce.start(ctx, name, ExecOptions{Argv: []string{"sh", "-c", script}})
}

// waitRecords waits until the session in dir has more than n transcript
// records (its command's output has begun to arrive).
func (ce *cubeEnv) waitRecords(dir string, n int) {
	ce.t.Helper()
	waitFor(ce.t, fmt.Sprintf("more than %d transcript records in %s", n, dir), func() bool {
		recs, _, _ := ReadTranscript(filepath.Join(dir, TranscriptFile), 0)
		return len(recs) > n
	})
}

// waitUpper waits until rel exists in World name's upper: a session wrote
// it in the sandbox. It waits up to 30 s: a session's start on the fake
// takes seconds on a loaded machine.
func (ce *cubeEnv) waitUpper(name, rel string) {
	ce.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !fileExists(filepath.Join(ce.e.Paths.Upper(name), rel)); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			ss, _ := ce.e.Sessions(name)
			ce.t.Fatalf("no %s in the upper of %s after 30 s (sessions: %+v)", rel, name, ss)
		}
	}
}

func (ce *cubeEnv) sh(name, script string) (string, string, SessionMeta) {
	ce.t.Helper()
	return ce.run(name, "sh", "-c", script)
}

func (ce *cubeEnv) mustSh(name, script string) string {
	ce.t.Helper()
	out, errs, m := ce.sh(name, script)
	if m.State != SessionExited {
		ce.t.Fatalf("%s: %s exit %d: %s%s", script, m.State, m.ExitCode, errs, m.Error)
	}
	return out
}

func (ce *cubeEnv) changes(name string) map[string]overlay.Kind {
	ce.t.Helper()
	w, err := ce.e.World(name)
	if err != nil {
		ce.t.Fatal(err)
	}
	cs, err := ce.e.Changes(context.Background(), w, false)
	if err != nil {
		ce.t.Fatal(err)
	}
	out := map[string]overlay.Kind{}
	for _, c := range cs.Changes {
		out[c.Path] = c.Kind
	}
	return out
}

// ticking starts a session that appends to the file ticks in the World
// every 10 ms, waits for its first write, and returns the session and the
// file's size as the host's upper has it. The session is killed at the end
// of the test.
func (ce *cubeEnv) ticking(ctx context.Context, name string) (SessionMeta, func() int64) {
	ce.t.Helper()
	meta, _ := ce.startSh(ctx, name, "while :; do echo tick >> ticks; sleep 0.01; done")
	ticks := filepath.Join(ce.e.Paths.Upper(name), "ticks")
	size := func() int64 {
		st, err := os.Stat(ticks)
		if err != nil {
			return 0
		}
		return st.Size()
	}
	deadline := time.Now().Add(10 * time.Second)
	for size() == 0 {
		if time.Now().After(deadline) {
			ce.t.Fatal("the loop never wrote")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return meta, size
}

func requestsMatching(srv *cubetest.Server, route string) []cubetest.Request {
	var out []cubetest.Request
	for _, r := range srv.Requests() {
		if ok, _ := path.Match(route, r.Method+" "+r.Path); ok {
			out = append(out, r)
		}
	}
	return out
}

func TestCubeFullFlow(t *testing.T) {
	t.Parallel()
	ce := newCubeEnv(t, cubetest.Options{})
	w := ce.create("w", CreateOptions{})
	if w.State != StateReady || w.Cube.SandboxID == "" {
		t.Fatalf("world after create: %+v %+v", w, w.Cube)
	}
	if w.Cube.Driver != "kernel" || w.Dialect != overlay.DialectKernel || w.MountBackend != overlay.BackendKernel {
		t.Errorf("driver %q dialect %q backend %q, want kernel (root, overlay in the guest)", w.Cube.Driver, w.Dialect, w.MountBackend)
	}
	onDisk, err := ce.e.World("w")
	if err != nil || onDisk.Cube.Driver != "kernel" || onDisk.State != StateReady {
		t.Fatalf("world.toml: %+v %v", onDisk, err)
	}
	// The create request carried the source read-only and the World dir.
	creates := requestsMatching(ce.srv, "POST /sandboxes")
	if len(creates) != 1 || string(creates[0].Body) != w.Cube.Request {
		t.Fatalf("create bodies %d; recorded request %s", len(creates), w.Cube.Request)
	}
	var body struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(creates[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	layers := filepath.Join(ce.e.Paths.World("w"), LayersDir)
	wantMounts := `[{"hostPath":"` + ce.src + `","mountPath":"/mnt/strata/lower","readOnly":true},{"hostPath":"` + layers + `","mountPath":"/mnt/strata/world","readOnly":false}]`
	if body.Metadata["host-mount"] != wantMounts || body.Metadata["strata-world-id"] != w.ID {
		t.Errorf("metadata %v\nwant host-mount %s", body.Metadata, wantMounts)
	}
	if ce.e.Paths.Upper("w") != filepath.Join(layers, "upper") || ce.e.Paths.Work("w") != filepath.Join(layers, "work") {
		t.Errorf("upper %s work %s, want them in %s", ce.e.Paths.Upper("w"), ce.e.Paths.Work("w"), layers)
	}
	// The guest sees the layers and nothing else of the World: not its
	// sessions, bases or timeline, which a hostile command could rewrite.
	if got := ce.mustSh("w", "ls -A /mnt/strata/world"); got != "upper\nwork\n" {
		t.Errorf("the guest sees %q of the World, want only upper and work", got)
	}

	// The source at its own path, read through the guest's overlay.
	out, _, m := ce.run("w", "cat", "a.txt")
	if out != "hello\n" || m.State != SessionExited || m.Runtime != RuntimeCube || m.Isolation != "" {
		t.Fatalf("cat a.txt: %q %+v", out, m)
	}
	if pwd := ce.mustSh("w", "pwd"); pwd != ce.src+"\n" {
		t.Errorf("cwd in the guest %q, want the source path", pwd)
	}
	ce.mustSh("w", "echo more >> a.txt && echo new > c.txt && rm gone.txt && mkdir -p sub/d && echo x > sub/d/x")
	// Exit codes and stderr pass through; a missing command is 127 like a shell.
	_, errs, m := ce.sh("w", "echo oops >&2; exit 3")
	if m.State != SessionFailed || m.ExitCode != 3 || errs != "oops\n" || m.Attention != AttentionFailed {
		t.Errorf("exit 3: %+v stderr %q", m, errs)
	}
	if _, _, m := ce.run("w", "no-such-command-xyz"); m.ExitCode != 127 {
		t.Errorf("missing command: exit %d, want 127", m.ExitCode)
	}

	got := ce.changes("w")
	want := map[string]overlay.Kind{"a.txt": overlay.Modified, "c.txt": overlay.Added, "gone.txt": overlay.Deleted, "sub/d": overlay.Added, "sub/d/x": overlay.Added}
	for p, k := range want {
		if got[p] != k {
			t.Errorf("change %s: %v, want %v (all: %v)", p, got[p], k, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("changes %v, want %v (no probe files, no work dir)", got, want)
	}
	if readFile(t, filepath.Join(ce.src, "a.txt")) != "hello\n" || !cubePathExists(filepath.Join(ce.src, "gone.txt")) {
		t.Fatal("the source changed before apply")
	}
	info := ce.e.Info(context.Background(), onDisk)
	if info.Status != "failed" || info.Changes != len(want) {
		t.Errorf("info: status %q changes %d", info.Status, info.Changes)
	}
	if _, err := ce.e.Apply(context.Background(), "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(ce.src, "a.txt")) != "hello\nmore\n" || readFile(t, filepath.Join(ce.src, "c.txt")) != "new\n" ||
		cubePathExists(filepath.Join(ce.src, "gone.txt")) || readFile(t, filepath.Join(ce.src, "sub/d/x")) != "x\n" {
		t.Error("apply did not publish every change")
	}

	res, err := ce.e.Remove(context.Background(), "w", RemoveOptions{Force: true})
	if err != nil || res.Trash == "" {
		t.Fatalf("remove: %+v %v", res, err)
	}
	if ids := ce.srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left after rm: %v", ids)
	}
}

func TestResolveCubeTemplate(t *testing.T) {
	t.Parallel()
	cc := CubeConfig{Templates: []CubeTemplate{
		{ID: "large", CPU: 8000, MemoryMB: 16384, DiskMB: 40960},
		{ID: "small", CPU: 1000, MemoryMB: 2048, DiskMB: 10240},
		{ID: "medium", CPU: 2000, MemoryMB: 4096, DiskMB: 20480},
	}}
	for _, tc := range []struct {
		explicit string
		want     CubeResources
		id       string
		err      string
	}{
		{want: CubeResources{}, id: "small"},
		{explicit: "mine", want: CubeResources{CPU: 99999}, id: "mine"},
		{want: CubeResources{CPU: 2000, MemoryMB: 4096}, id: "medium"},
		{want: CubeResources{CPU: 1500}, id: "medium"},
		{want: CubeResources{MemoryMB: 2048}, id: "small"},
		{want: CubeResources{DiskMB: 30000}, id: "large"},
		{want: CubeResources{CPU: 16000, MemoryMB: 4096}, err: "closest: large (cpu 8000m, memory 16384 MB, disk 40960 MB); medium"},
	} {
		id, err := ResolveCubeTemplate(cc, tc.explicit, tc.want)
		if tc.err != "" {
			if !errors.Is(err, ErrNoTemplateFits) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: %v, want an error containing %q", tc.want, err, tc.err)
			}
			continue
		}
		if err != nil || id != tc.id {
			t.Errorf("%+v: %q %v, want %q", tc.want, id, err, tc.id)
		}
	}
	cc.Template = "dflt"
	if id, _ := ResolveCubeTemplate(cc, "", CubeResources{}); id != "dflt" {
		t.Errorf("default template %q", id)
	}
	if _, err := ResolveCubeTemplate(CubeConfig{}, "", CubeResources{}); err == nil {
		t.Error("no template at all: no error")
	}
}

func cubePathExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestCubeSnapshotRollbackFork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	w := ce.create("w", CreateOptions{})
	// /tmp is the sandbox's own rootfs: only the Cube snapshot keeps it.
	ce.mustSh("w", "echo one > /tmp/vm && echo v1 > a.txt && echo f > f.txt")
	s1, err := ce.e.Snapshot(ctx, "w", SnapshotOptions{Message: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s1.Cube, "snap-") || len(ce.srv.SnapshotIDs()) != 1 {
		t.Fatalf("snapshot %+v; fake snapshots %v", s1, ce.srv.SnapshotIDs())
	}
	tl, _ := ce.e.Timeline("w")
	if len(tl.Snapshots) != 1 || tl.Snapshots[0].Cube != s1.Cube {
		t.Fatalf("timeline does not link the cube snapshot: %+v", tl)
	}
	ce.mustSh("w", "echo two > /tmp/vm && echo v2 > a.txt && rm f.txt && echo g > g.txt")

	res, err := ce.e.Rollback(ctx, "w", s1.ID, RollbackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Saved == nil || res.Saved.Cube == "" {
		t.Errorf("the snapshot before rollback has no cube half: %+v", res.Saved)
	}
	if out := ce.mustSh("w", "cat /tmp/vm a.txt f.txt; ls g.txt 2>&1 || true"); !strings.HasPrefix(out, "one\nv1\nf\n") || !strings.Contains(out, "No such file") {
		t.Errorf("after rollback the guest sees %q, want the VM and the World as at the snapshot", out)
	}
	if n := len(requestsMatching(ce.srv, "POST /sandboxes/*/rollback")); n != 1 {
		t.Errorf("%d cube rollbacks, want 1", n)
	}
	got := ce.changes("w")
	if got["a.txt"] != overlay.Modified || got["f.txt"] != overlay.Added || len(got) != 2 {
		t.Errorf("changes after rollback: %v", got)
	}

	forks, err := ce.e.Fork(ctx, "w", ForkOptions{Snap: s1.ID, N: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		if f.Cube == nil || f.Cube.SandboxID == "" || f.Cube.SandboxID == w.Cube.SandboxID || f.MountBackend != overlay.BackendKernel {
			t.Fatalf("fork %+v %+v", f, f.Cube)
		}
		if out := ce.mustSh(f.Name, "cat /tmp/vm a.txt f.txt"); out != "one\nv1\nf\n" {
			t.Errorf("fork %s sees %q, want the snapshot's VM and upper", f.Name, out)
		}
	}
	fromSnap := 0
	for _, r := range requestsMatching(ce.srv, "POST /sandboxes") {
		if strings.Contains(string(r.Body), `"templateID":"`+s1.Cube+`"`) {
			fromSnap++
		}
	}
	if fromSnap != 2 {
		t.Errorf("%d creates from %s, want 2", fromSnap, s1.Cube)
	}
	ce.mustSh(forks[0].Name, "echo mine > a.txt")
	if readFile(t, filepath.Join(ce.e.Paths.Upper("w"), "a.txt")) != "v1\n" {
		t.Error("a fork wrote into its parent's upper")
	}
	for _, name := range []string{"w", forks[0].Name, forks[1].Name} {
		if _, err := ce.e.Remove(ctx, name, RemoveOptions{Purge: true}); err != nil {
			t.Fatal(err)
		}
	}
	if ids := ce.srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
	if ids := ce.srv.SnapshotIDs(); len(ids) != 0 {
		t.Errorf("cube snapshots left after purging every World: %v", ids)
	}
}

// What strata changes in an upper from the host (restore, drop applied) is
// seen by the guest once its overlay is mounted again; mounts never stack.
func TestCubeGuestRemountAfterHostChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	w := ce.create("w", CreateOptions{})
	countMounts := "awk -v m=" + ce.src + " '$5 == m { n++ } END { print n + 0 }' /proc/self/mountinfo"
	ce.mustSh("w", "echo mine > a.txt")
	if err := ce.e.cubeUnmountGuest(ctx, w); err != nil {
		t.Fatal(err)
	}
	c, err := ce.e.cubeClient()
	if err != nil {
		t.Fatal(err)
	}
	var direct bytes.Buffer
	if _, err := c.Exec(ctx, ce.e.cubeSandbox(w), cube.ExecRequest{Cmd: "/bin/sh", Args: []string{"-c", countMounts}}, &direct, nil); err != nil || direct.String() != "0\n" {
		t.Errorf("mounts at the source after unmount: %q %v", direct.String(), err)
	}
	if out := ce.mustSh("w", countMounts); out != "1\n" {
		// exec set the overlay up again: exactly one mount.
		t.Errorf("mounts at the source after exec: %q", out)
	}
	if err := ce.e.cubeUnmountGuest(ctx, w); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ce.e.Paths.Upper("w"), "a.txt"), "restored\n")
	if err := ce.e.cubeRemountGuest(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := ce.e.cubeRemountGuest(ctx, w); err != nil {
		t.Fatal(err)
	}
	if out := ce.mustSh("w", "cat a.txt; "+countMounts); out != "restored\n1\n" {
		t.Errorf("after remount: %q", out)
	}
}

// TestCubeNoNetwork: --no-network runs the command in a network namespace of
// its own inside the sandbox, with only lo.
func TestCubeNoNetwork(t *testing.T) {
	t.Parallel()
	ce := newCubeWorld(t, cubetest.Options{})
	out, _, end := ce.runWith("w", ExecOptions{Argv: []string{"sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"}, NoNetwork: true})
	if end.ExitCode != 0 || !end.NoNetwork {
		t.Fatalf("session end %+v", end)
	}
	if got := strings.TrimSpace(out); got != "lo" {
		t.Fatalf("interfaces with --no-network: %q, want only lo", got)
	}
	// Without the flag the sandbox's own interfaces are there.
	if got, _, _ := ce.sh("w", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); strings.TrimSpace(got) == "lo" {
		t.Fatalf("without --no-network only lo: %q", got)
	}
}

// TestCubeSnapshotPausesSessions: the commands of a cube World's running
// sessions are stopped inside the sandbox while the upper is captured.
func TestCubeSnapshotPausesSessions(t *testing.T) {
	t.Parallel()
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(60 * time.Second)
	meta, size := ce.ticking(ctx, "w")
	if m, _ := ReadSessionMeta(ce.e.SessionDir("w", meta.ID)); m.GuestPID <= 0 {
		t.Fatalf("no guest pid recorded: %+v", m)
	}
	w := cubeWorld(t, ce.e, "w")
	thaw := ce.e.cubeFreeze(ctx, w)
	before := size()
	time.Sleep(200 * time.Millisecond)
	if after := size(); after != before {
		thaw()
		t.Fatalf("the session kept writing while frozen: %d -> %d bytes", before, after)
	}
	thaw()
	time.Sleep(200 * time.Millisecond)
	if size() == before {
		t.Fatal("the session did not resume")
	}
	if _, err := ce.e.Snapshot(ctx, "w", SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
}

// KILL and STOP reach the command in the sandbox (the runner relays them),
// and the session ends killed by SIGKILL, not lost with its command still
// running.
func TestCubeKillSignals(t *testing.T) {
	t.Parallel()
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(60 * time.Second)
	meta, size := ce.ticking(ctx, "w")
	dir := ce.e.SessionDir("w", meta.ID)
	grows := func() bool {
		before := size()
		time.Sleep(300 * time.Millisecond)
		return size() != before
	}
	// The relay is one envd exec, started when the runner gets the signal:
	// give it time on a busy machine.
	within := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}

	if _, err := ce.e.Kill(ctx, "w", meta.ID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	within("the command kept writing after SIGSTOP", func() bool { return !grows() })
	if m, _ := ReadSessionMeta(dir); m.State.Ended() {
		t.Fatalf("SIGSTOP ended the session: %+v", m)
	}
	if _, err := ce.e.Kill(ctx, "w", meta.ID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	within("the command did not resume after SIGCONT", grows)

	if _, err := ce.e.Kill(ctx, "w", meta.ID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	end, err := WaitSession(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if end.State != SessionKilled || end.Signal != "SIGKILL" || end.ExitCode != 137 {
		t.Fatalf("after kill -KILL: state %s, signal %q, exit %d; want killed by SIGKILL, 137", end.State, end.Signal, end.ExitCode)
	}
	if grows() {
		t.Fatal("the command still writes after its session ended")
	}
}

// A cube session on a terminal: attach, detach, re-attach with a replay and
// a resize, input through envd, "waiting" while it blocks reading the
// terminal, and the whole screen in the transcript.
func TestCubeTTYSession(t *testing.T) {
	t.Parallel()
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(60 * time.Second)
	meta, dir := ce.start(ctx, "w", ExecOptions{
		TTY:  true,
		Env:  []string{"LANG=C"}, // no TERM: the session gets xterm-256color
		Argv: []string{"sh", "-c", `printf 'name? '; read a; echo "got:$a"; read b; echo "got2:$b"; stty size; [ -t 0 ] && echo is-tty; echo "TERM=$TERM"`},
	})
	if !meta.TTY {
		t.Fatalf("meta.TTY is false: %+v", meta)
	}

	in1, feed1 := io.Pipe()
	defer feed1.Close()
	out1 := &syncBuffer{}
	done1 := make(chan error, 1)
	go func() { done1 <- Attach(ctx, dir, in1, out1, AttachOptions{Replay: true}) }()
	waitFor(t, "the prompt", func() bool { return strings.Contains(out1.String(), "name? ") })
	if strings.Contains(out1.String(), "strata-start") {
		t.Errorf("the wrapper's start marker reached the screen: %q", out1.String())
	}
	// Quiet and blocked reading the terminal: waiting for the person.
	waitFor(t, "attention waiting", func() bool {
		m, _ := ReadSessionMeta(dir)
		return m.Attention == AttentionWaiting
	})
	_, _ = feed1.Write([]byte("hello\r"))
	waitFor(t, "the answer to the first input", func() bool { return strings.Contains(out1.String(), "got:hello") })
	waitFor(t, "attention running again", func() bool {
		m, _ := ReadSessionMeta(dir)
		return m.Attention == AttentionRunning || m.Attention == AttentionWaiting && strings.Contains(out1.String(), "got:hello")
	})
	_, _ = feed1.Write([]byte{0x1d})
	if err := <-done1; !errors.Is(err, ErrDetached) {
		t.Fatalf("detach key: Attach returned %v, want ErrDetached", err)
	}
	if m, _ := ReadSessionMeta(dir); m.State != SessionRunning {
		t.Fatalf("after detaching the session is %s, want running", m.State)
	}

	out2 := reattachResized(ctx, t, dir, "got:hello", "bye\r")
	for _, want := range []string{"got2:bye", "40 100", "is-tty", "TERM=xterm-256color"} {
		if !strings.Contains(out2.String(), want) {
			t.Errorf("attached output lacks %q: %q", want, out2.String())
		}
	}
	m, err := WaitSession(ctx, dir)
	if err != nil || m.State != SessionExited || m.Attention != AttentionDone {
		t.Fatalf("session end: %v %s %s", err, m.State, m.Attention)
	}
	var screen strings.Builder
	records, _, _ := ReadTranscript(filepath.Join(dir, TranscriptFile), 0)
	for _, r := range records {
		if r.Stream == StreamPTY {
			screen.Write(r.Data)
		}
	}
	for _, want := range []string{"name? hello", "got:hello", "got2:bye"} {
		if !strings.Contains(screen.String(), want) {
			t.Errorf("transcript lacks %q: %q", want, screen.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, AttachSocket)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("attach socket left after the end: %v", err)
	}
	out3 := &syncBuffer{}
	if err := Attach(ctx, dir, strings.NewReader(""), out3, AttachOptions{Replay: true}); err != nil || !strings.Contains(out3.String(), "got2:bye") {
		t.Errorf("attach after the end: %v %q", err, out3.String())
	}
}

// A quiet command that is not reading its terminal is not waiting.
func TestCubeTTYQuietIsNotWaiting(t *testing.T) {
	t.Parallel()
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(60 * time.Second)
	_, dir := ce.start(ctx, "w", ExecOptions{TTY: true, Argv: []string{"sh", "-c", "echo start; sleep 4; echo end"}})
	for m, _ := ReadSessionMeta(dir); !m.State.Ended(); m, _ = ReadSessionMeta(dir) {
		if m.Attention == AttentionWaiting {
			t.Fatalf("a sleeping command was reported waiting for input")
		}
		time.Sleep(50 * time.Millisecond)
	}
	m, err := WaitSession(ctx, dir)
	if err != nil || m.State != SessionExited {
		t.Fatalf("end: %v %+v", err, m)
	}
}

// A cube World made before layers/ existed (upper and work in the World
// dir) keeps working: its recreated sandbox mounts the World dir, as it
// did, and its changes are all there.
func TestCubeLegacyLayout(t *testing.T) {
	t.Parallel()
	ce := newCubeEnv(t, cubetest.Options{})
	w := ce.create("w", CreateOptions{})
	ce.mustSh("w", "echo mine > mine.txt")
	// Back to the old layout, with the sandbox gone (as after a restart).
	c, err := ce.e.cubeClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), w.Cube.SandboxID); err != nil {
		t.Fatal(err)
	}
	dir := ce.e.Paths.World("w")
	for _, d := range []string{"upper", "work"} {
		if err := os.Rename(filepath.Join(dir, LayersDir, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, LayersDir)); err != nil {
		t.Fatal(err)
	}
	if ce.e.Paths.Upper("w") != filepath.Join(dir, "upper") {
		t.Fatalf("legacy upper: %s", ce.e.Paths.Upper("w"))
	}
	if _, err := ce.e.Up(context.Background(), "w"); err != nil {
		t.Fatal(err)
	}
	if got := ce.mustSh("w", "cat mine.txt; ls -A /mnt/strata/world | grep -c upper"); got != "mine\n1\n" {
		t.Errorf("legacy World after up: %q", got)
	}
	creates := requestsMatching(ce.srv, "POST /sandboxes")
	if last := string(creates[len(creates)-1].Body); !strings.Contains(last, `"hostPath\":\"`+dir+`\"`) {
		t.Errorf("the recreated sandbox does not mount the World dir: %s", last)
	}
	if got := ce.changes("w"); got["mine.txt"] != overlay.Added || len(got) != 1 {
		t.Errorf("changes: %v", got)
	}
}

// strata top on a cube World reports its sessions' processes in the
// sandbox, not the runners on this host.
func TestCubeResources(t *testing.T) {
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(60 * time.Second)
	// A busy child, and dd holding a 20 MB buffer it cannot write out.
	meta, dir := ce.startSh(ctx, "w", `(while :; do :; done) & dd if=/dev/zero bs=20M count=1 2>/dev/null | sleep 60 & wait`)
	// Until the busy child has run a CPU-second, which no idle runner on
	// this host does: a share of the CPU, not a set percentage of it, since
	// on a loaded machine the child may get well under a third of a core.
	var r Resources
	deadline := time.Now().Add(50 * time.Second)
	for {
		rs, err := ce.e.SampleResources(ctx, []string{"w"}, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		r = rs[0]
		if r.MemoryBytes > 20<<20 && r.CPUSeconds >= 1 && r.CPUPercent > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resources of a busy cube World: %+v", r)
		}
	}
	if r.Accounting != "cube" || r.Running != 1 || r.Processes < 3 || r.CPUSeconds <= 0 {
		t.Errorf("resources: %+v; want cube accounting, 1 session, its 3+ processes", r)
	}
	if _, err := ce.e.Kill(ctx, "w", meta.ID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitSession(ctx, dir); err != nil {
		t.Fatal(err)
	}
	idle, err := ce.e.Resources(ctx, "w")
	if err != nil || idle.Running != 0 || idle.Processes != 0 || idle.MemoryBytes != 0 {
		t.Errorf("after the session ended: %+v %v", idle, err)
	}
}

// A person's command line (the TUI's x) runs in the sandbox's own shell:
// this machine's $SHELL may not be in the sandbox.
func TestCubeShellArgv(t *testing.T) {
	ce := newCubeWorld(t, cubetest.Options{})
	t.Setenv("SHELL", "/no/such/shell")
	argv, err := ce.e.ShellArgv("w", `echo "in $0" | tr a-z A-Z; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	out, _, end := ce.runWith("w", ExecOptions{Argv: argv, TTY: true, Env: []string{"LANG=C"}})
	if end.ExitCode != 3 || !strings.Contains(out, "IN ") || strings.Contains(out, "NO/SUCH") {
		t.Errorf("command line through ShellArgv: exit %d, %q", end.ExitCode, out)
	}
	if argv, _ := ce.e.ShellArgv("w", ""); argv[0] != "/bin/sh" || !strings.Contains(argv[2], "bash -i") {
		t.Errorf("interactive shell of a cube World: %q", argv)
	}
}
