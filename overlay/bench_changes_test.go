package overlay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

// benchLower returns a generated lower of n files in n/20 dirs, cached under
// the temp dir so reruns skip the minutes of writing.
func benchLower(b *testing.B, n int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), "strata-bench-lower-"+strconv.Itoa(n))
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return filepath.Join(dir, "tree")
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	if err := GenerateTree(filepath.Join(dir, "tree"), n, n/20, 1); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, "tree")
}

// benchUpper builds what a kernel overlay leaves after 100 files got a line
// appended (full copies, copied-up parents) and 20 were deleted (char 0/0).
// The changed files are the same shape for every lower size: one file in
// each of 12 dirs of 10 groups spread evenly over the tree, so a difference
// in cost can only come from the size of the lower.
func benchUpper(b *testing.B, lower string) string {
	b.Helper()
	groups, err := os.ReadDir(lower)
	if err != nil {
		b.Fatal(err)
	}
	if len(groups) < 10 {
		b.Fatalf("lower %s has %d groups, want at least 10", lower, len(groups))
	}
	var files []string
	for g := 0; g < 10; g++ {
		group := groups[g*len(groups)/10].Name()
		dirs, err := os.ReadDir(filepath.Join(lower, group))
		if err != nil {
			b.Fatal(err)
		}
		for d := 0; d < 12 && d < len(dirs); d++ {
			rel := filepath.Join(group, dirs[d].Name())
			names, err := os.ReadDir(filepath.Join(lower, rel))
			if err != nil || len(names) == 0 {
				b.Fatalf("read %s: %v (%d files)", rel, err, len(names))
			}
			files = append(files, filepath.Join(rel, names[len(names)/2].Name()))
		}
	}
	if len(files) != 120 {
		b.Fatalf("picked %d files, want 120", len(files))
	}
	sort.Strings(files)
	upper := b.TempDir()
	for i, rel := range files {
		dst := filepath.Join(upper, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			b.Fatal(err)
		}
		if i%6 == 5 { // every sixth: 20 deletions
			if err := syscall.Mknod(dst, syscall.S_IFCHR, 0); err != nil {
				b.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(filepath.Join(lower, rel))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(dst, append(data, "appended line\n"...), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return upper
}

// BenchmarkReadChanges reads 100 modified and 20 deleted files over lowers
// of growing size: the cost must stay flat (it grows with the upper only).
func BenchmarkReadChanges(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root for char 0/0 whiteouts")
	}
	sizes := []int{10_000, 100_000}
	if os.Getenv("STRATA_BENCH_BIG") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			lower := benchLower(b, n)
			l := Layers{Upper: benchUpper(b, lower), Lower: lower, Dialect: DialectKernel}
			cs, err := ReadChanges(context.Background(), l, ReadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var mod, del int
			for _, c := range cs.Changes {
				switch c.Kind {
				case Modified:
					mod++
				case Deleted:
					del++
				default:
					b.Fatalf("unexpected change %v", c)
				}
			}
			if mod != 100 || del != 20 {
				b.Fatalf("got %d modified and %d deleted, want 100 and 20", mod, del)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := ReadChanges(context.Background(), l, ReadOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestGenerateTreeIsDeterministic(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	for _, gen := range []struct {
		dir  string
		seed int64
	}{{a, 7}, {b, 7}, {c, 8}} {
		if err := GenerateTree(gen.dir, 400, 20, gen.seed); err != nil {
			t.Fatal(err)
		}
	}
	ta, tb, tc := overlaytest.Record(t, a), overlaytest.Record(t, b), overlaytest.Record(t, c)
	if diff := overlaytest.DiffTrees(ta, tb); diff != nil {
		t.Errorf("same seed, different trees:\n%s", strings.Join(diff, "\n"))
	}
	if overlaytest.DiffTrees(ta, tc) == nil {
		t.Error("different seeds gave the same tree")
	}
	var sizes []int64
	dirs := 0
	for _, p := range ta.Paths() {
		switch n := ta[p]; n.Type {
		case "file":
			sizes = append(sizes, n.Size)
		case "dir":
			dirs++
		}
	}
	if len(sizes) != 400 || dirs != 20+1 {
		t.Fatalf("got %d files and %d dirs, want 400 and 21 (20 + 1 group)", len(sizes), dirs)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	if median := sizes[len(sizes)/2]; median < 2500 || median > 5000 {
		t.Errorf("median size %d, want about 3.6 KB", median)
	}
	if err := GenerateTree(t.TempDir(), 1, 0, 1); err == nil {
		t.Error("GenerateTree with no dirs succeeded")
	}
}
