package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"

	"golang.org/x/sys/unix"
)

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func usedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	overlaytest.SyncFS(t, dir)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// copyUpCost mounts a kernel overlay of source under an upper in
// stateRoot, edits one byte of a 64 MiB source file through it and returns
// the bytes the state root's file system used for that.
func copyUpCost(t *testing.T, stateRoot, source string) int64 {
	t.Helper()
	big := filepath.Join(source, "big.bin")
	if err := os.WriteFile(big, bytes.Repeat([]byte("0123456789abcdef"), 64<<20/16), 0o644); err != nil {
		t.Fatal(err)
	}
	upper, work, merged := filepath.Join(stateRoot, "w", "upper"), filepath.Join(stateRoot, "w", "work"), filepath.Join(stateRoot, "w", "merged")
	mkdirs(t, upper, work, merged)
	before := usedBytes(t, stateRoot)
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+source+",upperdir="+upper+",workdir="+work); err != nil {
		t.Skipf("kernel overlayfs: %v", err)
	}
	defer func() { _ = unix.Unmount(merged, 0) }()
	f, err := os.OpenFile(filepath.Join(merged, "big.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), 12345); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := unix.Unmount(merged, 0); err != nil {
		t.Fatal(err)
	}
	return usedBytes(t, stateRoot) - before
}

// The doctor's answer is checked against what the kernel then does: where
// it says O(1) copy-up, a one-byte edit to a 64 MiB file through overlayfs
// uses (almost) no space; where it says copies, it uses the whole file.
func TestCheckCopyOnWrite(t *testing.T) {
	const size = 64 << 20
	t.Run("one xfs with reflink", func(t *testing.T) {
		x := overlaytest.XFSReflink(t)
		root, src := filepath.Join(x, "state"), filepath.Join(x, "src")
		mkdirs(t, root, src)
		c, err := CheckCopyOnWrite(root, src)
		if err != nil {
			t.Fatal(err)
		}
		if !c.CopyUp || !c.Snapshots || c.StateRootFS != "xfs" {
			t.Fatalf("got %+v, want O(1) copy-up and snapshots on xfs", c)
		}
		if used := copyUpCost(t, root, src); used > size/8 {
			t.Errorf("doctor says O(1) copy-up, but a one-byte edit used %d bytes", used)
		}
	})
	t.Run("one ext4", func(t *testing.T) {
		e := overlaytest.Ext4(t)
		root, src := filepath.Join(e, "state"), filepath.Join(e, "src")
		mkdirs(t, root, src)
		c, err := CheckCopyOnWrite(root, src)
		if err != nil {
			t.Fatal(err)
		}
		if c.CopyUp || c.Snapshots || !strings.Contains(c.CopyUpWhy, "ext4") || !strings.Contains(c.SnapshotsWhy, "no reflinks") {
			t.Fatalf("got %+v, want copies on ext4, saying why", c)
		}
		if used := copyUpCost(t, root, src); used < size {
			t.Errorf("doctor says copy-up copies, but a one-byte edit used only %d bytes", used)
		}
	})
	t.Run("source on another file system", func(t *testing.T) {
		x := overlaytest.XFSReflink(t)
		b := overlaytest.Btrfs(t)
		root, src := filepath.Join(x, "state"), filepath.Join(b, "src")
		mkdirs(t, root, src)
		c, err := CheckCopyOnWrite(root, src)
		if err != nil {
			t.Fatal(err)
		}
		if c.CopyUp || !c.Snapshots || c.SourceFS != "btrfs" || !strings.Contains(c.CopyUpWhy, "different file systems") {
			t.Fatalf("got %+v, want copies (two file systems), O(1) snapshots", c)
		}
		if used := copyUpCost(t, root, src); used < size {
			t.Errorf("doctor says copy-up copies, but a one-byte edit used only %d bytes", used)
		}
		if s := c.String(); !strings.Contains(s, "copy-up: copies bytes") || !strings.Contains(s, "snapshots: O(1)") {
			t.Errorf("text: %q", s)
		}
	})
	t.Run("state root not made yet", func(t *testing.T) {
		x := overlaytest.XFSReflink(t)
		root := filepath.Join(x, "not", "yet")
		c, err := CheckCopyOnWrite(root, "")
		if err != nil {
			t.Fatal(err)
		}
		if !c.Snapshots || c.CopyUp {
			t.Fatalf("got %+v, want O(1) snapshots where the root would be made", c)
		}
		if _, err := os.Stat(filepath.Join(x, "not")); err == nil {
			t.Error("the check made the state root")
		}
	})
}
