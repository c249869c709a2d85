package diffview

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tenKLines100Hunks is a 10,000-line source file and a version with 100
// edits spread through it (each replaces, inserts or deletes a few lines),
// giving 100 hunks.
func tenKLines100Hunks() (old, nw string) {
	var ob, nb strings.Builder
	for i := 0; i < 10_000; i++ {
		line := fmt.Sprintf("\tresult%d := compute(%d, \"value %d\") // step %d\n", i%97, i, i*7, i)
		if i%10 == 9 {
			line = "\n"
		}
		ob.WriteString(line)
		if i%100 == 50 {
			switch (i / 100) % 3 {
			case 0:
				fmt.Fprintf(&nb, "\tresult%d := compute(%d, \"changed %d\") // step %d\n", i%97, i, i, i)
			case 1:
				nb.WriteString(line)
				fmt.Fprintf(&nb, "\tinserted(%d)\n\tinserted(%d)\n", i, i+1)
			case 2: // deleted
			}
			continue
		}
		nb.WriteString(line)
	}
	return ob.String(), nb.String()
}

func BenchmarkDiff10kLines100Hunks(b *testing.B) {
	old, nw := tenKLines100Hunks()
	if n := len(Diff(old, nw, Options{}).Hunks); n != 100 {
		b.Fatalf("fixture has %d hunks, want 100", n)
	}
	b.ReportAllocs()
	for b.Loop() {
		Diff(old, nw, Options{})
	}
}

// TestDiff10kLines100HunksWithinBudget holds the budget: the diff of
// a 10,000-line file with 100 hunks takes at most 20 ms. It measures the CPU
// time of the diffing thread (best of 10 runs), so other processes loading
// the machine do not fail it; wall time is logged beside it.
func TestDiff10kLines100HunksWithinBudget(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("timing budget is checked without -race and -short")
	}
	old, nw := tenKLines100Hunks()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bestCPU, bestWall := time.Hour, time.Hour
	for range 10 {
		cpu0 := threadCPU(t)
		start := time.Now()
		fd := Diff(old, nw, Options{})
		bestWall = min(bestWall, time.Since(start))
		bestCPU = min(bestCPU, threadCPU(t)-cpu0)
		if len(fd.Hunks) != 100 {
			t.Fatalf("%d hunks", len(fd.Hunks))
		}
	}
	t.Logf("diff of 10,000 lines with 100 hunks: %v CPU, %v wall", bestCPU, bestWall)
	if bestCPU > 20*time.Millisecond {
		t.Fatalf("diff took %v of CPU, budget 20ms", bestCPU)
	}
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatalf("clock_gettime: %v", err)
	}
	return time.Duration(ts.Nano())
}

func BenchmarkLayout(b *testing.B) {
	old, nw := tenKLines100Hunks()
	fd := Diff(old, nw, Options{})
	sel := NewSelection(fd, true)
	for _, o := range []struct {
		name string
		opts LayoutOptions
	}{
		{"unified", LayoutOptions{Width: 120, ShowLineNumbers: true, Selection: sel}},
		{"unified-wrap-80", LayoutOptions{Width: 80, Wrap: true, ShowLineNumbers: true, Selection: sel}},
		{"side-by-side", LayoutOptions{Width: 200, SideBySide: true, ShowLineNumbers: true, Wrap: true}},
	} {
		b.Run(o.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Layout(fd, o.opts)
			}
		})
	}
	b.Run("window-of-60-rows", func(b *testing.B) {
		opts := LayoutOptions{Width: 120, ShowLineNumbers: true, Selection: sel}
		b.ReportAllocs()
		for b.Loop() {
			LayoutRange(fd, opts, 800, 60)
		}
	})
}

func BenchmarkMerge3(b *testing.B) {
	base, ours := tenKLines100Hunks()
	// Theirs edits other lines than ours does.
	lines := splitLines(base)
	for i := 20; i < len(lines); i += 200 {
		lines[i] = "\ttheirs()\n"
	}
	theirs := join(lines)
	if r := Merge3(base, ours, theirs); !r.Clean {
		b.Fatalf("fixture merge has %d conflicts", len(r.Conflicts))
	}
	b.ReportAllocs()
	for b.Loop() {
		Merge3(base, ours, theirs)
	}
}
