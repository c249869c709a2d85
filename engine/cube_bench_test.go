package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/cube/cubetest"
	"github.com/stratahq/strata/engine/cuberun"
)

// createCubeWorlds creates n cube Worlds at once and returns, per World,
// the engine's time for Create and the time it spent waiting on Cube calls
// (create, overlay setup, through the client): the difference is strata's
// own overhead (template choice, files, locks, world.toml writes).
func createCubeWorlds(tb testing.TB, ce *cubeEnv, n int) (total time.Duration, engine, cubeTime []time.Duration) {
	tb.Helper()
	engine = make([]time.Duration, n)
	cubeTime = make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			var clock atomic.Int64
			ctx := cuberun.WithCubeClock(context.Background(), &clock)
			t0 := time.Now()
			_, errs[i] = ce.e.Create(ctx, CreateOptions{Name: fmt.Sprintf("b%03d", i), Source: ce.src, Backend: RuntimeCube})
			engine[i] = time.Since(t0)
			cubeTime[i] = time.Duration(clock.Load())
		})
	}
	wg.Wait()
	total = time.Since(start)
	for i, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
		if w, err := ce.e.World(fmt.Sprintf("b%03d", i)); err != nil || w.State != StateReady {
			tb.Fatalf("world %d: %+v %v", i, w, err)
		}
	}
	return total, engine, cubeTime
}

func overheadStats(engine, cubeTime []time.Duration) (mean, p50, p95 time.Duration) {
	over := make([]time.Duration, len(engine))
	var sum time.Duration
	for i := range engine {
		over[i] = engine[i] - cubeTime[i]
		sum += over[i]
	}
	sort.Slice(over, func(i, j int) bool { return over[i] < over[j] })
	return sum / time.Duration(len(over)), over[len(over)/2], over[len(over)*95/100]
}

// TestCubeCreate50Concurrent is the proof the issue asks for: 50 Worlds at
// concurrency 50 against the fake, with strata's overhead per World.
func TestCubeCreate50Concurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 50 sandboxes")
	}
	ce := newCubeEnv(t, cubetest.Options{})
	total, engine, cubeTime := createCubeWorlds(t, ce, 50)
	mean, p50, p95 := overheadStats(engine, cubeTime)
	var eng time.Duration
	for _, d := range engine {
		eng += d
	}
	t.Logf("50 cube Worlds at concurrency 50: %s wall; engine per World avg %s; strata overhead per World (engine - time in Cube) avg %s, p50 %s, p95 %s",
		total.Round(time.Millisecond), (eng / 50).Round(time.Microsecond), mean.Round(time.Microsecond), p50.Round(time.Microsecond), p95.Round(time.Microsecond))
	if ids := ce.srv.SandboxIDs(); len(ids) != 50 {
		t.Fatalf("%d sandboxes, want 50", len(ids))
	}
	for i := range 50 {
		if _, err := ce.e.Remove(context.Background(), fmt.Sprintf("b%03d", i), RemoveOptions{Purge: true}); err != nil {
			t.Fatal(err)
		}
	}
	if ids := ce.srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
}

func BenchmarkCubeCreate50(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		ce := newCubeEnv(b, cubetest.Options{})
		b.StartTimer()
		_, engine, cubeTime := createCubeWorlds(b, ce, 50)
		b.StopTimer()
		mean, _, p95 := overheadStats(engine, cubeTime)
		b.ReportMetric(float64(mean.Microseconds()), "overhead-us/world")
		b.ReportMetric(float64(p95.Microseconds()), "overhead-p95-us/world")
		b.StartTimer()
	}
}
