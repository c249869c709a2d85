package main

import (
	"fmt"
	"strings"
	"testing"
)

// A command on a terminal that ends before strata has connected to it (its
// attach socket goes with it) still shows its output and passes its exit
// status through: `strata exec --tty W -- true` is not a dial error.
func TestE2EExecTTYShortCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w", "--source", e.source)
	for i := range 12 {
		word := fmt.Sprintf("short-%d", i)
		out, code := e.onPTY(true, "exec", "w", "--tty", "--", "sh", "-c", "echo "+word+"; exit 3")
		if strings.Contains(out, "attach.sock") || strings.Contains(out, "dial unix") {
			t.Fatalf("run %d: strata failed to attach instead of showing the ended command:\n%s", i, out)
		}
		if !strings.Contains(out, word) {
			t.Fatalf("run %d: the command's output %q is missing:\n%s", i, word, out)
		}
		if code != 3 {
			t.Fatalf("run %d: exit status %d, want the command's 3:\n%s", i, code, out)
		}
	}
}
