package overlaytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// LoopFS makes a 400 MiB file system image of the given kind (mkfs.KIND
// with mkfsArgs) in a temp dir, mounts it by a loop device and returns the
// mount point, unmounted at cleanup. It skips only when not root, or when
// the mkfs tool or loop devices are missing.
func LoopFS(t testing.TB, kind string, mkfsArgs ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop mounts need root")
	}
	tool := "mkfs." + kind
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("%s is not installed (make deps installs xfsprogs and btrfs-progs): %v", tool, err)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices: %v", err)
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, kind+".img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(400 << 20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, mkfsArgs...), img)
	if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", tool, args, err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "loop device") {
			t.Skipf("cannot set up a loop device: %s", out)
		}
		t.Fatalf("mount %s: %v: %s", img, err, out)
	}
	t.Cleanup(func() { unmountLoop(t, mnt) })
	return mnt
}

// unmountLoop unmounts mnt, waiting up to 10 s while it is busy (a fuse
// daemon or a process of the test that is still leaving); busy after that,
// it is a leak the test reports.
func unmountLoop(t testing.TB, mnt string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("umount", mnt).CombinedOutput()
		if err == nil {
			return
		}
		if !strings.Contains(string(out), "busy") || time.Now().After(deadline) {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// XFSReflink is LoopFS of an XFS with reflinks.
func XFSReflink(t *testing.T) string { return LoopFS(t, "xfs", "-q", "-m", "reflink=1") }

// Btrfs is LoopFS of a btrfs (which clones files).
func Btrfs(t *testing.T) string { return LoopFS(t, "btrfs", "-q") }

// Ext4 is LoopFS of an ext4 (which has no reflinks).
func Ext4(t *testing.T) string { return LoopFS(t, "ext4", "-q") }
