package engine

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/cgroup"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
	"github.com/stratahq/strata/overlay/store"
)

// The snapshot crash harness re-executes the test binary as a child that
// runs one snapshot operation (snap, rollback, fork, restore, apply) on a
// tiny state root and is SIGKILLed: by itself at the K-th killPoint, or by
// the parent after a random delay. The parent then does what the next
// strata process would (Open, Worlds as `strata ls` does, then the World's
// next operation) and checks that nothing was lost or half-made.
const (
	crashOpEnv   = "STRATA_CRASH_OP"
	crashRootEnv = "STRATA_CRASH_ROOT"
	crashAtEnv   = "STRATA_CRASH_AT"
	crashSnapEnv = "STRATA_CRASH_SNAP"
)

var crashOps = []string{"snap", "rollback", "fork", "restore", "apply"}

// runCrashOp is the operation under test, the same in the child and in the
// parent's calibration run.
func runCrashOp(ctx context.Context, e *Engine, op, snap string) error {
	var err error
	switch op {
	case "snap":
		_, err = e.Snapshot(ctx, "w", SnapshotOptions{Message: "crash"})
	case "rollback":
		_, err = e.Rollback(ctx, "w", snap, RollbackOptions{Kill: true})
	case "fork":
		_, err = e.Fork(ctx, "w", ForkOptions{Snap: snap, N: 3, Prefix: "f"})
	case "restore":
		err = e.RestorePaths(ctx, "w", snap, []string{"d0/f0.txt"})
	case "apply":
		_, err = e.Apply(ctx, "w", ApplyOptions{})
	default:
		err = fmt.Errorf("unknown op %q", op)
	}
	return err
}

// killAtCrashPoint makes a crash harness's child SIGKILL itself at the
// crashAtEnv'th crash point it reaches (none when unset).
func killAtCrashPoint() {
	k, _ := strconv.Atoi(os.Getenv(crashAtEnv))
	if k <= 0 {
		return
	}
	var mu sync.Mutex
	n := 0
	crashHook = func(string) {
		mu.Lock()
		n++
		hit := n == k
		mu.Unlock()
		if hit {
			_ = unix.Kill(os.Getpid(), unix.SIGKILL)
			select {}
		}
	}
}

// TestSnapshotCrashChild is not a test: it is the harness's child.
func TestSnapshotCrashChild(t *testing.T) {
	op := os.Getenv(crashOpEnv)
	if op == "" {
		t.Skip("run by TestSnapshotCrashSIGKILL")
	}
	killAtCrashPoint()
	ctx := context.Background()
	e, err := Open(ctx, Options{StateRoot: os.Getenv(crashRootEnv), Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Stdout.Write([]byte{'R'})
	if err := runCrashOp(ctx, e, op, os.Getenv(crashSnapEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// crashWorld is one run's state root: World "w" over a tiny source, with a
// snapshot s1 and live changes made since.
type crashWorld struct {
	e      *Engine
	src    string
	s1     string
	before string // upper signature before the operation
	source string // source signature before
}

func crashSetup(t *testing.T, base string, session bool) *crashWorld {
	t.Helper()
	ctx := context.Background()
	src := filepath.Join(base, "src")
	for d := range 3 {
		for f := range 4 {
			writeFile(t, filepath.Join(src, fmt.Sprintf("d%d/f%d.txt", d, f)), fmt.Sprintf("source d%d f%d\n", d, f))
		}
	}
	e, err := Open(ctx, Options{StateRoot: filepath.Join(base, "home"), Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ents, _ := os.ReadDir(e.Paths.Worlds())
		for _, d := range ents {
			if d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
				killAllSessions(e, d.Name())
				_ = mount.ForceUnmount(e.Paths.Merged(d.Name()))
			}
		}
	})
	if _, err := e.Create(ctx, CreateOptions{Name: "w", Source: src, MountBackend: overlay.BackendKernel}); err != nil {
		t.Fatal(err)
	}
	up := e.Paths.Upper("w")
	writeFile(t, filepath.Join(up, "d0/f0.txt"), "snapshotted edit\n")
	writeFile(t, filepath.Join(up, "new/a.txt"), "new in s1\n")
	if err := os.MkdirAll(filepath.Join(up, "d1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(up, "d1/f1.txt"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	s1, err := e.Snapshot(ctx, "w", SnapshotOptions{Message: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(up, "d0/f0.txt"), "live edit, after s1\n")
	writeFile(t, filepath.Join(up, "new/b.txt"), "new after s1\n")
	writeFile(t, filepath.Join(up, "d2/f2.txt"), "edited after s1\n")
	if err := os.Remove(filepath.Join(up, "new/a.txt")); err != nil {
		t.Fatal(err)
	}
	if session {
		// A running session, so the snapshot freezes the World.
		if _, err := e.Exec(ctx, "w", ExecOptions{Argv: []string{"sleep", "60"}}); err != nil {
			t.Fatal(err)
		}
	}
	cw := &crashWorld{e: e, src: src, s1: s1.ID}
	cw.before = upperSignature(t, e.Paths.Upper("w"))
	cw.source = sourceSignature(t, src)
	return cw
}

func killAllSessions(e *Engine, name string) {
	ss, _ := ListSessions(e.Paths.World(name))
	for _, s := range ss {
		_ = KillSession(e.SessionDir(name, s.ID), syscall.SIGKILL)
	}
}

// upperSignature describes an upper layer's content and metadata, without
// times (a restore sets them, a capture's stat cache does not care).
func upperSignature(t *testing.T, upper string) string {
	t.Helper()
	// A scratch store next to the upper (tmpfs in the harness), fsyncing
	// nothing that matters.
	st, err := store.OpenStore(filepath.Join(filepath.Dir(upper), "sig-objects"))
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := store.CaptureUpper(context.Background(), st, upper, overlay.DialectKernel, nil)
	if err != nil {
		t.Fatalf("capture %s: %v", upper, err)
	}
	return manifestSignature(m)
}

func manifestSignature(m *store.Manifest) string {
	var b strings.Builder
	for _, en := range m.Entries {
		fmt.Fprintf(&b, "%s %v %o %d:%d %s %q %v\n", en.Path, en.Kind, en.Mode, en.UID, en.GID, en.Object, en.Target, en.Opaque)
	}
	return b.String()
}

// sourceSignature describes a source tree: paths, modes, contents.
func sourceSignature(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, info.Mode())
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += " " + hex.EncodeToString(sum[:8])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// crashRunChild runs the child; killAfter > 0 SIGKILLs it that long after
// it is ready. It reports whether the child died of SIGKILL.
func crashRunChild(t *testing.T, cw *crashWorld, op string, killAt int, killAfter time.Duration) bool {
	t.Helper()
	cmd := exec.Command(testExe(t), "-test.run=^TestSnapshotCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashOpEnv+"="+op, crashRootEnv+"="+cw.e.Paths.Root,
		crashAtEnv+"="+strconv.Itoa(killAt), crashSnapEnv+"="+cw.s1)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, err := bufio.NewReader(stdout).ReadByte()
	if err == nil && ready == 'R' && killAfter > 0 {
		time.Sleep(killAfter)
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	err = cmd.Wait()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
		t.Fatalf("child %s: %v: %s", op, err, stderr.String())
	}
	if err != nil {
		t.Fatalf("child %s: %v", op, err)
	}
	return false
}

// crashExpect is what an operation's "after" state is, learnt from one
// uninterrupted in-process run: the upper and source signatures, and how
// many kill points it passes.
type crashExpect struct {
	upper, source string
	points        int
	duration      time.Duration
}

func crashCalibrate(t *testing.T, op string, session bool) crashExpect {
	t.Helper()
	cw := crashSetup(t, crashScratch(t), session)
	var mu sync.Mutex
	n := 0
	crashHook = func(string) { mu.Lock(); n++; mu.Unlock() }
	start := time.Now()
	err := runCrashOp(context.Background(), cw.e, op, cw.s1)
	d := time.Since(start)
	crashHook = nil
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return crashExpect{upper: upperSignature(t, cw.e.Paths.Upper("w")), source: sourceSignature(t, cw.src), points: n, duration: d}
}

// crashScratch is a fresh directory, on tmpfs when there is one (see
// crashScratchDir in the overlay package's harness: a SIGKILL loses no page
// cache, so only the order of operations is under test, fast).
func crashScratch(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "strata-snapcrash-"); err == nil {
			t.Cleanup(func() { _ = removeAllForce(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// TestSnapshotCrashSIGKILL kills snap, rollback, fork (of 3), restore and
// apply at every kill point and at random moments, at least 100 times each;
// after each kill the next strata finds: no half-made snapshot in the
// timeline, the World unfrozen and usable (a snapshot, and now and then an
// exec, succeed), its upper exactly the state before or after, the source
// all-old or all-new, a fork's Worlds all there (complete) or none, and no
// staging directory or fork record left.
func TestSnapshotCrashSIGKILL(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the crash harness mounts kernel overlays: run as root")
	}
	if os.Getenv(crashOpEnv) != "" {
		t.Skip("child")
	}
	runs := 100
	if testing.Short() {
		runs = 20
	}
	started := time.Now()
	for _, op := range crashOps {
		t.Run(op, func(t *testing.T) {
			want := crashCalibrate(t, op, false)
			wantSession := want
			if op == "snap" {
				wantSession = crashCalibrate(t, op, true)
			}
			t.Logf("%s: %d kill points, %v in process", op, want.points, want.duration.Round(time.Microsecond))
			rng := rand.New(rand.NewPCG(uint64(len(op)), 7))
			var mu sync.Mutex
			count := map[string]int{}
			for i := range runs {
				want := want
				if crashWithSession(op, i) {
					want = wantSession
				}
				killAt, killAfter := 0, time.Duration(0)
				if i%2 == 0 && want.points > 0 {
					killAt = 1 + (i/2)%want.points
				} else {
					// Child start-up (Open) is outside the window: the
					// delay starts when the child is about to run op.
					killAfter = time.Duration(1 + rng.Int64N(int64(2*want.duration+time.Millisecond)))
				}
				t.Run(fmt.Sprintf("%03d", i), func(t *testing.T) {
					t.Parallel()
					got := crashOneRun(t, op, i, killAt, killAfter, want)
					mu.Lock()
					count[got]++
					mu.Unlock()
				})
			}
			t.Cleanup(func() {
				t.Logf("%s: %d runs: %v", op, runs, count)
				if want.points > 0 && (count["before"] == 0 || count["after"] == 0) {
					t.Errorf("%s: kills never landed on both sides of its commit point: %v", op, count)
				}
			})
		})
	}
	t.Logf("harness: %v", time.Since(started).Round(time.Millisecond))
}

// crashOneRun does one kill and checks what the next strata finds; it
// returns "before", "after" or "not killed".
func crashOneRun(t *testing.T, op string, i, killAt int, killAfter time.Duration, want crashExpect) string {
	ctx := context.Background()
	session := crashWithSession(op, i)
	cw := crashSetup(t, crashScratch(t), session)
	killed := crashRunChild(t, cw, op, killAt, killAfter)
	if !killed && killAt > 0 {
		t.Fatalf("child not killed at point %d", killAt)
	}
	// The next strata process.
	e2, err := Open(ctx, Options{StateRoot: cw.e.Paths.Root, Config: cw.e.Config, Exe: testExe(t)})
	if err != nil {
		t.Fatalf("open after kill: %v", err)
	}
	ws, err := e2.Worlds()
	if err != nil {
		t.Fatalf("ls after kill: %v", err)
	}
	if _, err := os.Stat(e2.frozenMarker("w")); err == nil {
		t.Fatal("ls left the World frozen")
	}
	if session {
		for _, pid := range e2.worldPIDs(mustWorld(t, e2, "w")) {
			if state := procState(pid); state == "T" {
				t.Fatalf("session process %d still stopped after ls", pid)
			}
		}
		if cg := cgroup.WorldDir(mustWorld(t, e2, "w")); cg != "" {
			ents, _ := os.ReadDir(cg)
			for _, d := range ents {
				if data, err := os.ReadFile(filepath.Join(cg, d.Name(), "cgroup.freeze")); err == nil && strings.TrimSpace(string(data)) == "1" {
					t.Fatalf("session cgroup %s still frozen after ls", d.Name())
				}
			}
		}
	}
	// Nothing half-made is left in worlds/.
	ents, _ := os.ReadDir(e2.Paths.Worlds())
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), stagingPrefix) || strings.HasPrefix(d.Name(), forkRecordPrefix) {
			t.Fatalf("left in worlds/ after the next strata: %s", d.Name())
		}
	}
	// Every snapshot the timeline lists is whole.
	st, _ := e2.store()
	tl, err := e2.Timeline("w")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tl.Snapshots {
		m, err := store.ReadManifest(e2.manifestPath(s.ID))
		if err != nil {
			t.Fatalf("timeline lists %s but: %v", s.ID, err)
		}
		for _, en := range m.Entries {
			if en.Kind == store.EntryFile {
				if err := st.Verify(en.Object); err != nil {
					t.Fatalf("snapshot %s: %s: %v", s.ID, en.Path, err)
				}
			}
		}
	}
	// The upper is the state before or after; so is the source.
	result := "before"
	up := upperSignature(t, e2.Paths.Upper("w"))
	switch up {
	case cw.before:
	case want.upper:
		result = "after"
	default:
		t.Fatalf("upper is neither before nor after:\n%s\nbefore:\n%s\nafter:\n%s", up, cw.before, want.upper)
	}
	srcSig := sourceSignature(t, cw.src)
	switch srcSig {
	case cw.source:
	case want.source:
		result = "after"
	default:
		t.Fatalf("source is neither all-old nor all-new:\n%s", srcSig)
	}
	if op == "snap" && len(tl.Snapshots) == 2 {
		result = "after"
	}
	if op == "fork" {
		var forks []*World
		for _, w := range ws {
			if strings.HasPrefix(w.Name, "f-") {
				forks = append(forks, w)
			}
		}
		if len(forks) != 0 && len(forks) != 3 {
			t.Fatalf("%d of 3 forks exist after the kill", len(forks))
		}
		m1, err := store.ReadManifest(e2.manifestPath(cw.s1))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range forks {
			if got := upperSignature(t, e2.Paths.Upper(f.Name)); got != manifestSignature(m1) {
				t.Fatalf("fork %s is not complete:\n%s", f.Name, got)
			}
			ftl, err := e2.Timeline(f.Name)
			if err != nil || ftl.ForkedFrom == nil || ftl.ForkedFrom.Snapshot != cw.s1 {
				t.Fatalf("fork %s timeline: %+v %v", f.Name, ftl, err)
			}
			result = "after"
		}
	}
	// The World is usable: a snapshot now, and now and then a command.
	if _, err := e2.Snapshot(ctx, "w", SnapshotOptions{}); err != nil {
		t.Fatalf("snapshot after kill: %v", err)
	}
	if i%10 == 1 {
		meta, err := e2.Exec(ctx, "w", ExecOptions{Argv: []string{"cat", "d0/f0.txt"}})
		if err != nil {
			t.Fatalf("exec after kill: %v", err)
		}
		if meta, err = WaitSession(ctx, e2.SessionDir("w", meta.ID)); err != nil || meta.ExitCode != 0 {
			t.Fatalf("exec after kill: %+v %v", meta, err)
		}
	}
	if !killed {
		return "not killed"
	}
	return result
}

// crashWithSession: every fourth snap run has a running session, so the
// snapshot freezes the World and a kill can leave it frozen.
func crashWithSession(op string, i int) bool { return op == "snap" && i%4 == 0 }

func procState(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+3 > len(data) {
		return ""
	}
	return string(data[i+2 : i+3])
}
