package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// plantFD opens a host directory on fd 7 without close-on-exec, the way a
// caller of `strata exec` can (closed at the test's end).
func plantFD(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/host-secret", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fd != 7 {
		if err := unix.Dup3(fd, 7, 0); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	}
	t.Cleanup(func() { unix.Close(7) })
}

// childSees lists what a command started now finds through /proc/self/fd/7.
func childSees(t *testing.T) string {
	t.Helper()
	out, _ := exec.Command("/bin/sh", "-c", "ls /proc/self/fd/7/ 2>&1").CombinedOutput()
	return string(out)
}

func testCloseOnExec(t *testing.T) {
	plantFD(t)
	// The attack works without the call: the child lists the host dir.
	if got := childSees(t); !strings.Contains(got, "host-secret") {
		t.Fatalf("precondition: the child does not inherit fd 7 (%q)", got)
	}
	if fds, _ := InheritableFDs(3); !slices.Contains(fds, 7) {
		t.Fatalf("InheritableFDs = %v, want 7 listed", fds)
	}
	if err := CloseOnExecFrom(3); err != nil {
		t.Fatal(err)
	}
	if got := childSees(t); strings.Contains(got, "host-secret") {
		t.Fatalf("after CloseOnExecFrom the child still lists the host dir through fd 7: %q", got)
	}
	if fds, err := InheritableFDs(3); err != nil || len(fds) != 0 {
		t.Fatalf("InheritableFDs after = %v, %v; want none", fds, err)
	}
	// The parent keeps its fd: only the exec loses it.
	if _, err := unix.FcntlInt(7, unix.F_GETFD, 0); err != nil {
		t.Fatalf("fd 7 closed in the caller: %v", err)
	}
}

func TestCloseOnExecFrom(t *testing.T) { testCloseOnExec(t) }

// On a kernel without close_range (or its CLOEXEC flag), /proc/self/fd.
func TestCloseOnExecFromFallback(t *testing.T) {
	old := closeRange
	closeRange = func(uint, uint, uint) error { return unix.ENOSYS }
	t.Cleanup(func() { closeRange = old })
	testCloseOnExec(t)
}
