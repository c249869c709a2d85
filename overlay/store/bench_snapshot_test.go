package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

// snaptBenchUpper builds the reference upper in kernel dialect: 100
// changed files of ~46 KB (4.6 MB) in a realistic source-tree shape, 20
// whiteouts, and the copied-up parent directories. Contents are random, so
// nothing dedups.
func snaptBenchUpper(b *testing.B) (upper string, files []string) {
	b.Helper()
	upper = filepath.Join(b.TempDir(), "upper")
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 46_000)
	for i := range 100 {
		mod, sub := i%10, (i/10)%2
		rel := fmt.Sprintf("Engine/Source/Runtime/Module%d/%s/File%02d.cpp", mod, []string{"Private", "Public"}[sub], i)
		for j := range buf {
			buf[j] = byte(' ' + rng.IntN(90))
		}
		snaptWrite(b, filepath.Join(upper, rel), string(buf), 0o644)
		files = append(files, rel)
	}
	for i := range 20 {
		p := filepath.Join(upper, fmt.Sprintf("Engine/Source/Runtime/Module%d/Private/Deleted%02d.h", i%10, i))
		snaptMust(b, unix.Mknod(p, unix.S_IFCHR, 0))
	}
	snaptMust(b, unix.Lsetxattr(filepath.Join(upper, "Engine/Source/Runtime/Module3"), "trusted.overlay.opaque", []byte("y"), 0))
	time.Sleep(2 * racyWindow)
	return upper, files
}

// BenchmarkCaptureFirst: an empty store and cache, so every file is read,
// hashed and stored. "syncfs" is the default (one syncfs before returning);
// "fsync-each" fsyncs every object as it is stored.
func BenchmarkCaptureFirst(b *testing.B) {
	upper, _ := snaptBenchUpper(b)
	for _, mode := range []string{"syncfs", "fsync-each"} {
		b.Run(mode, func(b *testing.B) {
			base := b.TempDir()
			hashed := 0
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				s, err := OpenStore(filepath.Join(base, fmt.Sprint(i)))
				snaptMust(b, err)
				s.SyncEach = mode == "fsync-each"
				b.StartTimer()
				_, st, err := CaptureUpper(context.Background(), s, upper, overlay.DialectKernel, NewStatCache())
				snaptMust(b, err)
				hashed = st.Hashed
				b.StopTimer()
				snaptMust(b, os.RemoveAll(s.Root()))
				b.StartTimer()
			}
			b.ReportMetric(float64(hashed), "hashed/op")
		})
	}
}

// BenchmarkCaptureIncremental: one more changed file since the previous
// snapshot. "with-manifest" adds what the engine also pays: writing the
// manifest and saving the stat cache (both fsynced).
func BenchmarkCaptureIncremental(b *testing.B) {
	upper, files := snaptBenchUpper(b)
	for _, variant := range []string{"core", "with-manifest"} {
		b.Run(variant, func(b *testing.B) {
			dir := b.TempDir()
			s, err := OpenStore(filepath.Join(dir, "objects"))
			snaptMust(b, err)
			cache := NewStatCache()
			_, _, err = CaptureUpper(context.Background(), s, upper, overlay.DialectKernel, cache)
			snaptMust(b, err)
			hashed := 0
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				time.Sleep(racyWindow + time.Millisecond) // snapshots are not taken back to back
				snaptWrite(b, filepath.Join(upper, files[i%len(files)]), fmt.Sprintf("edit %d %s\n", i, variant), 0o644)
				b.StartTimer()
				m, st, err := CaptureUpper(context.Background(), s, upper, overlay.DialectKernel, cache)
				snaptMust(b, err)
				if variant == "with-manifest" {
					snaptMust(b, WriteManifest(filepath.Join(dir, "snap.manifest"), m))
					snaptMust(b, cache.Save(filepath.Join(dir, "statcache")))
				}
				hashed = st.Hashed
			}
			b.ReportMetric(float64(hashed), "hashed/op")
		})
	}
}

// BenchmarkRestore: the whole upper rebuilt from the store over the
// existing one (build beside it, syncfs, swap). "syncfs" is the default and
// removes the old tree inline; "syncfs-deferred" leaves that removal to the
// caller after remount (RestoreOptions.DeferCleanup, the rollback path);
// "nosync" shows what the durability costs.
func BenchmarkRestore(b *testing.B) {
	upper, _ := snaptBenchUpper(b)
	s, err := OpenStore(filepath.Join(b.TempDir(), "objects"))
	snaptMust(b, err)
	m, _, err := CaptureUpper(context.Background(), s, upper, overlay.DialectKernel, nil)
	snaptMust(b, err)
	variants := map[string]RestoreOptions{
		"syncfs":          {},
		"syncfs-deferred": {DeferCleanup: true},
		"nosync":          {NoSync: true},
	}
	for _, name := range []string{"syncfs", "syncfs-deferred", "nosync"} {
		b.Run(name, func(b *testing.B) {
			target := filepath.Join(b.TempDir(), "upper")
			snaptMust(b, RestoreUpper(context.Background(), s, m, target, overlay.DialectKernel))
			for b.Loop() {
				snaptMust(b, RestoreUpperWith(context.Background(), s, m, target, overlay.DialectKernel, variants[name]))
				b.StopTimer()
				snaptMust(b, RemoveRestoreLeftovers(target))
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCopyUpperBaseline is the reference the issue compares against:
// `cp -a` of the same upper (what a naive snapshot costs), in the same run.
func BenchmarkCopyUpperBaseline(b *testing.B) {
	upper, _ := snaptBenchUpper(b)
	base := b.TempDir()
	for i := 0; b.Loop(); i++ {
		dst := filepath.Join(base, fmt.Sprint(i))
		if out, err := exec.Command("cp", "-a", upper, dst).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v: %s", err, out)
		}
		b.StopTimer()
		snaptMust(b, os.RemoveAll(dst))
		b.StartTimer()
	}
}
