package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"
	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/tui"
)

// probeWatch is how long the TUI probe records steady frames while the
// sessions write.
const probeWatch = 5 * time.Second

// benchManyWorlds: 100 Worlds over one tree, each with a live session
// writing a line every 100 ms. Rows: ls --json (against git worktree list
// over as many worktrees), and the TUI's first and steady frames and its
// RSS, measured by a fresh strata-bench process (-tui-probe) that runs the
// real TUI model and engine under Bubble Tea with a frame timer around
// Update and View.
func benchManyWorlds(b *bench, _ []int) error {
	n := scaleWorlds
	src, err := b.sourceTree(10_000)
	if err != nil {
		return err
	}
	if err := b.gitRepo(src); err != nil {
		return err
	}
	home := filepath.Join(b.dir, "home-many")
	_ = os.RemoveAll(home)
	env := scaleEnv(b, home)
	wts := filepath.Join(b.dir, "wt-many")
	defer func() {
		for i := 0; i < n; i++ {
			_ = run(src, "git", "worktree", "remove", "--force", filepath.Join(wts, strconv.Itoa(i)))
		}
		_ = os.RemoveAll(wts)
	}()
	b.logf("many-worlds: %d Worlds, each with a session writing output", n)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("w%03d", i)
		if err := runEnv(env, src, b.bin, "new", names[i], "--source", src); err != nil {
			return err
		}
		if err := run(src, "git", "worktree", "add", "-q", "--detach", filepath.Join(wts, strconv.Itoa(i))); err != nil {
			return err
		}
	}
	defer func() {
		for _, w := range names {
			_ = runEnv(env, src, b.bin, "rm", w, "--force", "--purge", "--kill")
		}
		cleanupHome(home)
	}()
	_, perlErr := exec.LookPath("perl")
	for i, w := range names {
		// One process per session printing a line each 100 ms: perl where
		// there is one, so 100 sessions are not also 1,000 forks of sleep a
		// second on the machine the TUI is timed on.
		argv := []string{"perl", "-e", fmt.Sprintf(`$|=1; for ($i=1;;$i++) { print "%s line $i: compiling module $i\n"; select(undef,undef,undef,0.1) }`, w)}
		if perlErr != nil {
			argv = []string{"sh", "-c", fmt.Sprintf("i=0; while :; do i=$((i+1)); echo \"%s line $i: compiling module $i\"; sleep 0.1; done", w)}
		}
		if err := runEnv(env, src, b.bin, append([]string{"exec", w, "--detach", "--"}, argv...)...); err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
	}
	time.Sleep(time.Second)
	ls, err := b.timeCmdCheck(b.runs, b.bin, []string{"ls", "--json"}, env, src, func(out []byte) error {
		var v []map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			return fmt.Errorf("ls --json: %w", err)
		}
		if len(v) != n {
			return fmt.Errorf("ls --json lists %d Worlds, want %d", len(v), n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	gl, err := b.timeCmdCheck(b.runs, "git", []string{"worktree", "list", "--porcelain"}, nil, src, func(out []byte) error {
		if c := strings.Count(string(out), "worktree "); c < n {
			return fmt.Errorf("git worktree list: %d worktrees, want %d", c, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	lb := fmt.Sprintf("%d Worlds, live sessions", n)
	b.add(row{group: "many-worlds", name: "strata ls --json (" + lb + ")", strata: ls, baseName: "git worktree list", baseline: gl})

	self, err := os.Executable()
	if err != nil {
		return err
	}
	var ttff, first, steady []time.Duration
	var rss []float64
	var frames, cpuFirst, cpuSteady []string
	for i := 0; i < max(3, b.runs/5); i++ {
		cmd := exec.Command(self, "-tui-probe", "-bin", b.bin, "-probe-src", src, "-probe-want", names[0])
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = src
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("tui probe: %w: %s", err, stderr.Bytes())
		}
		var r probeResult
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("tui probe: %w: %s", err, out)
		}
		if len(r.Steady) == 0 {
			return fmt.Errorf("tui probe: %d frames in %s while %d sessions wrote: the TUI did not redraw", len(r.Steady), probeWatch, n)
		}
		ttff = append(ttff, r.TimeToFirst)
		first = append(first, r.First)
		steady = append(steady, median(r.Steady))
		frames = append(frames, fmt.Sprintf("%d changed of %d drawn, slowest %s", len(r.Steady), r.Views, fmtDur(maxDur(r.Steady))))
		rss = append(rss, float64(r.MaxRSSKB)/1024)
		cpuFirst = append(cpuFirst, fmtDur(r.FirstCPU))
		cpuSteady = append(cpuSteady, fmtDur(median(r.SteadyCPU)))
	}
	lsPlain, err := b.timeCmdCheck(max(3, b.runs/5), b.bin, []string{"ls"}, env, src, func(out []byte) error {
		if !bytes.Contains(out, []byte(names[n-1])) {
			return fmt.Errorf("strata ls does not list %s", names[n-1])
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.add(row{
		group: "many-worlds", name: "TUI start to first frame with Worlds (" + lb + ")", strata: ttff, baseName: "strata ls", baseline: lsPlain,
		note: "whole TUI (engine, model, Bubble Tea at 200x60, output discarded) in a fresh process",
	})
	b.add(row{
		group: "many-worlds", name: "TUI first frame: Update+View (" + lb + ")", strata: first, target: 16 * time.Millisecond,
		note: "wall time; the frame's own CPU time (its thread's, without what the machine gave other processes) per run: " + strings.Join(cpuFirst, ", "),
	})
	b.add(row{
		group: "many-worlds", name: "TUI steady frame: Update+View, median (" + lb + ")", strata: steady, target: 16 * time.Millisecond,
		note: fmt.Sprintf("wall time, per run over %s while every session writes a line each 100 ms: %s; median CPU time per run: %s",
			probeWatch, strings.Join(frames, "; "), strings.Join(cpuSteady, ", ")),
	})
	b.add(row{
		group: "many-worlds", name: "TUI peak RSS (" + lb + ")", values: rss, unit: "MB", maxVal: 150,
		note: "VmHWM of the probe process at its end: engine + TUI model + Bubble Tea, the code strata links, after the first frame and the steady frames",
	})
	return nil
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

type probeResult struct {
	TimeToFirst time.Duration   `json:"time_to_first"`
	First       time.Duration   `json:"first"`
	Steady      []time.Duration `json:"steady"`
	MaxRSSKB    int             `json:"max_rss_kb"`
	FirstCPU    time.Duration   `json:"first_cpu"`
	SteadyCPU   []time.Duration `json:"steady_cpu"`
	Views       int             `json:"views"`
}

// frameTimer wraps the TUI model: a frame's cost is the Updates since the
// last View plus that View.
type frameTimer struct {
	inner tea.Model
	st    *frameState
}

type frameState struct {
	mu       sync.Mutex
	start    time.Time
	want     string
	pending  time.Duration
	pendCPU  time.Duration
	firstCPU time.Duration
	steadyC  []time.Duration
	locked   bool
	ttff     time.Duration
	first    time.Duration
	steady   []time.Duration
	recorded bool
	last     string
	views    int // Views while recording, changed or not
}

func (f frameTimer) Init() tea.Cmd { return f.inner.Init() }

func (f frameTimer) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	f.lock()
	t, c := time.Now(), threadCPU()
	nm, cmd := f.inner.Update(msg)
	f.st.mu.Lock()
	f.st.pending += time.Since(t)
	f.st.pendCPU += threadCPU() - c
	f.st.mu.Unlock()
	return frameTimer{inner: nm, st: f.st}, cmd
}

// lock pins the goroutine running Update and View (Bubble Tea's event
// loop) to its thread, so the thread's CPU clock times them.
func (f frameTimer) lock() {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if !f.st.locked {
		runtime.LockOSThread()
		f.st.locked = true
	}
}

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

func (f frameTimer) View() tea.View {
	f.lock()
	t, c := time.Now(), threadCPU()
	v := f.inner.View()
	d, dc := time.Since(t), threadCPU()-c
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	d += f.st.pending
	dc += f.st.pendCPU
	f.st.pending, f.st.pendCPU = 0, 0
	if f.st.recorded {
		f.st.views++
	}
	switch {
	case f.st.ttff == 0:
		if strings.Contains(v.Content, f.st.want) {
			f.st.ttff, f.st.first, f.st.firstCPU = time.Since(f.st.start), d, dc
		}
	case f.st.recorded && v.Content != f.st.last:
		// Only frames that changed the screen: the renderer skips the rest.
		f.st.steady = append(f.st.steady, d)
		f.st.steadyC = append(f.st.steadyC, dc)
	}
	f.st.last = v.Content
	return v
}

// tuiProbe runs the TUI on the state root in STRATA_HOME until it shows
// want, then records frames for probeWatch, and prints a probeResult.
func tuiProbe(start time.Time, bin, src, want string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := engine.Open(ctx, engine.Options{Exe: bin})
	if err != nil {
		return err
	}
	m, err := tui.New(ctx, e, tui.Options{Source: src, Exe: bin})
	if err != nil {
		return err
	}
	st := &frameState{start: start, want: want}
	p := tea.NewProgram(frameTimer{inner: *m, st: st}, tea.WithContext(ctx), tea.WithFPS(30),
		tea.WithInput(nil), tea.WithOutput(io.Discard), tea.WithWindowSize(200, 60), tea.WithoutSignalHandler())
	if err := tui.Forward(ctx, e, p); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { _, err := p.Run(); done <- err }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st.mu.Lock()
		ok := st.ttff != 0
		if ok {
			st.recorded = true
		}
		st.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the TUI did not show %s within 30 s", want)
		}
		select {
		case err := <-done:
			return fmt.Errorf("the TUI ended before its first frame: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	time.Sleep(probeWatch)
	st.mu.Lock()
	r := probeResult{
		TimeToFirst: st.ttff, First: st.first, Steady: append([]time.Duration(nil), st.steady...), Views: st.views,
		FirstCPU: st.firstCPU, SteadyCPU: append([]time.Duration(nil), st.steadyC...),
	}
	st.mu.Unlock()
	p.Quit()
	select {
	case err := <-done:
		_ = err // how the TUI ended says nothing the figures need
	case <-time.After(5 * time.Second):
		p.Kill()
	}
	r.MaxRSSKB = vmHWM()
	return json.NewEncoder(os.Stdout).Encode(r)
}

// vmHWM is this process's peak resident set, in KiB.
func vmHWM() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}
