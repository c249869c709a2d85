package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"
	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/panes"
)

// bigModel is the heavy scenario of the frame budget: 50 Worlds, 10,000
// changed paths and a 1,000,000-line transcript, at 200x60 so every pane
// is drawn. The data goes in through the same messages the engine
// commands return; the commands themselves are not run.
func bigModel(tb testing.TB) Model {
	tb.Helper()
	m, err := New(context.Background(), nil, Options{AllWorlds: true, Exe: "/bin/false"})
	if err != nil {
		tb.Fatal(err)
	}
	mm := *m
	send := func(msg tea.Msg) {
		nm, _ := mm.Update(msg)
		mm = nm.(Model)
	}
	send(tea.WindowSizeMsg{Width: 200, Height: 60})
	rows := make([]panes.WorldRow, 50)
	statuses := []string{"running", "waiting", "failed", "done", "idle"}
	for i := range rows {
		rows[i] = panes.WorldRow{Name: fmt.Sprintf("agent-%02d", i), Status: statuses[i%5], Backend: "local", Changes: 200, Sessions: 3, Running: 1}
	}
	send(worldsLoadedMsg{rows: rows})
	world := mm.worlds.Selected()
	send(panes.WorldsSelectedMsg{Name: world})
	cs := make([]overlay.Change, 10000)
	for i := range cs {
		cs[i] = overlay.Change{Path: fmt.Sprintf("src/module%03d/file%05d.go", i/100, i), Kind: overlay.Kind(1 + i%4), Type: overlay.TypeFile}
	}
	send(changesLoadedMsg{world: world, changes: cs})
	send(sessionsLoadedMsg{world: world, rows: []panes.SessionRow{{ID: "s-big", Command: "make -j8", State: "running"}}})
	send(panes.TranscriptSessionMsg{World: world, Session: "s-big"})
	var out bytes.Buffer
	for i := 0; i < 1_000_000; i++ {
		if i%50 == 0 {
			fmt.Fprintf(&out, "\x1b[32mok\x1b[0m  build step %7d of the long build\n", i)
		} else {
			fmt.Fprintf(&out, "cc -O2 -c src/module%03d/file%05d.c\n", i%100, i)
		}
	}
	data := out.Bytes()
	send(transcriptLoadedMsg{world: world, session: "s-big", from: 0, next: int64(len(data)), chunks: []panes.TranscriptChunk{{Data: data}}})
	old, nw := strings.Repeat("a line of code\n", 2000), strings.Repeat("a line of code\n", 1000)+"changed\n"+strings.Repeat("a line of code\n", 999)
	send(panes.ChangesSelectedMsg{World: world, Path: cs[0].Path})
	send(diffLoadedMsg{file: panes.DiffFile{World: world, Path: cs[0].Path, Old: old, New: nw}})
	if mm.transcript.Lines() != 1_000_000 || len(mm.changes.All()) != 10000 || len(mm.worlds.Rows()) != 50 {
		tb.Fatalf("scenario not loaded: %d lines, %d changes, %d worlds", mm.transcript.Lines(), len(mm.changes.All()), len(mm.worlds.Rows()))
	}
	return mm
}

// BenchmarkFrame times one frame of the heavy scenario: a key (focus moves
// to the next pane, so each frame differs from the last) and the render.
// It reports the heap in use with the scenario loaded (budget 100 MB).
func BenchmarkFrame(b *testing.B) {
	m := bigModel(b)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	tab := tea.KeyPressMsg{Code: tea.KeyTab}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nm, _ := m.Update(tab)
		m = nm.(Model)
		_ = m.Render()
	}
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB") // after ResetTimer, which drops metrics
	runtime.KeepAlive(m)
}

// TestFrameBudget: a frame of the heavy scenario renders in 16 ms and the
// scenario fits in 100 MB.
func TestFrameBudget(t *testing.T) {
	m := bigModel(t)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapMB := float64(ms.HeapInuse) / (1 << 20)
	// Keep the model alive past the measurement.
	frames := 30
	// The frame's cost is its thread's CPU time: on a loaded machine (the
	// shared development box, CI) wall time mostly measures the others.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, cpu0 := time.Now(), threadCPU()
	var scr string
	for i := 0; i < frames; i++ {
		// Scroll between frames so nothing can be served from a cache.
		nm, _ := m.Update(tea.KeyPressMsg{Code: tea.KeyTab})
		m = nm.(Model)
		scr = m.Render()
	}
	per := (threadCPU() - cpu0) / time.Duration(frames)
	t.Logf("frame %v CPU (%v wall), heap in use %.1f MB", per, time.Since(start)/time.Duration(frames), heapMB)
	scr = ansi.Strip(scr)
	if !strings.Contains(scr, "file999999.c") || !strings.Contains(scr, "10,000 paths") {
		t.Fatalf("scenario not on screen:\n%s", scr)
	}
	budget := 16 * time.Millisecond
	if raceEnabled {
		budget *= 10 // the race detector slows everything ~10x
	}
	if per > budget {
		t.Errorf("a frame takes %v, budget %v", per, budget)
	}
	if heapMB > 100 {
		t.Errorf("heap in use %.1f MB, budget 100 MB", heapMB)
	}
	runtime.KeepAlive(m)
}

// TestIdleDoesNoWork: with nothing changing, the running program receives
// no message (no tick loops) and burns next to no CPU.
func TestIdleDoesNoWork(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": threeHunks()})
	newWorld(t, eng, src, "w1", editThree)
	m, err := New(context.Background(), eng, Options{Source: src, Exe: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := tea.NewProgram(*m, tea.WithContext(ctx), tea.WithInput(bytes.NewReader(nil)), tea.WithOutput(io.Discard),
		tea.WithoutSignals(), tea.WithWindowSize(120, 40), tea.WithFPS(30),
		tea.WithFilter(func(_ tea.Model, msg tea.Msg) tea.Msg {
			msgs.Add(1)
			return msg
		}))
	if err := Forward(ctx, eng, p); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := p.Run(); done <- err }()
	time.Sleep(1500 * time.Millisecond) // load, settle
	before := msgs.Load()
	cpu0 := cpuTime()
	idle := 3 * time.Second
	time.Sleep(idle)
	got := msgs.Load() - before
	cpu := cpuTime() - cpu0
	p.Quit()
	<-done
	t.Logf("idle %v: %d messages, %v CPU", idle, got, cpu)
	if got != 0 {
		t.Errorf("%d messages while idle", got)
	}
	// The renderer's frame ticker wakes up but finds nothing to draw.
	if limit := idle / 50; cpu > limit && !raceEnabled {
		t.Errorf("idle CPU %v over %v, more than %v", cpu, idle, limit)
	}
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
