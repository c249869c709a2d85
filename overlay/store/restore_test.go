package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
	"golang.org/x/sys/unix"
)

func snaptRestore(t testing.TB, s *Store, m *Manifest, upper string, d overlay.Dialect) {
	t.Helper()
	snaptMust(t, RestoreUpper(context.Background(), s, m, upper, d))
}

func TestRestoreRoundTripEveryDialect(t *testing.T) {
	for _, d := range snaptDialects {
		t.Run(string(d), func(t *testing.T) {
			dir := t.TempDir()
			upper := filepath.Join(dir, "upper")
			snaptBuildScenario(t, upper, d)
			want := snaptDump(t, upper, d)
			s := snaptStore(t)
			m, _ := snaptCapture(t, s, upper, d, nil)

			fresh := filepath.Join(dir, "fresh")
			snaptRestore(t, s, m, fresh, d)
			if got := snaptDump(t, fresh, d); got != want {
				t.Errorf("restore into a new dir differs:\n%s", snaptLineDiff(want, got))
			}

			// Restore over the live upper after it was changed.
			snaptWrite(t, filepath.Join(upper, "src/main.c"), "changed", 0o600)
			snaptMust(t, os.RemoveAll(filepath.Join(upper, "deep")))
			snaptWrite(t, filepath.Join(upper, "junk/new"), "junk", 0o644)
			snaptRestore(t, s, m, upper, d)
			if got := snaptDump(t, upper, d); got != want {
				t.Errorf("restore over a changed upper differs:\n%s", snaptLineDiff(want, got))
			}
			if _, err := os.Lstat(upper + restoreTmpSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temp dir left behind: %v", err)
			}
			// Restored files are copies: writing one leaves the store intact.
			snaptMust(t, os.WriteFile(filepath.Join(upper, "xattr.txt"), []byte("scribble"), 0o644))
			snaptMust(t, s.Verify(m.Lookup("xattr.txt").Object))
		})
	}
}

func TestRestoreAcrossDialects(t *testing.T) {
	for _, from := range snaptDialects {
		upper := filepath.Join(t.TempDir(), "upper")
		snaptBuildScenario(t, upper, from)
		s := snaptStore(t)
		m, _ := snaptCapture(t, s, upper, from, nil)
		want := snaptNeutral(m)
		for _, to := range snaptDialects {
			t.Run(string(from)+"-to-"+string(to), func(t *testing.T) {
				target := filepath.Join(t.TempDir(), "upper")
				snaptRestore(t, s, m, target, to)
				again, _ := snaptCapture(t, s, target, to, nil)
				if got := snaptNeutral(again); got != want {
					t.Errorf("recaptured manifest differs:\n%s", snaptLineDiff(want, got))
				}
			})
		}
	}
}

func TestRestoreUserXattr(t *testing.T) {
	upper := filepath.Join(t.TempDir(), "upper")
	snaptBuildScenario(t, upper, overlay.DialectKernel)
	s := snaptStore(t)
	m, _ := snaptCapture(t, s, upper, overlay.DialectKernel, nil)
	target := filepath.Join(t.TempDir(), "rootless")
	snaptMust(t, RestoreUpperWith(context.Background(), s, m, target, overlay.DialectKernel, RestoreOptions{UserXattr: true}))
	if _, err := snapGetXattr(filepath.Join(target, "replaced"), "user.overlay.opaque"); err != nil {
		t.Fatalf("user.overlay.opaque: %v", err)
	}
	if _, err := snapGetXattr(filepath.Join(target, "replaced"), "trusted.overlay.opaque"); err == nil {
		t.Fatal("trusted.overlay.opaque written with UserXattr")
	}
	again, _ := snaptCapture(t, s, target, overlay.DialectKernel, nil)
	if snaptNeutral(again) != snaptNeutral(m) {
		t.Fatalf("userxattr upper recaptures differently:\n%s", snaptLineDiff(snaptNeutral(m), snaptNeutral(again)))
	}
}

func TestRestoreUnionfsWhiteoutWithoutParent(t *testing.T) {
	// unionfs-fuse records deleting lower/dir/x without copying dir up; a
	// kernel upper needs the dir, which takes the lower's attributes.
	dir := t.TempDir()
	lower := filepath.Join(dir, "lower")
	snaptWrite(t, filepath.Join(lower, "ldir/x"), "x", 0o644)
	snaptMust(t, os.Chmod(filepath.Join(lower, "ldir"), 0o750))
	snaptMust(t, os.Chown(filepath.Join(lower, "ldir"), 42, 43))
	upper := filepath.Join(dir, "upper")
	snaptWrite(t, filepath.Join(upper, ".unionfs-fuse/ldir/x_HIDDEN~"), "", 0o644)
	s := snaptStore(t)
	m, _ := snaptCapture(t, s, upper, overlay.DialectUnionfs, nil)
	if len(m.Entries) != 1 || m.Entries[0].Path != "ldir/x" || m.Entries[0].Kind != EntryWhiteout {
		t.Fatalf("entries %+v", m.Entries)
	}
	target := filepath.Join(dir, "kernel-upper")
	snaptMust(t, RestoreUpperWith(context.Background(), s, m, target, overlay.DialectKernel, RestoreOptions{Lower: lower}))
	var st unix.Stat_t
	snaptMust(t, unix.Lstat(filepath.Join(target, "ldir"), &st))
	if st.Mode&0o7777 != 0o750 || st.Uid != 42 || st.Gid != 43 {
		t.Errorf("implied parent: mode %o uid %d gid %d", st.Mode&0o7777, st.Uid, st.Gid)
	}
	snaptMust(t, unix.Lstat(filepath.Join(target, "ldir/x"), &st))
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("ldir/x is not a kernel whiteout: mode %o", st.Mode)
	}
}

func TestRestoreLeftoverAndCorruptObject(t *testing.T) {
	dir := t.TempDir()
	upper := filepath.Join(dir, "upper")
	snaptBuildScenario(t, upper, overlay.DialectKernel)
	s := snaptStore(t)
	m, _ := snaptCapture(t, s, upper, overlay.DialectKernel, nil)
	before := snaptDump(t, upper, overlay.DialectKernel)

	// A crash left a half-built tree: the next restore clears it.
	snaptWrite(t, filepath.Join(upper+restoreTmpSuffix, "half/built"), "x", 0o644)
	snaptRestore(t, s, m, upper, overlay.DialectKernel)
	if got := snaptDump(t, upper, overlay.DialectKernel); got != before {
		t.Fatalf("after leftover:\n%s", snaptLineDiff(before, got))
	}

	// DeferCleanup leaves the old tree for the caller.
	snaptWrite(t, filepath.Join(upper, "marker-of-old"), "old", 0o644)
	snaptMust(t, RestoreUpperWith(context.Background(), s, m, upper, overlay.DialectKernel, RestoreOptions{DeferCleanup: true}))
	if _, err := os.Lstat(filepath.Join(upper+restoreTmpSuffix, "marker-of-old")); err != nil {
		t.Fatalf("deferred cleanup: old tree not kept: %v", err)
	}
	snaptMust(t, RemoveRestoreLeftovers(upper))
	if got := snaptDump(t, upper, overlay.DialectKernel); got != before {
		t.Fatalf("after deferred cleanup:\n%s", snaptLineDiff(before, got))
	}

	// A truncated object fails the restore, names the path, and leaves the upper alone.
	id := m.Lookup("src/main.c").Object
	snaptMust(t, os.Chmod(s.Path(id), 0o644))
	snaptMust(t, os.Truncate(s.Path(id), 3))
	err := RestoreUpper(context.Background(), s, m, upper, overlay.DialectKernel)
	var coe *CorruptObjectError
	if !errors.As(err, &coe) || coe.ID != id || !strings.Contains(err.Error(), "src/main.c") {
		t.Fatalf("err = %v, want CorruptObjectError for src/main.c", err)
	}
	if got := snaptDump(t, upper, overlay.DialectKernel); got != before {
		t.Fatalf("failed restore changed the upper:\n%s", snaptLineDiff(before, got))
	}
	if _, err := os.Lstat(upper + restoreTmpSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed restore left its temp dir: %v", err)
	}

	// Same size, other bytes: the hash taken while copying notices.
	id2 := m.Lookup("xattr.txt").Object
	snaptMust(t, os.Chmod(s.Path(id2), 0o644))
	snaptMust(t, os.WriteFile(s.Path(id2), []byte("HAS attributes\n"), 0o644))
	snaptMust(t, os.Truncate(s.Path(id), 0))
	snaptMust(t, os.WriteFile(s.Path(id), []byte("int main(void) { return 0; }\n"), 0o444))
	err = RestoreUpperWith(context.Background(), s, m, upper, overlay.DialectKernel, RestoreOptions{})
	if !errors.As(err, &coe) || coe.ID != id2 || !strings.Contains(err.Error(), "xattr.txt") || !strings.Contains(err.Error(), "hash mismatch") {
		t.Fatalf("same-size corruption: err = %v, want CorruptObjectError (hash mismatch) for xattr.txt", err)
	}
	if got := snaptDump(t, upper, overlay.DialectKernel); got != before {
		t.Fatalf("failed restore changed the upper:\n%s", snaptLineDiff(before, got))
	}
}

func TestRestorePaths(t *testing.T) {
	for _, d := range snaptDialects {
		t.Run(string(d), func(t *testing.T) {
			dir := t.TempDir()
			upper := filepath.Join(dir, "upper")
			snaptBuildScenario(t, upper, d)
			s := snaptStore(t)
			snap, _ := snaptCapture(t, s, upper, d, nil)

			// The World moves on.
			w := &snapWriter{store: s, root: upper, d: d}
			snaptWrite(t, filepath.Join(upper, "src/main.c"), "edited", 0o600)            // modified
			snaptMust(t, w.removeCurrent("src/gone.c"))                                   // deleted file comes back
			snaptWrite(t, filepath.Join(upper, "src/gone.c"), "resurrected", 0o644)       //
			snaptMust(t, w.removeCurrent("deep"))                                         // a subtree deleted
			snaptMust(t, w.create(&ManifestEntry{Path: "deep", Kind: EntryWhiteout}))     //
			snaptWrite(t, filepath.Join(upper, "fallback.txt"), "not in the snap", 0o644) // falls back to lower
			snaptWrite(t, filepath.Join(upper, "odd/-leading-dash"), "kept edit", 0o644)  // not restored
			snaptMust(t, w.removeCurrent("replaced"))                                     // opaque dir removed
			var srcBefore unix.Stat_t
			snaptMust(t, unix.Lstat(filepath.Join(upper, "src"), &srcBefore))

			paths := []string{"src/main.c", "/src/gone.c", "deep/", "fallback.txt", "replaced", "deep/a"}
			snaptMust(t, RestorePaths(context.Background(), s, snap, upper, d, paths))
			now, _ := snaptCapture(t, s, upper, d, nil)
			for _, p := range []string{"src/main.c", "src/gone.c", "deep", "deep/a/b/c/kept.txt", "deep/a/b/c/x", "replaced", "replaced/new.txt"} {
				a, b := snap.Lookup(p), now.Lookup(p)
				if b == nil || entryDelta(a, b) != 0 || (a.Kind != EntryWhiteout && a.MTime != b.MTime) {
					t.Errorf("%q not restored: snap %+v now %+v", p, a, b)
				}
			}
			if e := now.Lookup("fallback.txt"); e != nil {
				t.Errorf("fallback.txt still in the upper: %+v", e)
			}
			if e := now.Lookup("odd/-leading-dash"); e == nil || entryDelta(e, snap.Lookup("odd/-leading-dash")) != DeltaContent {
				t.Errorf("a path not asked for was restored: %+v", e)
			}
			var srcAfter unix.Stat_t
			snaptMust(t, unix.Lstat(filepath.Join(upper, "src"), &srcAfter))
			if srcAfter.Mtim != srcBefore.Mtim {
				t.Errorf("parent mtime moved from %v to %v", srcBefore.Mtim, srcAfter.Mtim)
			}
			if got := DiffManifests(snap, now); len(got) != 1 || got[0].Path != "odd/-leading-dash" {
				t.Errorf("remaining differences: %+v", got)
			}
		})
	}
}

func TestRestorePathsUnderDeletedDir(t *testing.T) {
	for _, d := range snaptDialects {
		t.Run(string(d), func(t *testing.T) {
			upper := filepath.Join(t.TempDir(), "upper")
			snaptWrite(t, filepath.Join(upper, "gone/sub/f"), "f", 0o644)
			s := snaptStore(t)
			snap, _ := snaptCapture(t, s, upper, d, nil)
			w := &snapWriter{store: s, root: upper, d: d}
			snaptMust(t, w.removeCurrent("gone"))
			snaptMust(t, w.create(&ManifestEntry{Path: "gone", Kind: EntryWhiteout}))

			snaptMust(t, RestorePaths(context.Background(), s, snap, upper, d, []string{"gone/sub/f"}))
			now, _ := snaptCapture(t, s, upper, d, nil)
			g := now.Lookup("gone")
			if g == nil || g.Kind != EntryDir || !g.Opaque {
				t.Fatalf("gone = %+v, want an opaque dir (the rest of it stays deleted)", g)
			}
			if f := now.Lookup("gone/sub/f"); f == nil || f.Object != snap.Lookup("gone/sub/f").Object {
				t.Fatalf("gone/sub/f = %+v", f)
			}
		})
	}
}

// snaptLineDiff shows the lines only one side has.
func snaptLineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// --- real mounts ---

type snaptMountSet struct {
	lower, upper, work, target string
	backend                    overlay.Backend
}

func snaptMount(t *testing.T, ms snaptMountSet) {
	t.Helper()
	for _, p := range []string{ms.upper, ms.work, ms.target} {
		snaptMust(t, os.MkdirAll(p, 0o755))
	}
	switch ms.backend {
	case overlay.BackendKernel:
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", ms.lower, ms.upper, ms.work)
		if err := unix.Mount("overlay", ms.target, "overlay", 0, opts); err != nil {
			t.Fatalf("mount overlay: %v", err)
		}
	case overlay.BackendFuseOverlayfs:
		out, err := exec.Command("fuse-overlayfs", "-o", fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", ms.lower, ms.upper, ms.work), ms.target).CombinedOutput()
		if err != nil {
			t.Fatalf("fuse-overlayfs: %v: %s", err, out)
		}
	case overlay.BackendUnionfs:
		out, err := exec.Command("unionfs-fuse", "-o", "cow,hide_meta_files", ms.upper+"=RW:"+ms.lower+"=RO", ms.target).CombinedOutput()
		if err != nil {
			t.Fatalf("unionfs-fuse: %v: %s", err, out)
		}
	}
	t.Cleanup(func() { snaptUnmountQuiet(ms) })
}

func snaptUnmountQuiet(ms snaptMountSet) {
	if ms.backend == overlay.BackendKernel {
		_ = unix.Unmount(ms.target, 0)
	} else {
		_ = exec.Command("fusermount3", "-u", ms.target).Run()
	}
	_ = unix.Unmount(ms.target, unix.MNT_DETACH)
}

func snaptUnmount(t *testing.T, ms snaptMountSet) {
	t.Helper()
	var err error
	for range 50 {
		if ms.backend == overlay.BackendKernel {
			err = unix.Unmount(ms.target, 0)
		} else {
			var out []byte
			out, err = exec.Command("fusermount3", "-u", ms.target).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, out)
			}
		}
		if err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("unmount %s: %v", ms.target, err)
}

func snaptNeedTool(t *testing.T, b overlay.Backend) {
	t.Helper()
	if b == overlay.BackendKernel {
		return
	}
	if _, err := exec.LookPath(string(b)); err != nil {
		t.Skipf("%s not installed", b)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not installed")
	}
}

func snaptLower(t *testing.T, lower string) {
	t.Helper()
	for i := range 4 {
		for j := range 4 {
			snaptWrite(t, filepath.Join(lower, fmt.Sprintf("d%d/f%d.txt", i, j)), strings.Repeat(fmt.Sprintf("lower %d %d\n", i, j), 10+i*j), 0o644)
		}
		snaptWrite(t, filepath.Join(lower, fmt.Sprintf("d%d/sub/deep.txt", i)), "deep\n", 0o640)
	}
	snaptMust(t, os.Symlink("d0/f0.txt", filepath.Join(lower, "link0")))
}

// snaptRandomOps does n random file operations through a merged view.
func snaptRandomOps(t *testing.T, merged string, rng *rand.Rand, n int) {
	t.Helper()
	pick := func() string {
		var all []string
		_ = filepath.Walk(merged, func(p string, info os.FileInfo, err error) error {
			if err == nil && p != merged {
				all = append(all, p)
			}
			return nil
		})
		if len(all) == 0 {
			return filepath.Join(merged, "x")
		}
		return all[rng.IntN(len(all))]
	}
	dirOf := func(p string) string {
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			return p
		}
		return filepath.Dir(p)
	}
	for i := range n {
		p := pick()
		switch rng.IntN(9) {
		case 0: // new file
			_ = os.WriteFile(filepath.Join(dirOf(p), fmt.Sprintf("new%d", i)), []byte(fmt.Sprintf("new %d\n", i)), 0o644)
		case 1: // append
			if f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				_, _ = fmt.Fprintf(f, "appended %d\n", i)
				f.Close()
			}
		case 2: // rewrite
			if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
				_ = os.WriteFile(p, []byte(fmt.Sprintf("rewritten %d\n", i)), 0o644)
			}
		case 3: // delete a file
			if st, err := os.Lstat(p); err == nil && !st.IsDir() {
				_ = os.Remove(p)
			}
		case 4: // delete a whole dir
			if st, err := os.Lstat(p); err == nil && st.IsDir() {
				_ = os.RemoveAll(p)
			}
		case 5: // recreate a deleted dir (opaque) or make an empty one
			name := filepath.Join(merged, fmt.Sprintf("d%d", rng.IntN(5)))
			if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
				_ = os.Mkdir(name, 0o755)
				_ = os.WriteFile(filepath.Join(name, "again"), []byte("again\n"), 0o600)
			} else {
				_ = os.Mkdir(filepath.Join(dirOf(p), fmt.Sprintf("empty%d", i)), 0o700)
			}
		case 6:
			_ = os.Symlink(fmt.Sprintf("target-%d", i), filepath.Join(dirOf(p), fmt.Sprintf("sym%d", i)))
		case 7:
			if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
				_ = os.Chmod(p, os.FileMode(rng.IntN(0o1000))|os.ModeSetuid)
			}
		case 8:
			if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
				_ = os.Rename(p, p+".renamed")
			}
		}
	}
}

// TestSnapshotRealMounts runs the World cycle on real mounts: random ops,
// record, capture, more ops, restore, mount: the merged view is the record.
// The cross cases restore a kernel capture as another backend's upper.
func TestSnapshotRealMounts(t *testing.T) {
	cases := []struct{ from, to overlay.Backend }{
		{overlay.BackendKernel, overlay.BackendKernel},
		{overlay.BackendFuseOverlayfs, overlay.BackendFuseOverlayfs},
		{overlay.BackendUnionfs, overlay.BackendUnionfs},
		{overlay.BackendKernel, overlay.BackendFuseOverlayfs},
		{overlay.BackendFuseOverlayfs, overlay.BackendKernel},
		{overlay.BackendKernel, overlay.BackendUnionfs},
	}
	for ci, c := range cases {
		t.Run(string(c.from)+"-to-"+string(c.to), func(t *testing.T) {
			snaptNeedTool(t, c.from)
			snaptNeedTool(t, c.to)
			dir := t.TempDir()
			lower := filepath.Join(dir, "lower")
			snaptLower(t, lower)
			ms := snaptMountSet{lower: lower, upper: filepath.Join(dir, "upper"), work: filepath.Join(dir, "work"), target: filepath.Join(dir, "merged"), backend: c.from}
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			snaptMount(t, ms)
			// Always: a deleted and recreated dir (opaque) and a deleted file.
			snaptMust(t, os.RemoveAll(filepath.Join(ms.target, "d1")))
			snaptWrite(t, filepath.Join(ms.target, "d1/only-new"), "new\n", 0o644)
			snaptMust(t, os.Remove(filepath.Join(ms.target, "d2/f0.txt")))
			snaptRandomOps(t, ms.target, rng, 40)
			want := overlaytest.Record(t, ms.target)
			snaptUnmount(t, ms)

			s := snaptStore(t)
			cache := NewStatCache()
			m, st := snaptCapture(t, s, ms.upper, c.from.Dialect(), cache)
			t.Logf("captured %+v", st)
			if st.Whiteouts == 0 || st.Files == 0 || st.Opaque == 0 {
				t.Fatalf("the ops left no whiteouts or files; the test proves little: %+v", st)
			}

			snaptMount(t, ms)
			snaptRandomOps(t, ms.target, rng, 40)
			if diff := overlaytest.DiffTrees(want, overlaytest.Record(t, ms.target)); len(diff) == 0 {
				t.Fatal("the second round of ops changed nothing; the test proves nothing")
			}
			snaptUnmount(t, ms)

			back := ms
			back.backend = c.to
			if c.to != c.from {
				back.upper, back.work = filepath.Join(dir, "upper2"), filepath.Join(dir, "work2")
			}
			snaptMust(t, RestoreUpper(context.Background(), s, m, back.upper, c.to.Dialect()))
			snaptMount(t, back)
			if diff := overlaytest.DiffTrees(want, overlaytest.Record(t, back.target)); len(diff) > 0 {
				t.Fatalf("merged view after restore differs from the record:\n%s", strings.Join(diff, "\n"))
			}
			snaptUnmount(t, back)
		})
	}
}
