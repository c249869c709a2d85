package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"

	"golang.org/x/sys/unix"
)

func TestReflinkSupported(t *testing.T) {
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		fs   string
		want bool
	}{
		{"xfs reflink=1", overlaytest.XFSReflink, "xfs", true},
		{"btrfs", overlaytest.Btrfs, "btrfs", true},
		{"xfs reflink=0", func(t *testing.T) string { return overlaytest.LoopFS(t, "xfs", "-q", "-m", "reflink=0") }, "xfs", false},
		{"ext4", overlaytest.Ext4, "ext4", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t)
			r, err := ReflinkSupported(dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Supported != c.want || r.FS != c.fs {
				t.Fatalf("ReflinkSupported(%s) = %+v, want supported=%v on %s", c.name, r, c.want, c.fs)
			}
			if !c.want && !strings.Contains(r.Reason, c.fs) {
				t.Errorf("reason %q does not name the file system %s", r.Reason, c.fs)
			}
			// The probe leaves nothing behind in the user's directory.
			if ents, _ := os.ReadDir(dir); len(ents) > 1 || (len(ents) == 1 && ents[0].Name() != "lost+found") {
				t.Errorf("the probe left %v in %s", ents, dir)
			}
		})
	}
	if _, err := ReflinkSupported(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing dir: err = %v, want ErrNotExist", err)
	}
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bfree) * st.Bsize
}

// A reflink must be a clone: no data written (free space does not drop by
// the file's size), and an independent file (changing the copy leaves the
// source as it was, unlike a hard link).
func TestCloneFileReflinkSharesExtents(t *testing.T) {
	for _, c := range []struct {
		name string
		dir  func(t *testing.T) string
	}{{"xfs", overlaytest.XFSReflink}, {"btrfs", overlaytest.Btrfs}} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t)
			src, dst := filepath.Join(dir, "big.bin"), filepath.Join(dir, "copy.bin")
			data := bytes.Repeat([]byte("0123456789abcdef"), 64<<20/16) // 64 MiB
			if err := os.WriteFile(src, data, 0o751); err != nil {
				t.Fatal(err)
			}
			overlaytest.SyncFS(t, dir)
			before := freeBytes(t, dir)
			m, err := CloneFile(dst, src)
			if err != nil {
				t.Fatal(err)
			}
			if m != CloneReflink {
				t.Fatalf("method = %s, want reflink on %s", m, c.name)
			}
			overlaytest.SyncFS(t, dir)
			if used := before - freeBytes(t, dir); used > 8<<20 {
				t.Errorf("the clone used %d bytes of a %d-byte file: the data was copied", used, len(data))
			}
			got, err := os.ReadFile(dst)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("clone content differs (err %v)", err)
			}
			if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o751 {
				t.Errorf("mode = %v, want 0751", fi.Mode().Perm())
			}
			f, err := os.OpenFile(dst, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("X"), 1000); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if got, _ := os.ReadFile(src); !bytes.Equal(got, data) {
				t.Fatal("writing the clone changed the source")
			}
		})
	}
}

// Where FICLONE is refused (ext4, or across file systems) the bytes are
// still copied, by copy_file_range or a plain copy, and the method says so.
func TestCloneFileFallsBack(t *testing.T) {
	ext4 := overlaytest.Ext4(t)
	xfs := overlaytest.XFSReflink(t)
	data := bytes.Repeat([]byte("strata\n"), 300_000)
	src := filepath.Join(ext4, "src.bin")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := CloneFile(filepath.Join(ext4, "dst.bin"), src)
	if err != nil {
		t.Fatal(err)
	}
	if m != CloneCopyRange {
		t.Errorf("ext4 to ext4: method = %s, want copy_file_range", m)
	}
	// Across file systems FICLONE gives EXDEV; copy_file_range may too.
	m2, err := CloneFile(filepath.Join(xfs, "dst.bin"), src)
	if err != nil {
		t.Fatal(err)
	}
	if m2 == CloneReflink {
		t.Errorf("ext4 to xfs: method = reflink, which cannot be")
	}
	for _, p := range []string{filepath.Join(ext4, "dst.bin"), filepath.Join(xfs, "dst.bin")} {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: content differs (err %v)", p, err)
		}
	}
	t.Logf("ext4→ext4 %s, ext4→xfs %s", m, m2)
}

// An existing longer dst is replaced, not overwritten in place with a stale
// tail; a failed clone leaves no dst and says why.
func TestCloneFileReplacesAndFailsCleanly(t *testing.T) {
	for _, c := range []struct {
		name string
		dir  func(t *testing.T) string
	}{{"tmp", func(t *testing.T) string { return t.TempDir() }}, {"xfs", overlaytest.XFSReflink}} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			if err := os.WriteFile(src, []byte("short\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, bytes.Repeat([]byte("long stale content\n"), 1000), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := CloneFile(dst, src); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(dst); string(got) != "short\n" {
				t.Fatalf("dst = %q, want the source's 6 bytes", got[:min(len(got), 40)])
			}
			if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o644 {
				t.Errorf("mode = %v, want the source's 0644", fi.Mode().Perm())
			}
			_, err := CloneFile(filepath.Join(dir, "d2"), filepath.Join(dir, "missing"))
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
				t.Errorf("missing source: err = %v", err)
			}
			if _, err := CloneFile(filepath.Join(dir, "d3"), dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("a directory as source: err = %v", err)
			}
			for _, p := range []string{"d2", "d3"} {
				if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, syscall.ENOENT) {
					t.Errorf("%s exists after a failed clone", p)
				}
			}
		})
	}
}
