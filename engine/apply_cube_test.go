package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stratahq/strata/cube/cubetest"
)

// A cube World takes on a merge too: its sandbox sees the merged result
// afterwards, and applying everything again keeps the source's line.
func TestCubeApplyMergeStaysMerged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	base := lines(1, 20, func(i int) string { return fmt.Sprint("line ", i) })
	writeFile(t, filepath.Join(ce.src, "m.txt"), base)
	ce.create("w", CreateOptions{})
	ce.mustSh("w", "sed -i 's/^line 15$/world 15/' m.txt && echo other > other.txt")
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ce.src, "m.txt"), strings.Replace(base, "line 3\n", "person 3\n", 1))
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "m.txt"}}}); err != nil {
		t.Fatal(err)
	}
	both := strings.NewReplacer("line 3\n", "person 3\n", "line 15\n", "world 15\n").Replace(base)
	if got := readFile(t, filepath.Join(ce.src, "m.txt")); got != both {
		t.Fatalf("merge:\n%s", got)
	}
	if got := ce.mustSh("w", "cat m.txt"); got != both {
		t.Fatalf("the sandbox sees:\n%s\nwant the merged result", got)
	}
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(ce.src, "m.txt")); got != both {
		t.Fatalf("applying everything after the merge undid it:\n%s", got)
	}
}

// heldWriter holds held.txt open for writing, having written to it, and then
// touches ready.
const heldWriter = "exec 3>>held.txt; echo partial >&3; touch ready; exec sleep 600"

// A cube session holding a picked file open for writing in its sandbox makes
// apply refuse, naming it; nothing reaches the source. The writer outlives
// apply's retries by far: each pauses the sandbox's sessions and lists its
// open fds (on the fake, every process of the host), which on a loaded
// machine takes seconds, and a writer that has ended rightly lets apply on.
func TestCubeApplyRefusesFileOpenForWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeWorld(t, cubetest.Options{})
	meta, _ := ce.startSh(ctx, "w", heldWriter)
	ce.waitUpper("w", "ready")
	_, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}})
	if !errors.Is(err, ErrWorldWriting) || !strings.Contains(err.Error(), "session "+meta.ID+" is still writing held.txt") {
		ss, _ := ce.e.Sessions("w")
		t.Fatalf("apply of a file a cube session holds open for writing: %v (sessions: %+v)", err, ss)
	}
	if fileExists(filepath.Join(ce.src, "held.txt")) {
		t.Fatal("held.txt reached the source")
	}
	// The sandbox's other files are no obstacle.
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "ready"}}}); err != nil {
		t.Fatal(err)
	}
}

// A cube session whose command already holds a picked file open for writing
// in the sandbox, but whose start marker (its pid) has not reached the
// runner yet, is no "nobody writes": apply refuses, naming the session, and
// nothing reaches the source. The fake holds the command's output back, so
// the window stays open as long as the test needs.
func TestCubeApplyRefusesWhileSessionPIDUnknown(t *testing.T) {
	ctx := context.Background()
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	ce := newCubeEnv(t, cubetest.Options{HoldOutput: func(tag string) <-chan struct{} {
		if strings.HasPrefix(tag, "strata-") {
			return gate // the session's command, not strata's own guest scripts
		}
		return nil
	}})
	ce.create("w", CreateOptions{})
	type started struct {
		meta SessionMeta
		err  error
	}
	execDone := make(chan started, 1)
	go func() {
		meta, err := ce.e.Exec(ctx, "w", ExecOptions{Argv: []string{"sh", "-c", heldWriter}})
		execDone <- started{meta, err}
	}()
	var id string
	t.Cleanup(func() {
		open()
		if id != "" {
			_, _ = ce.e.Kill(context.Background(), "w", id, syscall.SIGKILL)
		}
	})
	ce.waitUpper("w", "ready")
	ss, err := ce.e.Sessions("w")
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions: %v %+v", err, ss)
	}
	id = ss[0].ID
	if ss[0].GuestPID != 0 {
		t.Fatalf("the fake let the pid through (%d): the test proves nothing", ss[0].GuestPID)
	}
	_, err = ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}})
	if !errors.Is(err, ErrWorldWriting) || !strings.Contains(err.Error(), "session "+id+" is still writing held.txt") {
		t.Fatalf("apply while a cube session's pid is not known yet: %v", err)
	}
	if fileExists(filepath.Join(ce.src, "held.txt")) {
		t.Fatal("held.txt reached the source while its writer was starting")
	}
	// Once the pid arrives, the check is the ordinary one.
	open()
	r := <-execDone
	if r.err != nil || r.meta.GuestPID <= 0 {
		t.Fatalf("exec: %v (pid %d)", r.err, r.meta.GuestPID)
	}
	_, err = ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}})
	if !errors.Is(err, ErrWorldWriting) {
		t.Fatalf("apply of a file a running cube session holds: %v", err)
	}
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "ready"}}}); err != nil {
		t.Fatal(err)
	}
	if fileExists(filepath.Join(ce.src, "held.txt")) {
		t.Fatal("held.txt reached the source")
	}
}

// A command in the sandbox that maps a picked file shared and writable, then
// closes its fd, still writes it through the mapping: apply refuses, as on
// the local runtime; nothing reaches the source.
func TestCubeApplyRefusesFileMappedForWriting(t *testing.T) {
	ctx := context.Background()
	ce := newCubeWorld(t, cubetest.Options{})
	// mmap(2) itself: Python's mmap module keeps a dup of the fd.
	script := `import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open("mapped.txt", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * 4096)
addr = libc.mmap(None, 4096, 3, 1, fd, 0)  # PROT_READ|PROT_WRITE, MAP_SHARED
if addr in (None, ctypes.c_void_p(-1).value):
    raise SystemExit("mmap failed")
os.close(fd)
ctypes.memmove(addr, b"half", 4)
open("ready", "w").close()
time.sleep(600)
`
	meta, _ := ce.start(ctx, "w", ExecOptions{Argv: []string{"/usr/bin/python3", "-c", script}})
	ce.waitUpper("w", "ready")
	_, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "mapped.txt"}}})
	if !errors.Is(err, ErrWorldWriting) || !strings.Contains(err.Error(), "session "+meta.ID+" is still writing mapped.txt") {
		t.Fatalf("apply of a file a cube session maps shared and writable: %v", err)
	}
	if fileExists(filepath.Join(ce.src, "mapped.txt")) {
		t.Fatal("mapped.txt reached the source")
	}
}

// A command's background child lives on in the sandbox after the command
// (and its session) ended, as under envd. Holding a picked file open for
// writing, it makes apply refuse, named as a process of the sandbox, though
// no session runs; nothing reaches the source. Once it is gone, apply goes
// on. (Apply asked the sandbox only while a session ran, and published the
// half-written file.)
func TestCubeApplyRefusesOrphanWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	ce.create("w", CreateOptions{})
	// setsid: out of the command's process group, as a daemon would be.
	ce.mustSh("w", `setsid sh -c 'exec 3>>held.txt; echo partial >&3; echo $$ > orphan.pid; exec sleep 600' </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do [ -s orphan.pid ] && break; sleep 0.1; done; test -s orphan.pid`)
	pid := strings.TrimSpace(ce.mustSh("w", "cat orphan.pid"))
	t.Cleanup(func() { ce.sh("w", "kill -9 "+pid) })
	ss, err := ce.e.Sessions("w")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.State == SessionRunning || s.State == SessionStarting {
			t.Fatalf("session %s still %s: the test needs none running", s.ID, s.State)
		}
	}
	_, err = ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}})
	if !errors.Is(err, ErrWorldWriting) || !strings.Contains(err.Error(), "a process (pid "+pid+" of the sandbox) is still writing held.txt") ||
		!strings.Contains(err.Error(), "(strata exec w -- kill "+pid+")") {
		t.Fatalf("apply of a file an orphaned process of the sandbox holds for writing: %v", err)
	}
	if fileExists(filepath.Join(ce.src, "held.txt")) {
		t.Fatal("held.txt reached the source while an orphan wrote it")
	}
	ce.mustSh("w", "kill -9 "+pid+"; while kill -0 "+pid+" 2>/dev/null; do sleep 0.05; done")
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}}); err != nil {
		t.Fatalf("apply once the orphan is gone: %v", err)
	}
	if got := readFile(t, filepath.Join(ce.src, "held.txt")); got != "partial\n" {
		t.Fatalf("source held.txt = %q", got)
	}
}
