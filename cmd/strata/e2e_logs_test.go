package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A TTY session's transcript holds resize records and the terminal's escape
// sequences; strata logs prints the text, strata logs --raw the bytes, and
// with no SESSION it picks the newest command session, not a shell or an
// editor opened afterwards.
func TestE2ELogsReadable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	script := `printf '\033[1;32mbuild ok\033[0m\r\n'; printf '\033]0;agent title\007step 1\r\n'; printf '50%%\r100%%\r\n'`
	id := strings.TrimSpace(e.ok("exec", "w", "--tty", "--detach", "--", "sh", "-c", script))
	e.ok("logs", "w", id, "-f") // waits for the end
	want := "build ok\nstep 1\n50%\n100%\n"
	for _, args := range [][]string{{"logs", "w", id}, {"logs", "w", id, "-f"}, {"logs", "w"}} {
		out, errs, code := e.run(args...)
		if code != 0 || out != want {
			t.Errorf("strata %s: exit %d, stdout %q, want %q (stderr %q)", strings.Join(args, " "), code, out, want, errs)
		}
	}
	raw := e.ok("logs", "w", id, "--raw")
	if !strings.Contains(raw, "\x1b[1;32mbuild ok\x1b[0m\r") || !strings.Contains(raw, "\x1b]0;agent title\x07") {
		t.Errorf("logs --raw lost the terminal's bytes: %q", raw)
	}
	// The resize record is a size, never bytes on stdout.
	if strings.ContainsAny(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(raw, "\x1b", ""), "\r", ""), "\x07", ""), "\x00\x01\x02\x03") {
		t.Errorf("logs --raw printed a resize record's binary size: %q", raw)
	}
	js := e.ok("logs", "w", id, "--json")
	if !strings.Contains(js, `"stream":"resize","rows":`) || strings.Contains(js, `"stream":"resize","data"`) {
		t.Errorf("logs --json resize record: %s", js)
	}

	// Afterwards a person opens a shell and an editor on terminals, as
	// strata shell and the TUI's edit key do; strata logs w still means the
	// agent's session.
	e.ok("exec", "w", "--tty", "--detach", "--", "sh", "-i")
	time.Sleep(20 * time.Millisecond) // ids sort by millisecond
	e.ok("exec", "w", "--tty", "--detach", "--", "vi", "a.txt")
	if out := e.ok("logs", "w"); out != want {
		t.Errorf("strata logs w picked another session than the agent's: %q", out)
	}
	// A newer command session is the one then.
	e.ok("exec", "w", "--", "echo", "newest")
	if out := e.ok("logs", "w"); out != "newest\n" {
		t.Errorf("strata logs w after a newer command: %q", out)
	}
}

// strata top on a pipe prints plain tables (no cursor codes), one by
// default; on a terminal it redraws in place.
func TestE2ETopPipeIsPlain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	// Bounded: into a pipe, top once redrew forever.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, strataBin, "top", "--interval", "100ms")
	c.Env, c.Dir = append(os.Environ(), e.vars...), e.source
	b, err := c.Output()
	if err != nil {
		t.Fatalf("top into a pipe: %v (%q)", err, b)
	}
	out := string(b)
	if strings.Contains(out, "\x1b") || strings.Count(out, "WORLD") != 1 || !strings.Contains(out, "w ") {
		t.Errorf("top into a pipe: %q", out)
	}
	out = e.ok("top", "--interval", "100ms", "--count", "2")
	if strings.Contains(out, "\x1b") || strings.Count(out, "WORLD") != 2 {
		t.Errorf("top --count 2 into a pipe: %q", out)
	}
	live := e.onTerminal("top", "--count", "2", "--interval", "100ms")
	if strings.Count(live, "\x1b[H") != 3 || !strings.Contains(live, "CPU%") {
		t.Errorf("top on a terminal does not redraw in place: %q", live)
	}
}

// onTerminal runs strata with stdout and stderr on a new pseudo-terminal
// and returns what it wrote there.
func (e *env) onTerminal(args ...string) string {
	e.t.Helper()
	out, _ := e.onPTY(false, args...)
	return out
}
