package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/provlog"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
	"github.com/stratahq/strata/overlay/store"
)

// watchFixture is a kernel overlay mounted in the test process, with the
// dirs a session watcher writes to.
type watchFixture struct {
	lower, upper, merged, objects, bases, prov string
}

func newWatchFixture(t *testing.T) watchFixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the watcher tests mount a kernel overlay: run as root")
	}
	base := t.TempDir()
	f := watchFixture{
		lower: filepath.Join(base, "lower"), upper: filepath.Join(base, "upper"), merged: filepath.Join(base, "merged"),
		objects: filepath.Join(base, "objects"), bases: filepath.Join(base, "bases"), prov: filepath.Join(base, "prov"),
	}
	work := filepath.Join(base, "work")
	for _, d := range []string{f.upper, f.merged, work, filepath.Join(f.lower, "dir", "deep")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(f.lower, "keep.txt"), "keep\n")
	writeFile(t, filepath.Join(f.lower, "edit.txt"), "original\n")
	writeFile(t, filepath.Join(f.lower, "dir", "gone.txt"), "to delete\n")
	writeFile(t, filepath.Join(f.lower, "dir", "deep", "x.txt"), "x\n")
	err := mount.Mount(context.Background(), mount.MountSpec{Backend: overlay.BackendKernel, Lower: f.lower, Upper: f.upper, Work: work, Target: f.merged})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mount.ForceUnmount(f.merged) })
	return f
}

func (f watchFixture) spec() SessionWatch {
	return SessionWatch{Upper: f.upper, Lower: f.lower, Objects: f.objects, Bases: f.bases, Provenance: f.prov, Dialect: overlay.DialectKernel}
}

func provOf(t *testing.T, f watchFixture, session string) map[string]provlog.Record {
	t.Helper()
	recs, err := provlog.ReadFile(filepath.Join(f.prov, session+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]provlog.Record{}
	for _, r := range recs {
		out[r.Path] = r
	}
	return out
}

// The watcher sees copy-ups, creations in new directory trees (whose content
// may predate their watch), deletions as whiteouts, and ignores .git; each
// change gets its base from the source as it was.
func TestWatcherRecordsWritesAndBases(t *testing.T) {
	f := newWatchFixture(t)
	w, err := openUpperWatch(f.spec(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	w.start()
	m := f.merged
	writeFile(t, filepath.Join(m, "edit.txt"), "changed\n")
	if err := os.MkdirAll(filepath.Join(m, "new", "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(m, "new", "a", "b", "c.txt"), "c\n")
	if err := os.Remove(filepath.Join(m, "dir", "gone.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(m, ".git", "HEAD"), "ref\n")
	writeFile(t, filepath.Join(m, "dir", "deep", "x.txt"), "x2\n")
	if n := w.finish(); n < 7 {
		t.Errorf("finish reported %d paths written, want at least 7", n)
	}
	got := provOf(t, f, "s1")
	want := map[string]string{
		"edit.txt": provlog.OpWrite, "new": provlog.OpCreate, "new/a": provlog.OpCreate, "new/a/b": provlog.OpCreate, "new/a/b/c.txt": provlog.OpCreate,
		"dir/gone.txt": provlog.OpDelete, "dir/deep/x.txt": provlog.OpWrite,
	}
	for p, op := range want {
		r, ok := got[p]
		if !ok {
			t.Errorf("%s: not recorded (got %v)", p, got)
			continue
		}
		if r.Op != op {
			t.Errorf("%s: op %q, want %q", p, r.Op, op)
		}
		if r.First.IsZero() || r.Last.Before(r.First) {
			t.Errorf("%s: times first %v last %v", p, r.First, r.Last)
		}
	}
	for p := range got {
		if p == ".git" || filepath.Dir(p) == ".git" {
			t.Errorf("%s: ignored path recorded", p)
		}
	}
	store, err := store.OpenStore(f.objects)
	if err != nil {
		t.Fatal(err)
	}
	idx := BaseIndex{Dir: f.bases}
	for p, content := range map[string]string{"edit.txt": "original\n", "dir/gone.txt": "to delete\n", "dir/deep/x.txt": "x\n"} {
		r, err := idx.Get(p)
		if err != nil || r == nil {
			t.Fatalf("%s: no base (%v)", p, err)
		}
		data, err := store.ReadAll(r.Object)
		if err != nil || string(data) != content {
			t.Errorf("%s: base %q (%v), want %q", p, data, err, content)
		}
	}
	if r, _ := idx.Get("new/a/b/c.txt"); r == nil || !r.Absent {
		t.Errorf("new/a/b/c.txt: base %+v, want absent", r)
	}
}

// Past the watch bound nothing is lost: the walk at the end records what
// the missing watches did not see.
func TestWatcherBoundFallsBackToFinalWalk(t *testing.T) {
	f := newWatchFixture(t)
	// Written before the session: dir/deep is in the upper already, and past
	// the bound it gets no watch, so only the end walk can see into it.
	writeFile(t, filepath.Join(f.merged, "dir", "deep", "x.txt"), "x2\n")
	time.Sleep(3 * CtimeSlack)
	spec := f.spec()
	spec.MaxWatches = 1 // the upper root only
	w, err := openUpperWatch(spec, "s2")
	if err != nil {
		t.Fatal(err)
	}
	w.start()
	writeFile(t, filepath.Join(f.merged, "dir", "deep", "new.txt"), "new\n")
	writeFile(t, filepath.Join(f.merged, "top.txt"), "top\n")
	w.finish()
	if len(w.dirs) > 1 {
		t.Errorf("%d dirs watched, bound was 1", len(w.dirs))
	}
	got := provOf(t, f, "s2")
	for _, p := range []string{"dir/deep/new.txt", "top.txt"} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s not recorded past the watch bound: %v", p, got)
		}
	}
	for _, p := range []string{"keep.txt", "dir/deep/x.txt"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s recorded but this session never wrote it", p)
		}
	}
	if r, _ := (BaseIndex{Dir: f.bases}).Get("dir/deep/new.txt"); r == nil || !r.Absent {
		t.Errorf("dir/deep/new.txt: base %+v, want absent", r)
	}
}

// A base is captured within milliseconds of the copy-up, before a person
// edits the source.
func TestWatcherCapturesBaseWithinMilliseconds(t *testing.T) {
	f := newWatchFixture(t)
	w, err := openUpperWatch(f.spec(), "s3")
	if err != nil {
		t.Fatal(err)
	}
	w.start()
	defer w.finish()
	idx := BaseIndex{Dir: f.bases}
	writeFile(t, filepath.Join(f.merged, "edit.txt"), "world\n")
	start := time.Now()
	for {
		if r, _ := idx.Get("edit.txt"); r != nil {
			break
		}
		if time.Since(start) > 50*time.Millisecond {
			t.Fatal("no base 50 ms after the copy-up")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("base captured %v after the write returned", time.Since(start))
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
