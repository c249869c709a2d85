package cube_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

func newSandbox(t *testing.T, opts cubetest.Options, req cube.CreateRequest) (*cubetest.Server, *cube.Client, *cube.Sandbox) {
	t.Helper()
	srv := cubetest.New(t, opts)
	c := newClient(t, srv)
	if req.TemplateID == "" {
		req.TemplateID = "base"
	}
	sb, err := c.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return srv, c, sb
}

func sh(script string) cube.ExecRequest {
	return cube.ExecRequest{Cmd: "/bin/sh", Args: []string{"-c", script}}
}

func TestExecStreamsAndReportsExitCodes(t *testing.T) {
	_, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{EnvVars: map[string]string{"FROM_CREATE": "yes"}})
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		req            cube.ExecRequest
		stdout, stderr string
		code           int
		status         string
	}{
		{"zero", sh(`echo out; echo err >&2`), "out\n", "err\n", 0, "exit status 0"},
		{"three", sh(`printf partial; exit 3`), "partial", "", 3, "exit status 3"},
		{"killed", sh(`kill -9 $$`), "", "", 137, "signal: killed"},
		{"terminated", sh(`kill -TERM $$`), "", "", 143, "signal: terminated"},
		{"env and cwd", cube.ExecRequest{Cmd: "sh", Args: []string{"-c", `echo $FROM_CREATE $FROM_EXEC; pwd`}, Envs: map[string]string{"FROM_EXEC": "too"}, Cwd: "/usr"}, "yes too\n/usr\n", "", 0, "exit status 0"},
		{"no shell", cube.ExecRequest{Cmd: "printf", Args: []string{"%s|", "a b", "$HOME"}}, "a b|$HOME|", "", 0, "exit status 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			res, err := c.Exec(ctx, sb, tc.req, &stdout, &stderr)
			if err != nil {
				t.Fatalf("exec: %v", err)
			}
			if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Errorf("stdout %q stderr %q, want %q and %q", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
			}
			if res.ExitCode != tc.code || res.Status != tc.status || res.PID <= 0 {
				t.Errorf("result = %+v, want code %d status %q", res, tc.code, tc.status)
			}
		})
	}
	if _, err := c.Exec(ctx, sb, cube.ExecRequest{Cmd: "no-such-binary"}, nil, nil); err == nil {
		t.Error("exec of a missing binary succeeded")
	} else if se := (*cube.StreamError)(nil); !errors.As(err, &se) {
		t.Errorf("missing binary: %v, want a StreamError", err)
	}
}

// timedWriter notes when each write arrived.
type timedWriter struct {
	mu     sync.Mutex
	writes []time.Time
	buf    bytes.Buffer
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, time.Now())
	return w.buf.Write(p)
}

func TestExecOutputArrivesWhileRunning(t *testing.T) {
	_, c, sb := newSandbox(t, cubetest.Options{KeepaliveEvery: 50 * time.Millisecond}, cube.CreateRequest{})
	var out timedWriter
	res, err := c.Exec(context.Background(), sb, sh(`echo first; sleep 0.4; echo second`), &out, nil)
	done := time.Now()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if out.buf.String() != "first\nsecond\n" || len(out.writes) != 2 {
		t.Fatalf("output %q in %d writes", out.buf.String(), len(out.writes))
	}
	if early := done.Sub(out.writes[0]); early < 300*time.Millisecond {
		t.Errorf("first line arrived only %v before the end: output is not streamed", early)
	}
}

func TestExecRequestFixture(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{AccessTokens: true}, cube.CreateRequest{})
	if sb.EnvdAccessToken == "" || sb.TrafficAccessToken == "" {
		t.Fatalf("fake handed out no tokens: %+v", sb)
	}
	_, err := c.Exec(context.Background(), sb, cube.ExecRequest{
		Cmd: "/bin/bash", Args: []string{"-l", "-c", "true"}, Envs: map[string]string{"A": "1"}, Cwd: "/tmp", Timeout: 90 * time.Second,
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := onlyRequest(t, srv, "POST /process.Process/Start")
	if r.Host != "49983-sb00000001.cube.app" {
		t.Errorf("Host = %q", r.Host)
	}
	checkFixture(t, "exec", r)

	// Without the tokens CubeProxy refuses.
	bare := *sb
	bare.EnvdAccessToken, bare.TrafficAccessToken = "", ""
	if _, err := c.Exec(context.Background(), &bare, sh("true"), nil, nil); !errors.Is(err, cube.ErrUnauthorized) {
		t.Errorf("exec without tokens: %v, want ErrUnauthorized", err)
	}
}

func TestExecTimeoutKills(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	start := time.Now()
	req := sh("sleep 30")
	req.Timeout = 200 * time.Millisecond
	res, err := c.Exec(context.Background(), sb, req, nil, nil)
	if err != nil || res.ExitCode != 137 {
		t.Errorf("timed out exec = %+v, %v; want killed (137)", res, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("timeout took %v", time.Since(start))
	}
	// The context deadline travels as Connect-Timeout-Ms: whichever side
	// notices first, the call returns at the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	res, err = c.Exec(ctx, sb, sh("sleep 30"), nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) && (err != nil || res.ExitCode != 137) {
		t.Errorf("exec past the context deadline: %+v, %v", res, err)
	}
	starts := requestsTo(srv, "POST /process.Process/Start")
	if ms, _ := strconv.Atoi(starts[len(starts)-1].Header.Get("Connect-Timeout-Ms")); ms <= 0 || ms > 200 {
		t.Errorf("Connect-Timeout-Ms = %d, want the 200ms deadline", ms)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("exec outlived its deadline by %v", time.Since(start)-200*time.Millisecond)
	}
}

func TestExecDroppedStream(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	srv.Inject(cubetest.Fault{Route: "POST /process.Process/Start", DropStreamAfter: 2})
	var out bytes.Buffer
	res, err := c.Exec(context.Background(), sb, sh(`echo one; sleep 0.2; echo two; sleep 0.2; echo three`), &out, nil)
	if !errors.Is(err, cube.ErrStreamDropped) {
		t.Fatalf("dropped stream: %v, want ErrStreamDropped", err)
	}
	if out.String() != "one\n" || res.PID <= 0 {
		t.Errorf("before the drop: output %q, result %+v", out.String(), res)
	}
	if n := len(requestsTo(srv, "POST /process.Process/Start")); n != 1 {
		t.Errorf("exec retried: %d requests", n)
	}
	// The proxy failing before the stream starts is an API error.
	srv.Inject(cubetest.Fault{Route: "POST /process.Process/Start", Status: 502, PlainText: true, Message: "upstream connect error"})
	var apiErr *cube.APIError
	if _, err := c.Exec(context.Background(), sb, sh("true"), nil, nil); !errors.As(err, &apiErr) || apiErr.Status != 502 || apiErr.Message != "upstream connect error" {
		t.Errorf("502 before the stream: %v", err)
	}
}

func TestFiles(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	data := []byte("bytes \x00\xff and more\n")
	if err := c.WriteFile(ctx, sb, "/tmp/deep/dir/f.bin", data); err != nil {
		t.Fatalf("write: %v", err)
	}
	checkFixture(t, "write-file", onlyRequest(t, srv, "POST /files"))
	got, err := c.ReadFile(ctx, sb, "/tmp/deep/dir/f.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %q, %v", got, err)
	}
	checkFixture(t, "read-file", onlyRequest(t, srv, "GET /files"))
	var out bytes.Buffer
	if _, err := c.Exec(ctx, sb, cube.ExecRequest{Cmd: "cat", Args: []string{"/tmp/deep/dir/f.bin"}}, &out, nil); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Errorf("exec sees %q, %v", out.Bytes(), err)
	}
	if _, err := c.ReadFile(ctx, sb, "/tmp/missing"); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("missing file: %v, want ErrNotFound", err)
	}
	// The sandbox's /tmp is its own, not the host's.
	if _, err := os.Stat("/tmp/deep/dir/f.bin"); err == nil {
		t.Error("sandbox file appeared in the host's /tmp")
	}
	if _, err := os.Stat(filepath.Join(srv.ScratchDir(sb.SandboxID), "deep/dir/f.bin")); err != nil {
		t.Errorf("file not in the sandbox scratch dir: %v", err)
	}
	// A gone sandbox answers 500 through CubeProxy with retcode 310507;
	// the client reads that as ErrNotFound, without retrying.
	if err := c.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	var apiErr *cube.APIError
	_, err = c.ReadFile(ctx, sb, "/tmp/deep/dir/f.bin")
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusInternalServerError || !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("read in a killed sandbox: %v, want 500 read as ErrNotFound", err)
	}
	if n := len(requestsTo(srv, "GET /files")); n != 1 {
		t.Errorf("a gone sandbox was asked %d times, want once", n)
	}
	if !strings.Contains(err.Error(), "gone") || strings.Contains(err.Error(), "<html") {
		t.Errorf("message = %q, want it to say the sandbox is gone, without the proxy's page", err)
	}
}

func TestHostMounts(t *testing.T) {
	src := t.TempDir()
	upper := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.c"), []byte("int main;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mnt := "/mnt/cubetest-" + filepath.Base(upper)
	_, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{HostMounts: []cube.HostMount{
		{HostPath: src, MountPath: src, ReadOnly: true}, // the source at its own absolute path
		{HostPath: upper, MountPath: mnt + "/upper"},    // a mount point the host lacks
	}})
	ctx := context.Background()
	var out, errOut bytes.Buffer
	res, err := c.Exec(ctx, sb, sh(`cat `+src+`/main.c && ! touch `+src+`/new 2>/dev/null && echo written > `+mnt+`/upper/w`), &out, &errOut)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v, stderr %s", res, err, errOut.String())
	}
	if out.String() != "int main;\n" {
		t.Errorf("source through the mount = %q", out.String())
	}
	if b, err := os.ReadFile(filepath.Join(upper, "w")); err != nil || string(b) != "written\n" {
		t.Errorf("write through the rw mount reached the host as %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(src, "new")); err == nil {
		t.Error("read-only mount was written")
	}
	if _, err := os.Stat(mnt); err == nil {
		t.Errorf("mount point %s was created on the host", mnt)
	}
	if err := c.WriteFile(ctx, sb, src+"/via-files-api", []byte("x")); err == nil {
		t.Error("files API wrote through a read-only mount")
	}
}

func TestMountsPersistAcrossExecs(t *testing.T) {
	_, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	if res, err := c.Exec(ctx, sb, sh(`mkdir -p /tmp/m && mount -t tmpfs cubetest-guest-tmpfs /tmp/m && echo kept > /tmp/m/f`), nil, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("mount in the sandbox: %+v, %v", res, err)
	}
	var out bytes.Buffer
	if res, err := c.Exec(ctx, sb, sh(`cat /tmp/m/f; grep -c ' /tmp/m ' /proc/self/mounts`), &out, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("second exec: %+v, %v", res, err)
	}
	if out.String() != "kept\n1\n" {
		t.Errorf("second exec sees %q, want the tmpfs mounted by the first", out.String())
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	if strings.Contains(string(mounts), "cubetest-guest-tmpfs") {
		t.Error("the sandbox's mount leaked to the host")
	}
}

// The cube runtime's flow: the source (read-only) and the directory holding
// a World's upper and work dirs come in as host mounts (one mount for both:
// overlayfs wants upperdir and workdir on the same mount); a command mounts
// the overlay at the source's own path; later commands see the merged view,
// and changes land in the host's upper dir only.
func TestOverlayInsideSandbox(t *testing.T) {
	src, state := t.TempDir(), t.TempDir()
	upper, work := filepath.Join(state, "upper"), filepath.Join(state, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("lower\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "/mnt/cubetest-" + filepath.Base(state)
	_, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{HostMounts: []cube.HostMount{
		{HostPath: src, MountPath: base + "/lower", ReadOnly: true},
		{HostPath: state, MountPath: base + "/state"},
	}})
	ctx := context.Background()
	var errOut bytes.Buffer
	setup := `mkdir -p ` + src + ` && mount -t overlay overlay -o lowerdir=` + base + `/lower,upperdir=` + base + `/state/upper,workdir=` + base + `/state/work ` + src
	if res, err := c.Exec(ctx, sb, sh(setup), nil, &errOut); err != nil || res.ExitCode != 0 {
		t.Fatalf("mount overlay in the sandbox: %+v %v %s", res, err, errOut.String())
	}
	var out bytes.Buffer
	if res, err := c.Exec(ctx, sb, cube.ExecRequest{Cmd: "sh", Args: []string{"-c", `cat a.txt && echo new > b.txt && echo changed >> a.txt`}, Cwd: src}, &out, &errOut); err != nil || res.ExitCode != 0 {
		t.Fatalf("work in the overlay: %+v %v %s", res, err, errOut.String())
	}
	if out.String() != "lower\n" {
		t.Errorf("merged view shows %q", out.String())
	}
	if b, _ := os.ReadFile(filepath.Join(upper, "b.txt")); string(b) != "new\n" {
		t.Errorf("upper b.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(upper, "a.txt")); string(b) != "lower\nchanged\n" {
		t.Errorf("upper a.txt = %q (copy-up)", b)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "a.txt")); string(b) != "lower\n" {
		t.Errorf("the source changed: %q", b)
	}
	if got, err := c.ReadFile(ctx, sb, src+"/b.txt"); err != nil || string(got) != "new\n" {
		t.Errorf("files API through the overlay: %q, %v", got, err)
	}
}

func TestExecRetriedOnlyWhenUnsent(t *testing.T) {
	srv, _, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	c := newClient(t, srv, func(cfg *cube.Config) {
		cfg.Retry = cube.RetryPolicy{Max: 20, Base: 20 * time.Millisecond, MaxDelay: 40 * time.Millisecond}
	})
	srv.Down()
	go func() {
		time.Sleep(100 * time.Millisecond)
		if err := srv.Up(); err != nil {
			t.Errorf("up: %v", err)
		}
	}()
	var out bytes.Buffer
	if res, err := c.Exec(context.Background(), sb, sh("echo reached"), &out, nil); err != nil || out.String() != "reached\n" || res.ExitCode != 0 {
		t.Fatalf("exec while the proxy comes up: %+v, %v, %q", res, err, out.String())
	}
	if n := len(requestsTo(srv, "POST /process.Process/Start")); n != 1 {
		t.Errorf("envd got %d starts, want 1", n)
	}
	srv.Down()
	defer srv.Up()
	impatient := newClient(t, srv, func(cfg *cube.Config) { cfg.Retry = cube.RetryPolicy{Max: -1} })
	if _, err := impatient.Exec(context.Background(), sb, sh("true"), nil, nil); !errors.Is(err, cube.ErrUnavailable) {
		t.Errorf("exec with the proxy down: %v, want ErrUnavailable", err)
	}
}

// waitFor polls a buffer until it holds want.
func waitFor(t *testing.T, what string, buf *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q never appeared in %q", what, want, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A command on a PTY: sized at start, resized by Update, fed by SendInput,
// and its output arrives as pty data (to stdout).
func TestExecPTY(t *testing.T) {
	_, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	started := make(chan int, 1)
	req := cube.ExecRequest{
		Cmd:     "/bin/sh",
		Args:    []string{"-c", `test -t 0 && test -t 2 && echo on-a-tty; stty size; read line; stty size; echo "got:$line"`},
		PTY:     &cube.PTYSize{Rows: 30, Cols: 100},
		OnStart: func(pid int) { started <- pid },
	}
	var out lockedBuffer
	type result struct {
		res cube.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Exec(ctx, sb, req, &out, nil)
		done <- result{res, err}
	}()
	var pid int
	select {
	case pid = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no start event")
	}
	waitFor(t, "initial size", &out, "30 100")
	if err := c.ResizePTY(ctx, sb, pid, cube.PTYSize{Rows: 40, Cols: 120}); err != nil {
		t.Fatalf("resize: %v", err)
	}
	if err := c.SendInput(ctx, sb, pid, []byte("hello\r")); err != nil {
		t.Fatalf("send input: %v", err)
	}
	r := <-done
	if r.err != nil || r.res.ExitCode != 0 || r.res.PID != pid {
		t.Fatalf("exec = %+v, %v", r.res, r.err)
	}
	got := out.String()
	for _, want := range []string{"on-a-tty\r\n", "30 100\r\n", "40 120\r\n", "got:hello\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	// The process is gone: envd answers not_found.
	if err := c.SendInput(ctx, sb, pid, []byte("x")); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("input to an ended process: %v, want ErrNotFound", err)
	}
	if err := c.ResizePTY(ctx, sb, pid, cube.PTYSize{Rows: 0, Cols: 80}); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("resize to 0 rows: %v", err)
	}
	// Input for a process without a terminal is refused.
	started2 := make(chan int, 1)
	go func() {
		_, _ = c.Exec(ctx, sb, cube.ExecRequest{Cmd: "sleep", Args: []string{"2"}, OnStart: func(p int) { started2 <- p }}, nil, nil)
	}()
	if err := c.SendInput(ctx, sb, <-started2, []byte("x")); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("input to a process without a pty: %v, want ErrNotFound", err)
	}
}

func TestPTYRequestFixtures(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	if _, err := c.Exec(ctx, sb, cube.ExecRequest{Cmd: "true", PTY: &cube.PTYSize{Rows: 24, Cols: 80}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// A pid that is not running: envd answers not_found, and the request
	// bytes do not depend on which pid the fake's process got.
	if err := c.SendInput(ctx, sb, 4242, []byte("ls\r")); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("input to pid 4242: %v, want ErrNotFound", err)
	}
	if err := c.ResizePTY(ctx, sb, 4242, cube.PTYSize{Rows: 50, Cols: 200}); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("resize of pid 4242: %v, want ErrNotFound", err)
	}
	checkFixture(t, "exec-pty", onlyRequest(t, srv, "POST /process.Process/Start"))
	checkFixture(t, "send-input", onlyRequest(t, srv, "POST /process.Process/SendInput"))
	checkFixture(t, "update-pty", onlyRequest(t, srv, "POST /process.Process/Update"))
}
