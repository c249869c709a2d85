package tui

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2ETmux drives the real strata binary in tmux at 80x24 and 160x48,
// reading the screen with capture-pane: new World, run a command and watch
// its output arrive, pick one hunk of three, apply, snapshot, a change
// made by another strata process, rollback.
func TestE2ETmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (make deps installs it)")
	}
	bin := filepath.Join(t.TempDir(), "strata")
	build := exec.Command("go", "build", "-o", bin, "../cmd/strata")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build strata: %v\n%s", err, out)
	}
	for _, sz := range [][2]int{{80, 24}, {160, 48}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) { e2eSession(t, bin, sz[0], sz[1]) })
	}
}

type tmux struct {
	t    *testing.T
	name string
}

func (x tmux) run(args ...string) string {
	x.t.Helper()
	// A private server (-L): the test never touches the user's own tmux.
	out, err := exec.Command("tmux", append([]string{"-L", x.name}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (x tmux) keys(keys ...string) {
	x.t.Helper()
	for _, k := range keys {
		x.run("send-keys", "-t", x.name, k)
		time.Sleep(60 * time.Millisecond)
	}
}

func (x tmux) text(s string) {
	x.t.Helper()
	x.run("send-keys", "-t", x.name, "-l", s)
	time.Sleep(60 * time.Millisecond)
}

func (x tmux) screen() string { return x.run("capture-pane", "-p", "-t", x.name) }

func (x tmux) wait(what string, cond func(string) bool) string {
	x.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := x.screen()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("timed out waiting for %s; screen:\n%s", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (x tmux) waitFor(text string) string {
	x.t.Helper()
	return x.wait(strconv.Quote(text), func(s string) bool { return strings.Contains(s, text) })
}

func e2eSession(t *testing.T, bin string, w, h int) {
	home, cfg, src := t.TempDir(), t.TempDir(), t.TempDir()
	base := threeHunks()
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"STRATA_HOME=" + home, "XDG_CONFIG_HOME=" + cfg, "XDG_STATE_HOME=" + cfg, "TERM=xterm-256color"}
	x := tmux{t: t, name: fmt.Sprintf("strata-e2e-%d-%d", os.Getpid(), w)}
	cmd := fmt.Sprintf("cd %s && exec env %s %s", src, strings.Join(env, " "), bin)
	x.run("new-session", "-d", "-s", x.name, "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), cmd)
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-L", x.name, "kill-server").Run()
		rm := exec.Command(bin, "rm", "e2e", "--force", "--purge", "--kill")
		rm.Env = append(os.Environ(), env...)
		_ = rm.Run()
	})
	strata := func(args ...string) string {
		c := exec.Command(bin, args...)
		c.Env = append(os.Environ(), env...)
		c.Dir = src
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("strata %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	x.waitFor("No Worlds over")
	x.keys("n")
	x.waitFor("New World")
	x.text("e2e")
	x.keys("Enter")
	x.waitFor("created World e2e")

	x.keys("x")
	x.waitFor("Run in e2e")
	x.text(editThree + "; echo OUTPUT-MARK")
	x.keys("Enter", "2")
	x.waitFor("OUTPUT-MARK")

	x.keys("4")
	x.waitFor("hunk 1/3")
	x.keys("l", "Space")
	x.waitFor("picked 1/3")
	x.keys("a")
	x.waitFor("Apply to the source?")
	x.keys("Enter")
	x.waitFor("applied 1 path")
	got, _ := os.ReadFile(filepath.Join(src, "a.txt"))
	if want := strings.Replace(base, "line 15\n", "line fifteen\n", 1); string(got) != want {
		t.Fatalf("source after apply:\n%s", got)
	}

	x.keys("5", "s")
	x.waitFor("Snapshot e2e")
	x.text("before-extra")
	x.keys("Enter")
	x.waitFor("before-extra")

	// Another strata process changes the World: the TUI shows it within a second.
	strata("exec", "e2e", "--", "sh", "-c", "echo extra > b.txt")
	x.keys("3")
	start := time.Now()
	x.waitFor("A b.txt") // the changes row, not the session's command line
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("b.txt appeared after %v", d)
	}

	x.keys("5", "r")
	x.waitFor("Roll e2e back")
	x.keys("Enter")
	x.waitFor("rolled e2e back")
	if st := strata("status", "e2e"); strings.Contains(st, "b.txt") {
		t.Errorf("b.txt survived the rollback:\n%s", st)
	}
	x.keys("3")
	x.wait("b.txt to go", func(s string) bool { return !strings.Contains(s, "A b.txt") })

	if w >= 160 {
		idleCPU(t, x)
	}
	x.keys("q")
}

// idleCPU measures the TUI process with nothing changing for 10 s: its
// CPU time and how often any of its threads woke up. Before the renderer
// patch (third_party/bubbletea/PATCHES.md) this was 7 clock ticks and
// about 1,600 wake-ups per 10 s; now both are 0.
func idleCPU(t *testing.T, x tmux) {
	const idle = 10 * time.Second
	pid := strings.TrimSpace(x.run("display-message", "-p", "-t", x.name, "#{pane_pid}"))
	ticks := func() int {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		return u + s
	}
	wakeups := func() int {
		tasks, err := filepath.Glob("/proc/" + pid + "/task/*/status")
		if err != nil || len(tasks) == 0 {
			t.Fatalf("threads of %s: %v", pid, err)
		}
		n := 0
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			if err != nil {
				continue // a thread that ended
			}
			for line := range strings.Lines(string(b)) {
				if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
					c, _ := strconv.Atoi(strings.TrimSpace(v))
					n += c
				}
			}
		}
		return n
	}
	time.Sleep(infoTTL + time.Second) // the last info message expires first: that redraw is not idling
	t0, w0 := ticks(), wakeups()
	time.Sleep(idle)
	used, woke := ticks()-t0, wakeups()-w0 // clock ticks are 1/100 s
	t.Logf("idle for %v: %d clock ticks of CPU, %d wake-ups", idle, used, woke)
	// One tick allows for rounding at the edges of the window; a handful
	// of wake-ups for the Go runtime's own housekeeping.
	if used > 1 || woke > 10 {
		t.Errorf("idle TUI used %d clock ticks and woke %d times in %v; want no more than 1 and 10", used, woke, idle)
	}
}
