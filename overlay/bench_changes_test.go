package overlay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
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
func benchUpper(b *testing.B, lower string) string {
	b.Helper()
	var files []string
	err := filepath.WalkDir(lower, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(lower, p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	sort.Strings(files)
	upper := b.TempDir()
	step := len(files) / 120
	for i := 0; i < 120; i++ {
		rel := files[i*step]
		dst := filepath.Join(upper, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			b.Fatal(err)
		}
		if i >= 100 {
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
