package engine

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
