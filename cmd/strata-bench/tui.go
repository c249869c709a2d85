package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func init() {
	groups = append(groups, group{name: "tui", run: benchTUI})
}

// idleWindow is how long an idle TUI is watched (issue 6: "measured over
// 10 s").
const idleWindow = 10 * time.Second

// benchTUI measures the CPU an idle TUI uses in idleWindow, in a tmux pane
// of 120x40, against what a person would otherwise keep on screen to watch
// their Worlds: `watch -n 1 strata ls` (its children's CPU included).
func benchTUI(b *bench, _ []int) error {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.logf("tui: tmux is not installed (make deps installs it): skipped")
		return nil
	}
	src := filepath.Join(b.dir, "tui-src")
	_ = os.RemoveAll(src)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		return err
	}
	home := filepath.Join(b.dir, "home-tui")
	_ = os.RemoveAll(home)
	defer cleanupHome(home)
	env := []string{"STRATA_HOME=" + home, "STRATA_CONFIG=" + filepath.Join(b.dir, "none.toml"), "TERM=xterm-256color"}
	for _, w := range []string{"w1", "w2"} {
		if err := runEnv(env, src, b.bin, "new", w); err != nil {
			return err
		}
	}
	if err := runEnv(env, src, b.bin, "exec", "w1", "--", "sh", "-c", "echo changed >> a.txt; echo new > b.txt"); err != nil {
		return err
	}
	shell := "cd " + src + " && exec env " + strings.Join(env, " ") + " "
	var tuiCPU, watchCPU []time.Duration
	var wakeups []string
	runs := max(2, b.runs/5)
	for i := 0; i < runs; i++ {
		cpu, woke, err := idleCPU(shell + b.bin)
		if err != nil {
			return fmt.Errorf("idle TUI: %w", err)
		}
		tuiCPU = append(tuiCPU, cpu)
		wakeups = append(wakeups, strconv.Itoa(woke))
	}
	for i := 0; i < max(1, b.baseRuns-1); i++ {
		cpu, _, err := idleCPU(shell + "watch -n 1 " + b.bin + " ls")
		if err != nil {
			return fmt.Errorf("watch strata ls: %w", err)
		}
		watchCPU = append(watchCPU, cpu)
	}
	b.add(row{
		group: "tui", name: "TUI idle 10 s: CPU used (2 Worlds, 120x40)",
		strata: tuiCPU, baseName: "watch -n 1 strata ls", baseline: watchCPU, target: 10 * time.Millisecond, zero: true,
		note: "target: no CPU while nothing changes; the resolution is one clock tick (10 ms). The TUI's threads woke " +
			strings.Join(wakeups, ", ") + " times in the 10 s of each run",
	})
	return nil
}

var tmuxServers int

// idleCPU starts cmdline in a private tmux server, lets it settle for 3 s,
// then returns the CPU time it (and its reaped children) used in
// idleWindow, and how often its threads woke up.
func idleCPU(cmdline string) (time.Duration, int, error) {
	// A server of its own each time: a new session on a server that is
	// still shutting down fails with "server exited unexpectedly".
	tmuxServers++
	sock := fmt.Sprintf("strata-bench-%d-%d", os.Getpid(), tmuxServers)
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-L", sock}, args...)...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := tmux("new-session", "-d", "-s", "bench", "-x", "120", "-y", "40", cmdline); err != nil {
		return 0, 0, err
	}
	defer func() { _ = exec.Command("tmux", "-L", sock, "kill-server").Run() }()
	time.Sleep(3 * time.Second)
	pid, err := tmux("display-message", "-p", "-t", "bench", "#{pane_pid}")
	if err != nil {
		return 0, 0, err
	}
	t0, err := cpuTicks(pid)
	if err != nil {
		return 0, 0, err
	}
	w0 := wakeupsOf(pid)
	time.Sleep(idleWindow)
	t1, err := cpuTicks(pid)
	if err != nil {
		return 0, 0, fmt.Errorf("the program ended while idle: %w", err)
	}
	// Clock ticks are 1/100 s (USER_HZ).
	return time.Duration(t1-t0) * 10 * time.Millisecond, wakeupsOf(pid) - w0, nil
}

// cpuTicks is utime+stime+cutime+cstime of a process.
func cpuTicks(pid string) (int, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n := 0
	for _, i := range []int{11, 12, 13, 14} {
		v, err := strconv.Atoi(f[i])
		if err != nil {
			return 0, fmt.Errorf("/proc/%s/stat: %w", pid, err)
		}
		n += v
	}
	return n, nil
}

// wakeupsOf sums the voluntary context switches of a process's threads.
func wakeupsOf(pid string) int {
	tasks, _ := filepath.Glob("/proc/" + pid + "/task/*/status")
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
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
