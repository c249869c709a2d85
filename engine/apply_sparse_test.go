package engine

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay/store"
)

// A 1 GiB sparse file with a few data blocks is applied without reading it
// into memory, and lands in the source sparse: its allocated blocks stay
// those of its data, its content is the World's.
func TestApplySparseFileStaysSparse(t *testing.T) {
	ctx := context.Background()
	e, src := testEngine(t)
	merged := mountedWorld(t, e, src, "w")
	const size = 1 << 30
	f, err := os.Create(filepath.Join(merged, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 300 << 20, 777<<20 + 12345, size - 4096} {
		if _, err := f.WriteAt([]byte("data block at some offset\n"), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	res, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "disk.img"}}})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if len(res.Paths) != 1 || res.Paths[0].Action != "write" {
		t.Fatalf("paths: %+v", res.Paths)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(src, "disk.img"), &st); err != nil {
		t.Fatal(err)
	}
	alloc := st.Blocks * 512
	allocated := func(p string) int64 {
		var s syscall.Stat_t
		if err := syscall.Stat(p, &s); err != nil {
			t.Fatal(err)
		}
		return s.Blocks * 512
	}
	upper := filepath.Join(e.Paths.Upper("w"), "disk.img")
	t.Logf("1 GiB sparse apply: %s, %d bytes allocated in the source (the World's upper: %d), %d MiB allocated by the engine", took.Round(time.Millisecond), alloc, allocated(upper), (after.TotalAlloc-before.TotalAlloc)>>20)
	if st.Size != size {
		t.Fatalf("size %d, want %d", st.Size, size)
	}
	if alloc > 4<<20 {
		t.Fatalf("the source file allocates %d bytes for 4 data blocks: not sparse", alloc)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Fatalf("apply allocated %d MiB for a 1 GiB sparse file: it reads it into memory", grew>>20)
	}
	rec, err := e.bases("w").Get("disk.img")
	if err != nil || rec == nil || rec.Object == "" {
		t.Fatalf("base record after the apply: %+v %v", rec, err)
	}
	st2, err := e.store()
	if err != nil {
		t.Fatal(err)
	}
	if a := allocated(st2.Path(rec.Object)); a > 4<<20 {
		t.Fatalf("the new base object allocates %d bytes: not sparse", a)
	}
	hash := func(p string) string {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h, _, err := store.HashFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if hash(filepath.Join(src, "disk.img")) != hash(upper) || hash(st2.Path(rec.Object)) != string(rec.Object) {
		t.Fatal("the published content differs from the World's")
	}
	// The World changes it again: base, source and World are all 1 GiB now,
	// and none of them is read into memory.
	f, err = os.OpenFile(filepath.Join(merged, "disk.img"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("a second edit"), 500<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Fatalf("the second apply allocated %d MiB: it reads a 1 GiB side into memory", grew>>20)
	}
	if a := allocated(filepath.Join(src, "disk.img")); a > 4<<20 {
		t.Fatalf("after the second apply the source file allocates %d bytes", a)
	}
	if hash(filepath.Join(src, "disk.img")) != hash(upper) {
		t.Fatal("the second publication differs from the World's")
	}
}
