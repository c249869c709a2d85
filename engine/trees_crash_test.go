package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
)

// The cross-tree apply crash harness: a child applies a World with two
// overlay trees and is SIGKILLed, by itself at each killPoint or by the
// parent after a random delay. The next strata (Open recovers journals)
// must find each tree's source wholly published or untouched, the source
// published before the game tree (the order), and a second apply must
// finish the job.
const treesCrashRootEnv = "STRATA_TREES_CRASH_ROOT"

// TestTreesApplyCrashChild is not a test: it is the harness's child.
func TestTreesApplyCrashChild(t *testing.T) {
	root := os.Getenv(treesCrashRootEnv)
	if root == "" {
		t.Skip("run by TestTreesApplyCrashSIGKILL")
	}
	killAtCrashPoint()
	ctx := context.Background()
	e, err := Open(ctx, Options{StateRoot: root, Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Stdout.Write([]byte{'R'})
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

type treesCrashWorld struct {
	e              *Engine
	src, game      string
	srcOld, gamOld string
}

func treesCrashSetup(t *testing.T) *treesCrashWorld {
	t.Helper()
	ctx := context.Background()
	base := crashScratch(t)
	cw := &treesCrashWorld{src: filepath.Join(base, "src"), game: filepath.Join(base, "game")}
	for d := range 3 {
		for f := range 3 {
			writeFile(t, filepath.Join(cw.src, fmt.Sprintf("d%d/f%d.txt", d, f)), fmt.Sprintf("source d%d f%d\n", d, f))
			writeFile(t, filepath.Join(cw.game, fmt.Sprintf("g%d/f%d.txt", d, f)), fmt.Sprintf("game g%d f%d\n", d, f))
		}
	}
	e, err := Open(ctx, Options{StateRoot: filepath.Join(base, "home"), Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	cw.e = e
	t.Cleanup(func() {
		_ = mount.ForceUnmount(e.Paths.Merged("w"))
		_ = mount.ForceUnmount(filepath.Join(e.Paths.Tree("w", "game"), "merged"))
	})
	w, err := e.Create(ctx, CreateOptions{Name: "w", Source: cw.src, MountBackend: overlay.BackendKernel, Trees: []Tree{{Name: "game", Path: cw.game, Mode: TreeOverlay}}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := w.TreeView("game")
	for i := range 3 {
		writeFile(t, filepath.Join(e.Paths.Upper("w"), fmt.Sprintf("d%d/f0.txt", i)), "world edit\n")
		writeFile(t, filepath.Join(e.Paths.UpperOf(v), fmt.Sprintf("g%d/f1.txt", i)), "world edit\n")
	}
	writeFile(t, filepath.Join(e.Paths.UpperOf(v), "new/a.txt"), "new\n")
	cw.srcOld, cw.gamOld = sourceSignature(t, cw.src), sourceSignature(t, cw.game)
	return cw
}

func TestTreesApplyCrashSIGKILL(t *testing.T) {
	requireRoot(t)
	// Calibrate: the finished state and the number of kill points.
	cal := treesCrashSetup(t)
	var mu sync.Mutex
	points := 0
	crashHook = func(string) { mu.Lock(); points++; mu.Unlock() }
	start := time.Now()
	_, err := cal.e.Apply(context.Background(), "w", ApplyOptions{})
	dur := time.Since(start)
	crashHook = nil
	if err != nil {
		t.Fatal(err)
	}
	srcNew, gamNew := sourceSignature(t, cal.src), sourceSignature(t, cal.game)
	if points < 2 || srcNew == cal.srcOld || gamNew == cal.gamOld {
		t.Fatalf("calibration: %d kill points, source changed %v, game changed %v", points, srcNew != cal.srcOld, gamNew != cal.gamOld)
	}
	runs := []struct {
		at    int
		after time.Duration
	}{}
	for k := 1; k <= points; k++ {
		runs = append(runs, struct {
			at    int
			after time.Duration
		}{k, 0})
	}
	for range 8 {
		runs = append(runs, struct {
			at    int
			after time.Duration
		}{0, time.Duration(rand.Int64N(int64(dur)*2 + 1))})
	}
	for i, r := range runs {
		t.Run(fmt.Sprintf("%d-at%d-after%s", i, r.at, r.after.Round(time.Microsecond)), func(t *testing.T) {
			cw := treesCrashSetup(t)
			cmd := exec.Command(testExe(t), "-test.run=^TestTreesApplyCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), treesCrashRootEnv+"="+cw.e.Paths.Root, crashAtEnv+"="+strconv.Itoa(r.at))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if ready, err := bufio.NewReader(stdout).ReadByte(); err == nil && ready == 'R' && r.after > 0 {
				time.Sleep(r.after)
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			err = cmd.Wait()
			if exit, ok := errors.AsType[*exec.ExitError](err); ok {
				if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
					t.Fatalf("child: %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			// The next strata: recovery, then each tree whole or untouched.
			e, err := Open(context.Background(), Options{StateRoot: cw.e.Paths.Root, Config: (&Config{}).withDefaults(), Exe: testExe(t)})
			if err != nil {
				t.Fatal(err)
			}
			src, game := sourceSignature(t, cw.src), sourceSignature(t, cw.game)
			if src != cw.srcOld && src != srcNew {
				t.Fatalf("the source is half published:\n%s", src)
			}
			if game != cw.gamOld && game != gamNew {
				t.Fatalf("the game tree is half published:\n%s", game)
			}
			if game == gamNew && src != srcNew {
				t.Fatal("the game tree was published before the source")
			}
			// Applying again publishes what is missing.
			if src != srcNew || game != gamNew {
				if _, err := e.Apply(context.Background(), "w", ApplyOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if sourceSignature(t, cw.src) != srcNew || sourceSignature(t, cw.game) != gamNew {
				t.Fatal("apply after the crash did not finish both trees")
			}
		})
	}
}

// A publication interrupted in an extra tree is recovered by the next
// strata like one in the source: the tree's directory is one of the roots
// a journal may be replayed into. It was not, so a crash while the game
// tree was being published left its staged files there until doctor
// --repair (which refused the journal too: "no World uses it"). Read-only
// and shared trees are never published, so never a root.
func TestTreesAreRecoveryRoots(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	multiTreeWorld(t, e, src, trees, "ue")
	roots := e.sourceRoots()
	for _, want := range []string{src, trees["game"]} {
		if !slices.Contains(roots, want) {
			t.Errorf("recovery roots %v lack %s", roots, want)
		}
	}
	for _, not := range []string{trees["tools"], trees["ddc"]} {
		if slices.Contains(roots, not) {
			t.Errorf("recovery roots %v hold %s, which is never published", roots, not)
		}
	}
}
