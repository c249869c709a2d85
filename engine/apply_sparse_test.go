package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay/store"
	"golang.org/x/sys/unix"
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
	// One hash of 1 GiB: the upper's is the base object's id; the source and
	// the object read as the upper does.
	if !sameSparseContent(t, filepath.Join(src, "disk.img"), upper) || !sameSparseContent(t, st2.Path(rec.Object), upper) || hash(upper) != string(rec.Object) {
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
	if !sameSparseContent(t, filepath.Join(src, "disk.img"), upper) {
		t.Fatal("the second publication differs from the World's")
	}
}

// sameSparseContent reports whether files a and b read the same, reading
// only the ranges either one holds data in (elsewhere both are holes, which
// read as zeros): what comparing their hashes proves, without hashing 1 GiB
// of zeros.
func sameSparseContent(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	sa, err := fa.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := fb.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if sa.Size() != sb.Size() {
		return false
	}
	size := sa.Size()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for _, f := range []*os.File{fa, fb} {
		for _, r := range testDataRanges(t, f, size) {
			for off := r[0]; off < r[1]; {
				n := min(int64(len(ba)), r[1]-off)
				if _, err := fa.ReadAt(ba[:n], off); err != nil {
					t.Fatal(err)
				}
				if _, err := fb.ReadAt(bb[:n], off); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(ba[:n], bb[:n]) {
					return false
				}
				off += n
			}
		}
	}
	return true
}

// testDataRanges lists the [start, end) ranges of f below size that may hold
// data (SEEK_DATA/SEEK_HOLE; the whole file where the file system cannot
// tell).
func testDataRanges(t *testing.T, f *os.File, size int64) [][2]int64 {
	t.Helper()
	var rs [][2]int64
	for off := int64(0); off < size; {
		start, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return append(rs, [2]int64{off, size})
		}
		if err != nil {
			t.Fatal(err)
		}
		if start >= size {
			break
		}
		end, err := unix.Seek(int(f.Fd()), start, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		end = min(end, size)
		rs = append(rs, [2]int64{start, end})
		off = end
	}
	return rs
}

// sameSparseContent tells files apart wherever they differ: in data both
// hold, in data where the other has a hole, and in size.
func TestSameSparseContent(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, size int64, writes map[int64]string) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		for off, s := range writes {
			if _, err := f.WriteAt([]byte(s), off); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const size = 64 << 20
	a := mk("a", size, map[int64]string{0: "x", 40 << 20: "data"})
	for _, c := range []struct {
		name string
		size int64
		w    map[int64]string
		same bool
	}{
		{"same", size, map[int64]string{0: "x", 40 << 20: "data"}, true},
		{"zeros-written", size, map[int64]string{0: "x", 10 << 20: "\x00\x00\x00\x00", 40 << 20: "data"}, true},
		{"differs-in-data", size, map[int64]string{0: "x", 40 << 20: "date"}, false},
		{"data-in-a-hole", size, map[int64]string{0: "x", 20 << 20: "!", 40 << 20: "data"}, false},
		{"hole-for-data", size, map[int64]string{0: "x"}, false},
		{"longer", size + 1, map[int64]string{0: "x", 40 << 20: "data"}, false},
	} {
		b := mk(c.name, c.size, c.w)
		if got := sameSparseContent(t, a, b); got != c.same {
			t.Errorf("%s: sameSparseContent(a, b) = %v, want %v", c.name, got, c.same)
		}
		if got := sameSparseContent(t, b, a); got != c.same {
			t.Errorf("%s: sameSparseContent(b, a) = %v, want %v", c.name, got, c.same)
		}
	}
}
