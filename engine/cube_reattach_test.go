package engine

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
	"github.com/stratahq/strata/engine/cuberun"
)

// followAll reads a session's transcript to its end: stdout, stderr.
func followAll(t testing.TB, ctx context.Context, dir string) (string, string) {
	t.Helper()
	var out, errb strings.Builder
	if err := FollowTranscript(ctx, dir, 0, func(r Record) error {
		if r.Stream == StreamStderr {
			errb.Write(r.Data)
		} else {
			out.Write(r.Data)
		}
		return nil
	}); err != nil {
		t.Fatalf("follow: %v", err)
	}
	return out.String(), errb.String()
}

// killRunner kills a cube session's runner the way a crash or an OOM kill
// would, and waits until the session reads as lost.
func killRunner(t *testing.T, dir string, m SessionMeta) {
	t.Helper()
	if err := unix.Kill(m.InitPID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cubeWaitFor(t, func() bool { cur, _ := ReadSessionMeta(dir); return cur.State == SessionLost })
}

func countRequests(ce *cubeEnv, path, bodyPart string) int {
	n := 0
	for _, r := range ce.srv.Requests() {
		if r.Path == path && strings.Contains(string(r.Body), bodyPart) {
			n++
		}
	}
	return n
}

// A cube session whose runner died while its command ran on in the
// sandbox is found again by the next strata that looks (Process.List by
// the recorded pid and tag) and re-attached (Process.Connect): its
// transcript goes on, notes the gap, and the session ends with the
// command's own exit status instead of "lost".
func TestCubeReattachAfterRunnerDied(t *testing.T) {
	t.Parallel()
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(90 * time.Second)
	m, dir := ce.startSh(ctx, "w", "echo one; while [ ! -e go ]; do sleep 0.05; done; echo two; exit 5")
	ce.waitRecords(dir, 0)
	killRunner(t, dir, m)

	// The next look re-attaches.
	ss, err := ce.e.Sessions("w")
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions: %v %v", ss, err)
	}
	if ss[0].State != SessionRunning || ss[0].InitPID == m.InitPID || ss[0].InitPID <= 0 || ss[0].GuestPID != m.GuestPID {
		t.Fatalf("after the runner died, sessions shows %+v; want it running under a new runner (old %d)", ss[0], m.InitPID)
	}
	if n := countRequests(ce, "/process.Process/List", ""); n != 1 {
		t.Errorf("%d Process.List calls, want 1", n)
	}
	if n := countRequests(ce, "/process.Process/Connect", ""); n != 1 {
		t.Errorf("%d Process.Connect calls, want 1", n)
	}
	// A second look finds it running: no second runner.
	if _, err := ce.e.Sessions("w"); err != nil || countRequests(ce, "/process.Process/List", "") != 1 {
		t.Errorf("a second look asked the sandbox again")
	}
	ce.mustSh("w", "touch go")
	out, errs := followAll(t, ctx, dir)
	end, err := WaitSession(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if end.State != SessionFailed || end.ExitCode != 5 {
		t.Errorf("re-attached session ended %s exit %d (%s); want failed, exit 5", end.State, end.ExitCode, end.Error)
	}
	if !strings.Contains(out, "one\n") || !strings.Contains(out, "two\n") {
		t.Errorf("stdout %q: the transcript did not continue", out)
	}
	if !strings.Contains(errs, "re-attached to process") || !strings.Contains(errs, "not in this transcript") {
		t.Errorf("stderr %q: the gap is not noted", errs)
	}
}

// Only when the command is truly gone is the session lost, and then it is
// recorded once: later looks do not ask the sandbox again.
func TestCubeLostOnlyWhenProcessGone(t *testing.T) {
	t.Parallel()
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(60 * time.Second)
	m, dir := ce.startSh(ctx, "w", "echo one; while [ ! -e go ]; do sleep 0.05; done")
	ce.waitRecords(dir, 0)
	killRunner(t, dir, m)
	// The command ends while no runner watches it.
	if _, _, end := ce.sh("w", "touch go"); end.State != SessionExited {
		t.Fatalf("touch: %+v", end)
	}
	client, err := ce.e.cubeClient()
	if err != nil {
		t.Fatal(err)
	}
	sb := ce.e.cubeSandbox(cubeWorld(t, ce.e, "w"))
	cubeWaitFor(t, func() bool {
		ps, err := client.ListProcesses(ctx, sb)
		return err == nil && !slices.ContainsFunc(ps, func(p cube.ProcessInfo) bool { return p.PID == m.GuestPID })
	})
	lists := countRequests(ce, "/process.Process/List", "")
	var s SessionMeta
	ss, err := ce.e.Sessions("w")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ss {
		if x.ID == m.ID {
			s = x
		}
	}
	if s.State != SessionLost || s.ExitCode != LostExitCode || !strings.Contains(s.Error, "no longer running") {
		t.Fatalf("session of a gone process: %s exit %d %q; want lost, saying the process is gone", s.State, s.ExitCode, s.Error)
	}
	if n := countRequests(ce, "/process.Process/List", ""); n != lists+1 {
		t.Errorf("%d List calls for one look, want 1", n-lists)
	}
	lists++
	if reread, _ := ReadSessionMeta(ce.e.SessionDir("w", m.ID)); reread.State != SessionLost || reread.EndedAt.IsZero() {
		t.Errorf("the lost end is not recorded: %+v", reread)
	}
	for range 3 {
		_, _ = ce.e.Sessions("w")
	}
	if n := countRequests(ce, "/process.Process/List", ""); n != lists {
		t.Errorf("a recorded lost session was looked up again (%d List calls, was %d)", n, lists)
	}
}

// kill sends SIGTERM through envd's SendSignal, and SIGKILL after the grace
// when the command ignores it.
func TestCubeKillTermThenKill(t *testing.T) {
	old := cuberun.CubeKillGrace
	cuberun.CubeKillGrace = time.Second
	defer func() { cuberun.CubeKillGrace = old }()
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(60 * time.Second)
	m, dir := ce.startSh(ctx, "w", "trap '' TERM; echo ready; sleep 30")
	ce.waitRecords(dir, 0)
	start := time.Now()
	if _, err := ce.e.Kill(ctx, "w", m.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	end, err := WaitSession(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if end.State != SessionKilled || end.Signal != "SIGKILL" {
		t.Errorf("a command ignoring TERM ended %s %q exit %d; want killed by SIGKILL after the grace", end.State, end.Signal, end.ExitCode)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("kill took %s", took)
	}
	if countRequests(ce, "/process.Process/SendSignal", "SIGNAL_SIGTERM") != 1 || countRequests(ce, "/process.Process/SendSignal", "SIGNAL_SIGKILL") != 1 {
		t.Errorf("SendSignal calls: TERM %d, KILL %d; want one each",
			countRequests(ce, "/process.Process/SendSignal", "SIGNAL_SIGTERM"), countRequests(ce, "/process.Process/SendSignal", "SIGNAL_SIGKILL"))
	}
	_, errs := followAll(t, ctx, dir)
	if !strings.Contains(errs, "sending SIGKILL") {
		t.Errorf("stderr %q: the escalation is not noted", errs)
	}
}

// A terminal session whose runner died is re-attached with its terminal:
// attach works again, input reaches the command through envd and its
// answer lands in the transcript.
func TestCubeReattachTTYAfterRunnerDied(t *testing.T) {
	t.Parallel()
	ce := newCubeWorld(t, cubetest.Options{})
	ctx := ce.timeout(60 * time.Second)
	m, dir := ce.start(ctx, "w", ExecOptions{TTY: true, Env: []string{"LANG=C"}, Argv: []string{"sh", "-c", `printf 'name? '; read a; echo "got:$a"`}})
	ce.waitRecords(dir, 1)
	killRunner(t, dir, m)
	ss, err := ce.e.Sessions("w")
	if err != nil || len(ss) != 1 || ss[0].State != SessionRunning {
		t.Fatalf("after the runner died: %+v %v", ss, err)
	}
	in, feed := io.Pipe()
	defer feed.Close()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Attach(ctx, dir, in, out, AttachOptions{}) }()
	time.Sleep(200 * time.Millisecond)
	_, _ = feed.Write([]byte("again\r"))
	waitFor(t, "the answer after re-attaching", func() bool { return strings.Contains(out.String(), "got:again") })
	if err := <-done; err != nil {
		t.Errorf("attach: %v", err)
	}
	end, err := WaitSession(ctx, dir)
	if err != nil || end.State != SessionExited {
		t.Errorf("end: %+v %v", end, err)
	}
}

// A cube session whose runner died while its command holds a picked file
// open for writing in the sandbox is lost for now, not over: apply refuses
// rather than take "no runner" for "no writer", and nothing reaches the
// source.
func TestCubeApplyRefusesWhileRunnerLost(t *testing.T) {
	ctx := context.Background()
	ce := newCubeWorld(t, cubetest.Options{})
	m, dir := ce.startSh(ctx, "w", heldWriter)
	ce.waitUpper("w", "ready")
	killRunner(t, dir, m)
	_, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}})
	if !errors.Is(err, ErrWorldWriting) || !strings.Contains(err.Error(), "session "+m.ID+" is still writing held.txt") {
		cur, _ := ReadSessionMeta(dir)
		t.Fatalf("apply while a lost cube session's command holds the file: %v (session %s)", err, cur.State)
	}
	if fileExists(filepath.Join(ce.src, "held.txt")) {
		t.Fatal("held.txt reached the source")
	}
}
