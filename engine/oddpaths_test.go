package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// One World whose bases cannot be captured never fails another World's
// apply: the failure is a warning, an activity event, and a mark that makes
// the broken World's own apply ask for a merge instead of overwriting what
// the source gained meanwhile.
func TestApplyOtherWorldCaptureFailureIsAWarning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	ma := mountedWorld(t, e, src, "a")
	mb := mountedWorld(t, e, src, "b")
	mc := mountedWorld(t, e, src, "c")

	// b changed a path whose base record is unreadable (a torn write, a bug).
	writeFile(t, filepath.Join(mb, "d0", "f0.txt"), "b's version\n")
	idxB := e.bases("b")
	if err := os.MkdirAll(idxB.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, idxB.File("d0/f0.txt"), "{torn")

	// c changed d2/f2.txt, then its upper became unreadable as a whole.
	writeFile(t, filepath.Join(mc, "d2", "f2.txt"), "c's version\n")
	time.Sleep(20 * time.Millisecond) // c's copy-up is older than the failure below
	wc := mustWorld(t, e, "c")
	if err := e.unmountLocked(ctx, wc); err != nil {
		t.Fatal(err)
	}
	upperC := e.Paths.Upper("c")
	if err := os.Rename(upperC, upperC+".aside"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, upperC, "not a directory")

	// a changes both paths b and c changed, and d1/f1.txt.
	writeFile(t, filepath.Join(ma, "d0", "f0.txt"), "a's version\n")
	writeFile(t, filepath.Join(ma, "d2", "f2.txt"), "a's version\n")
	writeFile(t, filepath.Join(ma, "d1", "f1.txt"), "a's version\n")
	res, err := e.Apply(ctx, "a", ApplyOptions{})
	if err != nil {
		t.Fatalf("a's apply failed because of other Worlds: %v", err)
	}
	for _, p := range []string{"d0/f0.txt", "d1/f1.txt", "d2/f2.txt"} {
		if got := readFile(t, filepath.Join(src, p)); got != "a's version\n" {
			t.Fatalf("source %s = %q after a's apply", p, got)
		}
	}
	if len(res.Warnings) != 2 || !strings.Contains(res.Warnings[0], `world "b"`) || !strings.Contains(res.Warnings[0], "d0/f0.txt") ||
		!strings.Contains(res.Warnings[1], `world "c"`) {
		t.Fatalf("warnings = %q, want one for b's d0/f0.txt and one for c", res.Warnings)
	}
	evs, _, err := e.ReadActivity(0)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, ev := range evs {
		if ev.Type == EventBaseCaptureFailed {
			failed[ev.World] = true
		}
	}
	if !failed["b"] || !failed["c"] {
		t.Fatalf("activity log: base.capture_failed for %v, want b and c", failed)
	}

	// b's diff says its base is unknown; its apply asks for a merge.
	fcs, err := e.Diff(ctx, "b", DiffOptions{})
	if err != nil || len(fcs) != 1 || fcs[0].BaseUnknown == "" {
		t.Fatalf("b's diff: %v %+v, want d0/f0.txt with base_unknown", err, fcs)
	}
	_, err = e.Apply(ctx, "b", ApplyOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "d0/f0.txt" || !strings.Contains(ce.Conflicts[0].Reason, "could not be recorded") {
		t.Fatalf("b's apply: %v, want a conflict on d0/f0.txt", err)
	}
	// c is readable again: its change predates the failure, so its apply
	// must not take the source's new content (a's edit) for c's base.
	if err := os.Remove(upperC); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(upperC+".aside", upperC); err != nil {
		t.Fatal(err)
	}
	_, err = e.Apply(ctx, "c", ApplyOptions{})
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "d2/f2.txt" {
		t.Fatalf("c's apply: %v, want a conflict on d2/f2.txt", err)
	}
	for _, p := range []string{"d0/f0.txt", "d2/f2.txt"} {
		if got := readFile(t, filepath.Join(src, p)); got != "a's version\n" {
			t.Fatalf("source %s = %q: a's edit was overwritten", p, got)
		}
	}
}

// A World whose changes cannot be read at all can still be removed with
// --force or --purge; plain rm refuses and says why.
func TestRemoveUnreadableWorld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	mountedWorld(t, e, src, "c")
	if err := e.unmountLocked(ctx, mustWorld(t, e, "c")); err != nil {
		t.Fatal(err)
	}
	upper := e.Paths.Upper("c")
	if err := os.RemoveAll(upper); err != nil {
		t.Fatal(err)
	}
	writeFile(t, upper, "not a directory")
	if _, err := e.Remove(ctx, "c", RemoveOptions{}); err == nil || !strings.Contains(err.Error(), "--purge") {
		t.Fatalf("rm of an unreadable World: %v, want a refusal naming --force/--purge", err)
	}
	res, err := e.Remove(ctx, "c", RemoveOptions{Purge: true})
	if err != nil || !res.Purged || res.Warning == "" {
		t.Fatalf("rm --purge: %+v %v", res, err)
	}
	if _, err := os.Lstat(e.Paths.World("c")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("world dir still there: %v", err)
	}
}

// Base records keep a path's and a link target's exact bytes: a\xff and
// a\xfe are two records, each read back under its own name.
func TestBaseRecordsKeepNonUTF8Bytes(t *testing.T) {
	t.Parallel()
	idx := BaseIndex{Dir: t.TempDir()}
	for _, r := range []BaseRecord{
		{Path: "a\xff", Type: 1, Object: "obj-ff"},
		{Path: "a\xfe", Type: 1, Object: "obj-fe"},
		{Path: "l\xff", Target: "t\xfe"},
	} {
		if ok, err := idx.Add(r); !ok || err != nil {
			t.Fatalf("add %q: %v %v", r.Path, ok, err)
		}
	}
	for path, obj := range map[string]string{"a\xff": "obj-ff", "a\xfe": "obj-fe"} {
		r, err := idx.Get(path)
		if err != nil || r == nil || r.Path != path || string(r.Object) != obj {
			t.Fatalf("get %q: %+v %v", path, r, err)
		}
	}
	if r, err := idx.Get("l\xff"); err != nil || r == nil || r.Target != "t\xfe" {
		t.Fatalf("symlink record: %+v %v", r, err)
	}
	if r, err := idx.Get("a\ufffd"); err != nil || r != nil {
		t.Fatalf("a\\ufffd has a record: %+v %v", r, err)
	}
}
