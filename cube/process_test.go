package cube_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

// TestExecSendsStdinExplicitly: envd opens a stdin pipe unless the Start
// request says "stdin": false, so a command that reads stdin waits forever
// unless the client says which it wants.
func TestExecSendsStdinExplicitly(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.ResetRequests()
	var out bytes.Buffer
	res, err := c.Exec(ctx, sb, sh("cat; echo done"), &out, nil)
	if err != nil || res.ExitCode != 0 || out.String() != "done\n" {
		t.Fatalf("cat without stdin = %+v %q, %v; want EOF at once", res, out.String(), err)
	}
	body := onlyRequest(t, srv, "POST /process.Process/Start").Body
	if !bytes.Contains(body, []byte(`"stdin":false`)) {
		t.Errorf("Start body %s does not say stdin false", body)
	}

	// With a stdin pipe: input arrives, CloseStdin ends it.
	pids := make(chan int, 1)
	type result struct {
		res cube.ExecResult
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		req := sh("cat")
		req.Stdin = true
		req.OnStart = func(pid int) { pids <- pid }
		res, err := c.Exec(ctx, sb, req, &out, nil)
		done <- result{res, out.String(), err}
	}()
	pid := <-pids
	if err := c.SendStdin(ctx, sb, pid, []byte("hello\n")); err != nil {
		t.Fatalf("send stdin: %v", err)
	}
	if err := c.CloseStdin(ctx, sb, pid); err != nil {
		t.Fatalf("close stdin: %v", err)
	}
	r := <-done
	if r.err != nil || r.res.ExitCode != 0 || r.out != "hello\n" {
		t.Fatalf("cat with stdin = %+v %q, %v", r.res, r.out, r.err)
	}
	if err := c.CloseStdin(ctx, sb, pid); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("close stdin of an ended process: %v, want ErrNotFound", err)
	}
}

// TestListAndSignalProcesses: Process.List shows a running command by pid
// and tag; SendSignal kills it.
func TestListAndSignalProcesses(t *testing.T) {
	_, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pids := make(chan int, 1)
	done := make(chan cube.ExecResult, 1)
	go func() {
		req := sh("sleep 30")
		req.Tag = "strata-s1"
		req.OnStart = func(pid int) { pids <- pid }
		res, _ := c.Exec(ctx, sb, req, nil, nil)
		done <- res
	}()
	pid := <-pids
	procs, err := c.ListProcesses(ctx, sb)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	found := false
	for _, p := range procs {
		if p.PID == pid && p.Tag == "strata-s1" && p.Config.Cmd == "/bin/sh" && strings.Contains(strings.Join(p.Config.Args, " "), "sleep 30") {
			found = true
		}
	}
	if !found {
		t.Fatalf("list = %+v, want pid %d tagged strata-s1", procs, pid)
	}
	if err := c.SendSignal(ctx, sb, pid, "SIGNAL_SIGHUP"); err == nil {
		t.Error("a signal envd cannot send was accepted")
	}
	if err := c.SendSignal(ctx, sb, pid, cube.SignalKill); err != nil {
		t.Fatalf("signal: %v", err)
	}
	if res := <-done; res.ExitCode != 137 {
		t.Errorf("killed process ended %+v, want 137", res)
	}
	if err := c.SendSignal(ctx, sb, pid, cube.SignalTerm); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("signal an ended process: %v, want ErrNotFound", err)
	}
}

// TestDroppedStreamLeavesProcessRunning: as under envd, a dropped exec
// stream does not end the command; Process.List still shows it and Attach
// (Process.Connect) carries its output on to its end.
func TestDroppedStreamLeavesProcessRunning(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv.Inject(cubetest.Fault{Route: "POST /process.Process/Start", DropStreamAfter: 2})
	pid := 0
	req := sh("echo one; sleep 1; echo two; sleep 1; echo three; exit 3")
	req.OnStart = func(p int) { pid = p }
	var first bytes.Buffer
	if _, err := c.Exec(ctx, sb, req, &first, nil); !errors.Is(err, cube.ErrStreamDropped) {
		t.Fatalf("exec: %v, want ErrStreamDropped", err)
	}
	procs, err := c.ListProcesses(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	running := false
	for _, p := range procs {
		running = running || p.PID == pid
	}
	if pid == 0 || !running {
		t.Fatalf("pid %d not running after the drop: %+v", pid, procs)
	}
	var rest bytes.Buffer
	res, err := c.Attach(ctx, sb, pid, &rest, nil)
	if err != nil || res.ExitCode != 3 || res.PID != pid {
		t.Fatalf("attach = %+v, %v", res, err)
	}
	if !strings.Contains(first.String()+rest.String(), "three") {
		t.Errorf("output %q + %q lacks the end", first.String(), rest.String())
	}
	if _, err := c.Attach(ctx, sb, pid, nil, nil); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("attach to an ended process: %v, want ErrNotFound", err)
	}
}
