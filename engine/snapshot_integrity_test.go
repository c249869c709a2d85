package engine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/store"
)

const freezeHolderEnv = "STRATA_TEST_FREEZE_ROOT"

// TestFreezeHolderChild is not a test: it is the helper process of
// TestKilledFreezerIsThawedOnLoad, which freezes World "w" with the
// engine's own freezer and then waits to be SIGKILLed.
func TestFreezeHolderChild(t *testing.T) {
	root := os.Getenv(freezeHolderEnv)
	if root == "" {
		t.Skip("run by TestKilledFreezerIsThawedOnLoad")
	}
	e, err := Open(context.Background(), Options{StateRoot: root, Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.World("w")
	if err != nil {
		t.Fatal(err)
	}
	e.freezeWorld(w)
	os.Stdout.Write([]byte("R"))
	select {}
}

// growing reports whether the file at p gets longer within d.
func growing(p string, d time.Duration) bool {
	size := func() int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	start := size()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if size() > start {
			return true
		}
	}
	return false
}

// TestKilledFreezerIsThawedOnLoad: a process that froze a World for a
// capture is SIGKILLed while the World's session is frozen; the next strata
// that merely lists the Worlds (strata ls, the TUI's load) resumes the
// session, without any exec or snap.
func TestKilledFreezerIsThawedOnLoad(t *testing.T) {
	ctx := context.Background()
	e, src := testEngine(t)
	mountedWorld(t, e, src, "w")
	meta, err := e.Exec(ctx, "w", ExecOptions{Argv: []string{"sh", "-c", "while :; do echo tick >> ticks; sleep 0.02; done"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = KillSession(e.SessionDir("w", meta.ID), syscall.SIGKILL) })
	ticks := filepath.Join(e.Paths.Upper("w"), "ticks")
	if !growing(ticks, 5*time.Second) {
		t.Fatal("the session does not write")
	}

	child := exec.Command(testExe(t), "-test.run=^TestFreezeHolderChild$", "-test.count=1")
	child.Env = append(os.Environ(), freezeHolderEnv+"="+e.Paths.Root)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if b, err := bufio.NewReader(out).ReadByte(); err != nil || b != 'R' {
		_ = child.Process.Kill()
		t.Fatalf("freezer child did not get ready: %v", err)
	}
	if growing(ticks, 300*time.Millisecond) {
		_ = child.Process.Kill()
		t.Fatal("the freezer did not freeze the session")
	}
	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()
	if growing(ticks, 300*time.Millisecond) {
		t.Fatal("the session resumed by itself: nothing to test")
	}

	// The next strata process lists the Worlds, as strata ls does.
	e2, err := Open(ctx, Options{StateRoot: e.Paths.Root, Config: e.Config, Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := e2.Worlds(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Worlds() with a frozen World took %v", time.Since(start))
	if !growing(ticks, 3*time.Second) {
		t.Fatal("listing the Worlds left the session frozen")
	}
	if _, err := os.Stat(e.frozenMarker("w")); !os.IsNotExist(err) {
		t.Fatalf("the frozen marker is still there: %v", err)
	}
	// A live freezer is left alone: a World frozen by this process is not
	// thawed by its own loads.
	w := mustWorld(t, e2, "w")
	thaw := e2.freezeWorld(w)
	if _, err := e2.Worlds(); err != nil {
		t.Fatal(err)
	}
	if growing(ticks, 300*time.Millisecond) {
		thaw()
		t.Fatal("a load thawed a World whose freezer is alive")
	}
	thaw()
	if !growing(ticks, 3*time.Second) {
		t.Fatal("thaw did not resume the session")
	}
}

// TestGCDropsPurgedAndExpiredWorldsSnapshots: the manifests of a purged
// World and of an expired trash entry go, with the objects only they
// needed; objects another World's snapshot shares stay, and so does
// everything a World in the trash (not expired) can be restored with.
func TestGCDropsPurgedAndExpiredWorldsSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	st, err := e.store()
	if err != nil {
		t.Fatal(err)
	}
	st.GCGrace = -1
	snap := func(name, unique string) (*Snapshot, store.ObjectID, store.ObjectID) {
		t.Helper()
		if _, err := e.Create(ctx, CreateOptions{Name: name, Source: src, MountBackend: overlay.BackendKernel}); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(e.Paths.Upper(name), "unique.txt"), unique)
		writeFile(t, filepath.Join(e.Paths.Upper(name), "shared.txt"), "the same in every World\n")
		s, err := e.Snapshot(ctx, name, SnapshotOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := store.ReadManifest(e.manifestPath(s.ID))
		if err != nil {
			t.Fatal(err)
		}
		return s, m.Lookup("unique.txt").Object, m.Lookup("shared.txt").Object
	}
	sp, uniqueP, shared := snap("purged", "only the purged World has this\n")
	sx, uniqueX, _ := snap("expired", "only the expired World has this\n")
	sk, uniqueK, _ := snap("kept", "only the kept World has this\n")
	sl, uniqueL, _ := snap("trashed", "only the trashed World has this\n")

	if _, err := e.Remove(ctx, "purged", RemoveOptions{Purge: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Remove(ctx, "trashed", RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Remove(ctx, "expired", RemoveOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	old := "expired." + strconv.FormatInt(time.Now().Add(-TrashKeep-time.Hour).UnixNano(), 10)
	if err := os.Rename(filepath.Join(e.Paths.Trash(), res.Trash), filepath.Join(e.Paths.Trash(), old)); err != nil {
		t.Fatal(err)
	}

	gc, err := e.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gc: %+v", gc)
	gone := func(p string) bool { _, err := os.Stat(p); return os.IsNotExist(err) }
	for _, c := range []struct {
		what string
		p    string
		gone bool
	}{
		{"the purged World's manifest", e.manifestPath(sp.ID), true},
		{"the purged World's unique object", st.Path(uniqueP), true},
		{"the expired trash entry's manifest", e.manifestPath(sx.ID), true},
		{"the expired trash entry's unique object", st.Path(uniqueX), true},
		{"an object a live World shares", st.Path(shared), false},
		{"the live World's manifest", e.manifestPath(sk.ID), false},
		{"the live World's object", st.Path(uniqueK), false},
		{"the trashed World's manifest", e.manifestPath(sl.ID), false},
		{"the trashed World's object", st.Path(uniqueL), false},
	} {
		if gone(c.p) != c.gone {
			t.Errorf("after gc, %s: gone=%v, want %v", c.what, gone(c.p), c.gone)
		}
	}
	if gc.RemovedManifests != 2 {
		t.Errorf("gc removed %d manifests, want 2", gc.RemovedManifests)
	}
	// The trashed World comes back whole: its snapshot still rolls back.
	if _, err := e.RestoreWorld(ctx, "trashed", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Rollback(ctx, "trashed", sl.ID, RollbackOptions{}); err != nil {
		t.Fatalf("rollback of a World restored from the trash after gc: %v", err)
	}
}

// corruptSameSize overwrites an object with other bytes of the same size,
// the damage a size check cannot see.
func corruptSameSize(t *testing.T, st *store.Store, id store.ObjectID) {
	t.Helper()
	p := st.Path(id)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[0] ^= 0x20
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptObjectFailsRollbackForkRestore: an object overwritten with
// same-size bytes makes rollback, fork and restore fail with an error
// naming the object and the path, and each leaves everything as it was:
// the World's upper, its running session, its timeline; no fork is made.
func TestCorruptObjectFailsRollbackForkRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	merged := mountedWorld(t, e, src, "w")
	writeFile(t, filepath.Join(merged, "d0", "f0.txt"), "snapshotted\n")
	s1, err := e.Snapshot(ctx, "w", SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.ReadManifest(e.manifestPath(s1.ID))
	if err != nil {
		t.Fatal(err)
	}
	id := m.Lookup("d0/f0.txt").Object
	st, _ := e.store()
	corruptSameSize(t, st, id)
	writeFile(t, filepath.Join(merged, "d0", "f0.txt"), "live work\n")
	meta, err := e.Exec(ctx, "w", ExecOptions{Argv: []string{"sh", "-c", "while :; do echo tick >> ticks; sleep 0.02; done"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = KillSession(e.SessionDir("w", meta.ID), syscall.SIGKILL) })
	upperState := func() string {
		t.Helper()
		cm, err := e.captureNow(ctx, mustWorld(t, e, "w"))
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, en := range cm.Entries {
			if en.Path != "ticks" {
				fmt.Fprintf(&b, "%s %v %o %s\n", en.Path, en.Kind, en.Mode, en.Object)
			}
		}
		return b.String()
	}
	before := upperState()
	tlBefore, _ := e.Timeline("w")
	wantErr := func(op string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s with a corrupt object succeeded", op)
		}
		for _, want := range []string{string(id[:12]), "d0/f0.txt", "corrupt", "was not changed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", op, err, want)
			}
		}
		if got := upperState(); got != before {
			t.Fatalf("%s changed the upper:\n%s\nwant\n%s", op, got, before)
		}
		if tl, _ := e.Timeline("w"); len(tl.Snapshots) != len(tlBefore.Snapshots) || tl.Head != tlBefore.Head {
			t.Errorf("%s changed the timeline", op)
		}
		if !growing(filepath.Join(e.Paths.Upper("w"), "ticks"), 3*time.Second) {
			t.Fatalf("%s stopped the World's session", op)
		}
		if got, _ := os.ReadFile(filepath.Join(merged, "d0", "f0.txt")); string(got) != "live work\n" {
			t.Fatalf("%s: the mounted World reads %q", op, got)
		}
	}
	_, err = e.Rollback(ctx, "w", s1.ID, RollbackOptions{Kill: true})
	wantErr("rollback", err)
	_, err = e.Fork(ctx, "w", ForkOptions{Snap: s1.ID, N: 3})
	wantErr("fork", err)
	ents, _ := os.ReadDir(e.Paths.Worlds())
	for _, d := range ents {
		if d.Name() != "w" && d.IsDir() {
			t.Errorf("a failed fork left %s", d.Name())
		}
	}
	if err := KillSession(e.SessionDir("w", meta.ID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitSession(ctx, e.SessionDir("w", meta.ID)); err != nil {
		t.Fatal(err)
	}
	before = upperState() // ticks stopped growing
	err = e.RestorePaths(ctx, "w", s1.ID, []string{"d0/f0.txt"})
	if err == nil || !strings.Contains(err.Error(), "d0/f0.txt") || !strings.Contains(err.Error(), string(id[:12])) {
		t.Fatalf("restore with a corrupt object: %v", err)
	}
	if got := upperState(); got != before {
		t.Fatalf("restore changed the upper")
	}
	if got, _ := os.ReadFile(filepath.Join(merged, "d0", "f0.txt")); string(got) != "live work\n" {
		t.Fatalf("restore: the World reads %q (want its live work, mounted again)", got)
	}
	damaged, err := e.VerifyObjects(ctx)
	if err != nil || len(damaged) != 1 || damaged[0].Object != id || damaged[0].Path != "d0/f0.txt" {
		t.Fatalf("VerifyObjects = %+v, %v; want the one damaged object", damaged, err)
	}
}
