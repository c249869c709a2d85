package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// A descriptor leaked into strata (not close-on-exec: a harness's pipe) is
// held by none of the processes strata leaves running: not the session's
// init, not the World's egress proxy. The pipe's reader sees its EOF when
// strata exits, not when the session ends.
func TestE2EExecHoldsNoLeakedFD(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w", "--source", e.source)
	devNull, err := os.Open(os.DevNull)
	must(t, err)
	defer devNull.Close()
	pr, pw, err := os.Pipe()
	must(t, err)
	defer pr.Close()
	c := e.cmd("exec", "w", "--detach", "--json", "--", "sleep", "30")
	// fd 6 in strata: past the fds its helpers are handed (3, 4, 5).
	c.ExtraFiles = []*os.File{devNull, devNull, devNull, pw}
	out, err := c.Output()
	pw.Close()
	if err != nil {
		t.Fatalf("exec --detach: %v: %s", err, out)
	}
	done := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := pr.Read(b[:])
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read data from a pipe nobody wrote")
		}
	case <-time.After(10 * time.Second):
		var holders []string
		ents, _ := os.ReadDir("/proc")
		for _, d := range ents {
			cmd, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
			if strings.Contains(string(cmd), e.home) {
				holders = append(holders, d.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
			}
		}
		t.Fatalf("the pipe strata was handed is still held 10s after it exited; strata processes: %v", holders)
	}
	var m struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal(out, &m))
	e.ok("kill", "w", m.ID, "--force")
}
