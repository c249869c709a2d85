package engine

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
	"github.com/stratahq/strata/overlay/overlaytest"
	"github.com/stratahq/strata/overlay/store"
)

// testEngine opens an engine on a temp state root with a small source tree.
func testEngine(t *testing.T) (*Engine, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("snapshot tests mount kernel overlays: run as root")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	for i := 0; i < 6; i++ {
		d := filepath.Join(src, fmt.Sprintf("d%d", i))
		if err := os.MkdirAll(filepath.Join(d, "deep"), 0o755); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 4; j++ {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.txt", j)), []byte(strings.Repeat(fmt.Sprintf("line %d %d\n", i, j), 5)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "deep", "x"), []byte("deep\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("d0/f0.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), Options{StateRoot: filepath.Join(base, "home"), Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ws, _ := e.Worlds()
		for _, w := range ws {
			RetireResidents(e.Paths.World(w.Name), time.Second)
			_ = mount.ForceUnmount(e.Paths.Merged(w.Name))
		}
	})
	return e, src
}

func testExe(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func mountedWorld(t *testing.T, e *Engine, src, name string) string {
	t.Helper()
	w, err := e.Create(context.Background(), CreateOptions{Name: name, Source: src, MountBackend: overlay.BackendKernel})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.EnsureMounted(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return e.Paths.Merged(name)
}

// randomOps applies n random file system operations to a mounted view.
func randomOps(t *testing.T, rng *rand.Rand, root string, n int) {
	t.Helper()
	pick := func(wantDir bool) string {
		var cands []string
		_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || p == root {
				return nil
			}
			if info.IsDir() == wantDir && info.Mode()&os.ModeSymlink == 0 {
				cands = append(cands, p)
			}
			return nil
		})
		if len(cands) == 0 {
			return ""
		}
		return cands[rng.Intn(len(cands))]
	}
	for i := 0; i < n; i++ {
		var err error
		switch rng.Intn(10) {
		case 0: // create a file
			d := pick(true)
			if d == "" {
				d = root
			}
			err = os.WriteFile(filepath.Join(d, fmt.Sprintf("new-%d-%d", i, rng.Intn(1000))), []byte(fmt.Sprintf("new %d\n", rng.Int())), 0o644)
		case 1: // append
			if f := pick(false); f != "" {
				var fh *os.File
				if fh, err = os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0); err == nil {
					_, err = fmt.Fprintf(fh, "appended %d\n", rng.Int())
					fh.Close()
				}
			}
		case 2: // rewrite
			if f := pick(false); f != "" {
				err = os.WriteFile(f, []byte(fmt.Sprintf("rewritten %d\n", rng.Int())), 0o644)
			}
		case 3: // delete a file
			if f := pick(false); f != "" {
				err = os.Remove(f)
			}
		case 4: // delete a dir tree
			if d := pick(true); d != "" && rng.Intn(3) == 0 {
				err = os.RemoveAll(d)
			}
		case 5: // delete and recreate a dir
			if d := pick(true); d != "" && rng.Intn(2) == 0 {
				if err = os.RemoveAll(d); err == nil {
					if err = os.Mkdir(d, 0o755); err == nil {
						err = os.WriteFile(filepath.Join(d, "again"), []byte("again\n"), 0o644)
					}
				}
			}
		case 6: // chmod
			if f := pick(false); f != "" {
				err = os.Chmod(f, os.FileMode(0o600+rng.Intn(0o200)))
			}
		case 7: // symlink create or retarget
			l := filepath.Join(root, fmt.Sprintf("ln-%d", rng.Intn(3)))
			_ = os.Remove(l)
			err = os.Symlink(fmt.Sprintf("target-%d", rng.Intn(100)), l)
		case 8: // new empty dir
			err = os.MkdirAll(filepath.Join(root, fmt.Sprintf("empty-%d", rng.Intn(20))), 0o755)
		case 9: // rename a file
			if f := pick(false); f != "" {
				err = os.Rename(f, f+".moved")
			}
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
}

func TestSnapshotRollbackForkRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for seed := int64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			e, src := testEngine(t)
			rng := rand.New(rand.NewSource(seed))
			merged := mountedWorld(t, e, src, "w")
			randomOps(t, rng, merged, 25)
			atSnap := overlaytest.Record(t, merged)
			s, err := e.Snapshot(ctx, "w", SnapshotOptions{Message: "t"})
			if err != nil {
				t.Fatal(err)
			}
			randomOps(t, rng, merged, 25)
			later := overlaytest.Record(t, merged)
			laterSnap, err := e.Snapshot(ctx, "w", SnapshotOptions{})
			if err != nil {
				t.Fatal(err)
			}
			randomOps(t, rng, merged, 10)
			res, err := e.Rollback(ctx, "w", s.ID, RollbackOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d := overlaytest.DiffTrees(atSnap, overlaytest.Record(t, merged)); len(d) > 0 {
				t.Fatalf("after rollback the view differs from the snapshot:\n%s", strings.Join(d, "\n"))
			}
			// The rollback itself can be undone.
			if _, err := e.Rollback(ctx, "w", res.Saved.ID, RollbackOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Rollback(ctx, "w", laterSnap.ID, RollbackOptions{}); err != nil {
				t.Fatal(err)
			}
			if d := overlaytest.DiffTrees(later, overlaytest.Record(t, merged)); len(d) > 0 {
				t.Fatalf("rollback to the later snapshot:\n%s", strings.Join(d, "\n"))
			}
			forks, err := e.Fork(ctx, "w", ForkOptions{Snap: s.ID, N: 3})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range forks {
				if err := e.EnsureMounted(ctx, f); err != nil {
					t.Fatal(err)
				}
				if d := overlaytest.DiffTrees(atSnap, overlaytest.Record(t, e.Paths.Merged(f.Name))); len(d) > 0 {
					t.Fatalf("fork %s differs from the snapshot:\n%s", f.Name, strings.Join(d, "\n"))
				}
				if f.Base != s.ID {
					t.Fatalf("fork base %q, want %q", f.Base, s.ID)
				}
			}
			// Forks are independent: writing one changes neither the others nor w.
			if err := os.WriteFile(filepath.Join(e.Paths.Merged(forks[0].Name), "only-in-fork"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(e.Paths.Merged(forks[1].Name), "only-in-fork")); err == nil {
				t.Fatal("a write in one fork shows in another")
			}
			// Restore: every top-level path back as it was at the snapshot.
			randomOps(t, rng, merged, 20)
			var paths []string
			ents, _ := os.ReadDir(src)
			for _, d := range ents {
				paths = append(paths, d.Name())
			}
			ments, _ := os.ReadDir(merged)
			for _, d := range ments {
				paths = append(paths, d.Name())
			}
			for p := range atSnap {
				if !strings.Contains(p, "/") {
					paths = append(paths, p)
				}
			}
			if err := e.RestorePaths(ctx, "w", s.ID, paths); err != nil {
				t.Fatal(err)
			}
			if d := overlaytest.DiffTrees(atSnap, overlaytest.Record(t, merged)); len(d) > 0 {
				t.Fatalf("restore of every path differs from the snapshot:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestAgentLoopRollsBackDestructiveCommand snapshots before each command, as
// an agent harness would, and rolls back when the target disappears.
func TestAgentLoopRollsBackDestructiveCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	merged := mountedWorld(t, e, src, "agent")
	target := filepath.Join(src, "d1", "f1.txt")
	cmds := []string{
		"echo a >> d1/f1.txt",
		"echo rewrite > d1/f1.txt",
		"cat d1/f1.txt > /dev/null",
		"echo b >> d1/f1.txt",
		"echo more >> d2/f2.txt",
		"wc -l d1/f1.txt > /dev/null",
		"printf 'x\\ny\\n' >> d1/f1.txt",
		"touch d3/new",
		"sed -i s/a/A/ d1/f1.txt",
		"rm -f d1/f1.txt",
	}
	rng := rand.New(rand.NewSource(7))
	rollbacks := 0
	for i := 0; i < 40; i++ {
		before, err := os.ReadFile(filepath.Join(merged, "d1", "f1.txt"))
		if err != nil {
			t.Fatalf("step %d: target missing before the command: %v", i, err)
		}
		s, err := e.Snapshot(ctx, "agent", SnapshotOptions{Message: fmt.Sprint("step ", i)})
		if err != nil {
			t.Fatal(err)
		}
		c := cmds[rng.Intn(len(cmds))]
		if i == 5 {
			c = cmds[len(cmds)-1] // make sure the destructive command runs
		}
		meta, err := e.Exec(ctx, "agent", ExecOptions{Argv: []string{"sh", "-c", c}, Cwd: src})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := WaitSession(ctx, e.SessionDir("agent", meta.ID)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(merged, "d1", "f1.txt")); err == nil {
			continue
		}
		if _, err := e.Rollback(ctx, "agent", s.ID, RollbackOptions{}); err != nil {
			t.Fatal(err)
		}
		rollbacks++
		after, err := os.ReadFile(filepath.Join(merged, "d1", "f1.txt"))
		if err != nil || string(after) != string(before) {
			t.Fatalf("step %d: after rollback the target is %q (%v), want %q", i, after, err, before)
		}
	}
	if rollbacks == 0 {
		t.Fatal("the destructive command never ran")
	}
	if b, _ := os.ReadFile(target); !strings.HasPrefix(string(b), "line 1 1") {
		t.Fatalf("the source changed: %q", b)
	}
}

func TestSnapshotIncrementalAndCorruptObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	merged := mountedWorld(t, e, src, "w")
	for i := 0; i < 20; i++ {
		if err := os.WriteFile(filepath.Join(merged, fmt.Sprintf("f%02d", i)), []byte(strings.Repeat("x", 1000+i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // files younger than the stat cache's racy window are rehashed
	s1, err := e.Snapshot(ctx, "w", SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s1.Hashed < 20 {
		t.Fatalf("first snapshot hashed %d files", s1.Hashed)
	}
	if err := os.WriteFile(filepath.Join(merged, "f03"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // leave the stat cache's racy window
	s2, err := e.Snapshot(ctx, "w", SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Hashed > 2 || s2.NewObjects != 1 || s2.Parent != s1.ID {
		t.Fatalf("incremental snapshot: hashed %d, new objects %d, parent %q", s2.Hashed, s2.NewObjects, s2.Parent)
	}
	// A missing object makes rollback fail clearly and change nothing. The
	// World no longer holds f05 either, so no capture can put it back.
	m, err := store.ReadManifest(e.manifestPath(s1.ID))
	if err != nil {
		t.Fatal(err)
	}
	ent := m.Lookup("f05")
	st, _ := e.store()
	if err := os.Remove(filepath.Join(merged, "f05")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(st.Path(ent.Object)); err != nil {
		t.Fatal(err)
	}
	before := overlaytest.Record(t, merged)
	_, err = e.Rollback(ctx, "w", s1.ID, RollbackOptions{})
	if err == nil || !strings.Contains(err.Error(), s1.ID) || !strings.Contains(err.Error(), "f05") {
		t.Fatalf("rollback with a missing object: %v (want an error naming %s and f05)", err, s1.ID)
	}
	if err := e.EnsureMounted(ctx, mustWorld(t, e, "w")); err != nil {
		t.Fatal(err)
	}
	if d := overlaytest.DiffTrees(before, overlaytest.Record(t, merged)); len(d) > 0 {
		t.Fatalf("a failed rollback changed the World:\n%s", strings.Join(d, "\n"))
	}
	// gc keeps every referenced object and drops unreferenced old ones.
	st.GCGrace = -1
	orphan, _, _, err := st.PutBytes([]byte("orphan"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.GC(ctx); err != nil {
		t.Fatal(err)
	}
	_ = orphan
}

func mustWorld(t *testing.T, e *Engine, name string) *World {
	w, err := e.World(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestSnapshotOpsSurviveKill9 kills a process taking a snapshot, rolling
// back or forking at random moments; the timeline never lists a half-made
// snapshot and the World stays usable.
func TestSnapshotOpsSurviveKill9(t *testing.T) {
	t.Parallel()
	if os.Getenv("STRATA_TEST_SNAPOP") != "" {
		t.Skip("child mode")
	}
	ctx := context.Background()
	e, src := testEngine(t)
	merged := mountedWorld(t, e, src, "w")
	rng := rand.New(rand.NewSource(3))
	randomOps(t, rng, merged, 40)
	for i := 0; i < 60; i++ {
		if err := os.WriteFile(filepath.Join(merged, fmt.Sprintf("big%02d", i)), []byte(strings.Repeat("y", 20000+i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base, err := e.Snapshot(ctx, "w", SnapshotOptions{Message: "base"})
	if err != nil {
		t.Fatal(err)
	}
	ops := []string{"snap", "rollback", "fork"}
	for i := 0; i < 30; i++ {
		op := ops[i%3]
		randomOps(t, rng, merged, 3)
		cmd := exec.Command(testExe(t), "-test.run", "^TestSnapshotChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "STRATA_TEST_SNAPOP="+op, "STRATA_TEST_ROOT="+e.Paths.Root, "STRATA_TEST_SNAP="+base.ID, "STRATA_TEST_FORK=f"+strconv.Itoa(i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Intn(25000)) * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		// Reopen like the next strata process would.
		e2, err := Open(ctx, Options{StateRoot: e.Paths.Root, Config: e.Config, Exe: testExe(t)})
		if err != nil {
			t.Fatal(err)
		}
		tl, err := e2.Timeline("w")
		if err != nil {
			t.Fatalf("after kill during %s: %v", op, err)
		}
		st, _ := e2.store()
		for _, s := range tl.Snapshots {
			m, err := store.ReadManifest(e2.manifestPath(s.ID))
			if err != nil {
				t.Fatalf("after kill during %s: timeline lists %s but: %v", op, s.ID, err)
			}
			for _, en := range m.Entries {
				if en.Object != "" && !st.Has(en.Object) {
					t.Fatalf("after kill during %s: snapshot %s lacks object for %s", op, s.ID, en.Path)
				}
			}
		}
		w := mustWorld(t, e2, "w")
		if err := e2.EnsureMounted(ctx, w); err != nil {
			t.Fatalf("after kill during %s: mount: %v", op, err)
		}
		if err := os.WriteFile(filepath.Join(merged, "usable"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatalf("after kill during %s: World not writable: %v", op, err)
		}
		if _, err := e2.Snapshot(ctx, "w", SnapshotOptions{}); err != nil {
			t.Fatalf("after kill during %s: snapshot: %v", op, err)
		}
		// A half-made fork is either complete or absent as a usable World.
		if fw, err := e2.World("f" + strconv.Itoa(i) + "-1"); err == nil {
			if err := e2.EnsureMounted(ctx, fw); err != nil {
				t.Fatalf("fork left after kill cannot mount: %v", err)
			}
		}
	}
}

// TestSnapshotChild is the child process of TestSnapshotOpsSurviveKill9.
func TestSnapshotChild(t *testing.T) {
	op := os.Getenv("STRATA_TEST_SNAPOP")
	if op == "" {
		t.Skip("run by TestSnapshotOpsSurviveKill9")
	}
	ctx := context.Background()
	e, err := Open(ctx, Options{StateRoot: os.Getenv("STRATA_TEST_ROOT"), Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	switch op {
	case "snap":
		_, err = e.Snapshot(ctx, "w", SnapshotOptions{Message: "child"})
	case "rollback":
		_, err = e.Rollback(ctx, "w", os.Getenv("STRATA_TEST_SNAP"), RollbackOptions{})
	case "fork":
		_, err = e.Fork(ctx, "w", ForkOptions{Snap: os.Getenv("STRATA_TEST_SNAP"), N: 2, Prefix: os.Getenv("STRATA_TEST_FORK")})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestGCKeepsBasesOfTrashedWorlds: a World in the trash can come back, so
// gc must keep the objects its apply bases point at.
func TestGCKeepsBasesOfTrashedWorlds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	merged := mountedWorld(t, e, src, "w")
	writeFile(t, filepath.Join(merged, "d0", "f0.txt"), "changed\n")
	w := mustWorld(t, e, "w")
	if _, err := e.CaptureBases(ctx, w, mustChanges(t, e, "w")); err != nil {
		t.Fatal(err)
	}
	rec, err := e.bases("w").Get("d0/f0.txt")
	if err != nil || rec == nil || rec.Object == "" {
		t.Fatalf("base: %+v %v", rec, err)
	}
	if _, err := e.Remove(ctx, "w", RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	st, _ := e.store()
	st.GCGrace = -1
	if _, err := e.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.Has(rec.Object) {
		t.Fatal("gc dropped the base object of a World in the trash")
	}
	if _, err := e.RestoreWorld(ctx, "w", ""); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.bases("w").Get("d0/f0.txt"); r == nil || !st.Has(r.Object) {
		t.Fatal("the restored World lost its base")
	}
}
