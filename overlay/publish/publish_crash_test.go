package publish

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay/overlaytest"

	"golang.org/x/sys/unix"
)

// The crash harness re-executes the test binary as a child that runs a real
// publication (or recovery) and is SIGKILLed: by itself at step K through
// publishHook, or by the parent after a random delay.
const (
	crashChildEnv  = "STRATA_PUBLISH_CHILD"
	crashRootEnv   = "STRATA_PUB_ROOT"
	crashJrnlEnv   = "STRATA_PUB_JOURNAL"
	crashKillEnv   = "STRATA_PUB_KILL_AT"
	crashModeEnv   = "STRATA_PUB_MODE"
	crashDirCount  = 40
	crashReadyByte = 'R'
)

// crashTemplate is the tree a crash publication starts from: small files in
// many directories, symlinks, directories to empty and type changes.
func crashTemplate() map[string]string {
	tree := map[string]string{}
	for d := range crashDirCount {
		dir := fmt.Sprintf("d%02d", d)
		for f := range 30 {
			tree[fmt.Sprintf("%s/f%03d", dir, f)] = fmt.Sprintf("old %s f%03d", dir, f)
		}
		tree[dir+"/l0"] = "-> f000"
	}
	for i := range 5 {
		for j := range 4 {
			tree[fmt.Sprintf("r%d/a%d", i, j)] = "doomed"
		}
		tree[fmt.Sprintf("t%d", i)] = "file becoming a dir"
		tree[fmt.Sprintf("u%d/a", i)] = "a"
		tree[fmt.Sprintf("u%d/b", i)] = "b"
		tree[fmt.Sprintf("v%d/c", i)] = "c"
	}
	return tree
}

// crashOps is the 2,035-op publication: overwrites (some checked against
// their base), deletes, new files in existing and new nested directories,
// empty new directories, new and replaced symlinks, emptied directories
// removed, file->dir, dir->file and dir->symlink changes.
func crashOps() []PublishOp {
	var ops []PublishOp
	for d := range crashDirCount {
		dir := fmt.Sprintf("d%02d", d)
		for f := range 15 {
			p := fmt.Sprintf("%s/f%03d", dir, f)
			op := PublishOp{Path: p, Kind: OpWrite, Data: []byte("new " + p)}
			if f%2 == 0 {
				op.ExpectHash = sha256Hex(fmt.Appendf(nil, "old %s f%03d", dir, f))
			} else {
				op.Mode = 0o600
			}
			ops = append(ops, op)
		}
		for f := 25; f < 30; f++ {
			ops = append(ops, PublishOp{Path: fmt.Sprintf("%s/f%03d", dir, f), Kind: OpDelete})
		}
		for n := range 11 {
			ops = append(ops, PublishOp{Path: fmt.Sprintf("%s/n%02d", dir, n), Kind: OpWrite, Data: []byte("n"), ExpectAbsent: true})
		}
		for g := range 15 {
			ops = append(ops, PublishOp{Path: fmt.Sprintf("%s/new/sub/g%02d", dir, g), Kind: OpWrite, Data: []byte("g")})
		}
		ops = append(ops,
			PublishOp{Path: dir + "/empty", Kind: OpMkdir, Mode: 0o700},
			PublishOp{Path: dir + "/s0", Kind: OpSymlink, Target: "f001"},
			PublishOp{Path: dir + "/l0", Kind: OpSymlink, Target: "f002"},
		)
	}
	for i := range 5 {
		for j := range 4 {
			ops = append(ops, PublishOp{Path: fmt.Sprintf("r%d/a%d", i, j), Kind: OpDelete})
		}
		ops = append(ops,
			PublishOp{Path: fmt.Sprintf("r%d", i), Kind: OpRmdir},
			PublishOp{Path: fmt.Sprintf("t%d", i), Kind: OpDelete},
			PublishOp{Path: fmt.Sprintf("t%d", i), Kind: OpMkdir, Mode: 0o750},
			PublishOp{Path: fmt.Sprintf("t%d/x", i), Kind: OpWrite, Data: []byte("x")},
			PublishOp{Path: fmt.Sprintf("u%d/a", i), Kind: OpDelete},
			PublishOp{Path: fmt.Sprintf("u%d/b", i), Kind: OpDelete},
			PublishOp{Path: fmt.Sprintf("u%d", i), Kind: OpRmdir},
			PublishOp{Path: fmt.Sprintf("u%d", i), Kind: OpWrite, Data: []byte("dir became a file")},
			PublishOp{Path: fmt.Sprintf("v%d/c", i), Kind: OpDelete},
			PublishOp{Path: fmt.Sprintf("v%d", i), Kind: OpRmdir},
			PublishOp{Path: fmt.Sprintf("v%d", i), Kind: OpSymlink, Target: fmt.Sprintf("d%02d", i)},
		)
	}
	return ops
}

// TestPublishCrashChildProcess is not a test: it is the crash harness's
// child, doing nothing unless the parent set crashChildEnv. (A TestMain would
// clash with other test files of this package.)
func TestPublishCrashChildProcess(t *testing.T) {
	if os.Getenv(crashChildEnv) != "1" {
		return
	}
	if k, _ := strconv.Atoi(os.Getenv(crashKillEnv)); k > 0 {
		publishHook = func(step int) {
			if step == k {
				_ = unix.Kill(os.Getpid(), unix.SIGKILL)
				select {} // the signal is on its way
			}
		}
	}
	root, journal := os.Getenv(crashRootEnv), os.Getenv(crashJrnlEnv)
	os.Stdout.Write([]byte{crashReadyByte})
	var err error
	switch os.Getenv(crashModeEnv) {
	case "publish":
		_, err = Publish(context.Background(), root, journal, crashOps(), PublishOptions{})
	case "recover":
		_, err = Recover(context.Background(), journal, []string{root})
	default:
		err = errors.New("unknown mode")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// crashScratchDir is a fresh directory on tmpfs when /dev/shm exists: a
// SIGKILL loses no page cache, so the filesystem's durability plays no part
// in what this harness proves, while a shared, busy disk would make its
// thousands of file creations take minutes. (Durability ordering is the
// fsync discipline in publish.go, not something a kill can test.)
func crashScratchDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "strata-crash-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// crashChild starts the child; killAfter > 0 SIGKILLs it that long after it
// is ready. It reports whether the child died of SIGKILL.
func crashChild(t *testing.T, mode, root, journal string, killAt int, killAfter time.Duration) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPublishCrashChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashRootEnv+"="+root, crashJrnlEnv+"="+journal,
		crashKillEnv+"="+strconv.Itoa(killAt), crashModeEnv+"="+mode)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, err := bufio.NewReader(stdout).ReadByte()
	if err == nil && ready == crashReadyByte && killAfter > 0 {
		time.Sleep(killAfter)
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
		t.Fatalf("child %s: %v: %s", mode, err, stderr.String())
	}
	if err != nil {
		t.Fatalf("child %s: %v", mode, err)
	}
	return false
}

// TestPublishCrashSIGKILL is the headline proof: a 2,035-op publication is
// SIGKILLed at over 100 points spread over all its steps and at random
// moments; some recoveries are SIGKILLed too. After recovery the tree is
// always exactly all-old or all-new.
func TestPublishCrashSIGKILL(t *testing.T) {
	ctx := context.Background()
	base := crashScratchDir(t)
	template := crashTemplate()
	ops := crashOps()
	if len(ops) < 2000 {
		t.Fatalf("only %d ops", len(ops))
	}
	oldRoot := filepath.Join(base, "old")
	overlaytest.WriteTree(t, oldRoot, template)
	oldHash := pubTreeHash(t, oldRoot)

	newRoot := filepath.Join(base, "new")
	overlaytest.WriteTree(t, newRoot, template)
	var maxStep atomic.Int64
	publishHook = func(step int) { maxStep.Store(max(maxStep.Load(), int64(step))) }
	start := time.Now()
	_, err := Publish(ctx, newRoot, filepath.Join(base, "new-journal"), ops, PublishOptions{})
	publishHook = nil
	total := int(maxStep.Load())
	if err != nil {
		t.Fatal(err)
	}
	pubDuration := time.Since(start)
	newHash := pubTreeHash(t, newRoot)
	newState := pubTreeState(t, newRoot)
	t.Logf("%d ops, %d steps, in-process publication %v", len(ops), total, pubDuration)

	type point struct {
		killAt    int
		killAfter time.Duration
		recoverAt int // > 0: SIGKILL the first recovery at this step
	}
	var points []point
	stepPoints, timePoints := 100, 12
	if testing.Short() {
		stepPoints, timePoints = 20, 5
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range stepPoints {
		k := 1 + i*(total-1)/(stepPoints-1)
		pt := point{killAt: k}
		if i%5 == 0 {
			// A recovery has about half a publication's steps (one per temp or journal step).
			pt.recoverAt = 1 + rng.IntN(total/2)
		}
		points = append(points, pt)
	}
	for range timePoints {
		points = append(points, point{killAfter: time.Duration(1 + rng.Int64N(int64(pubDuration)))})
	}

	started := time.Now()
	outcomes := make([]string, len(points))
	var recoveriesKilled atomic.Int64
	t.Run("points", func(t *testing.T) {
		for i, pt := range points {
			name := fmt.Sprintf("step=%d", pt.killAt)
			if pt.killAfter > 0 {
				name = fmt.Sprintf("after=%v", pt.killAfter.Round(time.Millisecond))
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dir := crashScratchDir(t)
				root, journal := filepath.Join(dir, "root"), filepath.Join(dir, "journal")
				overlaytest.WriteTree(t, root, template)
				killed := crashChild(t, "publish", root, journal, pt.killAt, pt.killAfter)
				if !killed && pt.killAfter == 0 {
					t.Fatalf("child not killed at step %d", pt.killAt)
				}
				if pt.recoverAt > 0 && crashChild(t, "recover", root, journal, pt.recoverAt, 0) {
					recoveriesKilled.Add(1)
				}
				if _, err := Recover(ctx, journal, []string{root}); err != nil {
					t.Fatalf("recover: %v", err)
				}
				state := pubTreeState(t, root)
				switch pubStateHash(state) {
				case oldHash:
					outcomes[i] = "old"
				case newHash:
					outcomes[i] = "new"
				default:
					t.Fatalf("tree is neither all-old nor all-new:\n%s", pubDiffStates(newState, state))
				}
				pubAssertCleanState(t, state, journal)
			})
		}
	})
	count := map[string]int{}
	for _, o := range outcomes {
		count[o]++
	}
	t.Logf("%d kill points (%d by step, %d by time; %d recoveries killed too) in %v: %v",
		len(points), stepPoints, timePoints, recoveriesKilled.Load(), time.Since(started).Round(time.Millisecond), count)
	if count["old"] == 0 || count["new"] == 0 || recoveriesKilled.Load() == 0 {
		t.Errorf("kills never landed on both sides of the commit, or never in a recovery: %v", count)
	}
}
