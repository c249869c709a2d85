package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

// TestRestorePathsKeepsLiveFileWhenObjectIsBad: a restore whose object is
// missing, truncated or overwritten with same-size bytes fails naming the
// object and the path, and the World's live (unsnapshotted) version of the
// file is still there, byte for byte.
func TestRestorePathsKeepsLiveFileWhenObjectIsBad(t *testing.T) {
	for _, damage := range []string{"missing", "same-size", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			upper := filepath.Join(t.TempDir(), "upper")
			snaptWrite(t, filepath.Join(upper, "src/x.go"), "package x // snapshotted\n", 0o644)
			snaptWrite(t, filepath.Join(upper, "src/y.go"), "package y // snapshotted\n", 0o644)
			s := snaptStore(t)
			m, _ := snaptCapture(t, s, upper, overlay.DialectKernel, nil)
			snaptWrite(t, filepath.Join(upper, "src/x.go"), "package x // live work, never snapshotted\n", 0o644)
			snaptWrite(t, filepath.Join(upper, "src/y.go"), "package y // live work too\n", 0o644)
			before := snaptDump(t, upper, overlay.DialectKernel)

			id := m.Lookup("src/x.go").Object
			obj := s.Path(id)
			snaptMust(t, os.Chmod(obj, 0o644))
			switch damage {
			case "missing":
				snaptMust(t, os.Remove(obj))
			case "same-size":
				snaptMust(t, os.WriteFile(obj, []byte("package X // snapshotted\n"), 0o644))
			case "truncated":
				snaptMust(t, os.Truncate(obj, 4))
			}
			// y.go sorts after x.go: a restore that wrote as it went would
			// already have replaced x.go... and x.go's object is the bad one;
			// restoring both shows nothing at all changes.
			err := RestorePaths(context.Background(), s, m, upper, overlay.DialectKernel, []string{"src/y.go", "src/x.go"})
			if err == nil {
				t.Fatal("restore with a bad object succeeded")
			}
			if !strings.Contains(err.Error(), "src/x.go") || !strings.Contains(err.Error(), string(id[:12])) {
				t.Errorf("error names neither path nor object: %v", err)
			}
			if damage != "missing" {
				var coe *CorruptObjectError
				if !errors.As(err, &coe) || coe.ID != id || coe.File != "src/x.go" {
					t.Errorf("err = %v, want *CorruptObjectError for src/x.go", err)
				}
			}
			if got := snaptDump(t, upper, overlay.DialectKernel); got != before {
				t.Fatalf("a failed restore changed the upper:\n%s", snaptLineDiff(before, got))
			}
			if _, err := os.Lstat(upper + restorePathsTmpSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("failed restore left its staging dir: %v", err)
			}
		})
	}
}

// TestRestorePathsReplacesFileAtomically: restoring a file over the live
// one is one rename: the inode at the path changes in one step and the
// content is the snapshot's.
func TestRestorePathsReplacesFileAtomically(t *testing.T) {
	upper := filepath.Join(t.TempDir(), "upper")
	snaptWrite(t, filepath.Join(upper, "a"), "old", 0o640)
	s := snaptStore(t)
	m, _ := snaptCapture(t, s, upper, overlay.DialectKernel, nil)
	snaptWrite(t, filepath.Join(upper, "a"), "live", 0o600)
	snaptMust(t, RestorePaths(context.Background(), s, m, upper, overlay.DialectKernel, []string{"a"}))
	got, err := os.ReadFile(filepath.Join(upper, "a"))
	snaptMust(t, err)
	fi, err := os.Stat(filepath.Join(upper, "a"))
	snaptMust(t, err)
	if string(got) != "old" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("restored a = %q %v, want \"old\" 0640", got, fi.Mode())
	}
}

// sparseSize is the apparent size of the sparse test file: 1 GiB, of which
// only three small runs hold data.
const sparseSize = 1 << 30

var sparseRuns = []struct {
	off  int64
	data string
}{{0, "head"}, {sparseSize / 2, "middle"}, {sparseSize - 5, "tail!"}}

func writeSparse(t *testing.T, p string) {
	t.Helper()
	snaptMust(t, os.MkdirAll(filepath.Dir(p), 0o755))
	f, err := os.Create(p)
	snaptMust(t, err)
	for _, r := range sparseRuns {
		_, err := f.WriteAt([]byte(r.data), r.off)
		snaptMust(t, err)
	}
	snaptMust(t, f.Close())
}

// allocated is what a file really takes on disk (st_blocks), in bytes.
func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	snaptMust(t, unix.Stat(p, &st))
	return st.Blocks * 512
}

func checkSparseCopy(t *testing.T, what, p string) {
	t.Helper()
	fi, err := os.Stat(p)
	snaptMust(t, err)
	if fi.Size() != sparseSize {
		t.Fatalf("%s: size %d, want %d", what, fi.Size(), sparseSize)
	}
	if a := allocated(t, p); a > 1<<20 {
		t.Fatalf("%s: %d bytes allocated for a 1 GiB file with 15 bytes of data: the holes were filled", what, a)
	}
	f, err := os.Open(p)
	snaptMust(t, err)
	defer f.Close()
	for _, r := range sparseRuns {
		buf := make([]byte, len(r.data))
		_, err := f.ReadAt(buf, r.off)
		snaptMust(t, err)
		if !bytes.Equal(buf, []byte(r.data)) {
			t.Fatalf("%s: at %d read %q, want %q", what, r.off, buf, r.data)
		}
		if r.off > 0 {
			_, err := f.ReadAt(buf[:1], r.off-1)
			snaptMust(t, err)
			if buf[0] != 0 {
				t.Fatalf("%s: byte before %d is %q, want a hole's 0", what, r.off, buf[0])
			}
		}
	}
}

// TestSparseFileStaysSparse: a 1 GiB sparse file costs the store and every
// restored copy (whole-upper restore, as rollback and fork do, and a
// single-path restore) only its few data blocks, and its content and
// object id are exactly those of the full 1 GiB.
func TestSparseFileStaysSparse(t *testing.T) {
	dir := t.TempDir()
	upper := filepath.Join(dir, "upper")
	writeSparse(t, filepath.Join(upper, "disk.img"))
	if a := allocated(t, filepath.Join(upper, "disk.img")); a > 1<<20 {
		t.Skipf("this file system does not keep holes (%d bytes allocated)", a)
	}
	s := snaptStore(t)
	m, _ := snaptCapture(t, s, upper, overlay.DialectKernel, nil)
	e := m.Lookup("disk.img")
	// The id is the SHA-256 of the whole apparent content, zeros included.
	h := sha256.New()
	f, err := os.Open(filepath.Join(upper, "disk.img"))
	snaptMust(t, err)
	_, err = f.WriteTo(h)
	f.Close()
	snaptMust(t, err)
	if got := ObjectID(hex.EncodeToString(h.Sum(nil))); got != e.Object {
		t.Fatalf("object id %s, content hashes to %s", e.Object, got)
	}
	checkSparseCopy(t, "object", s.Path(e.Object))

	restored := filepath.Join(dir, "restored")
	snaptMust(t, RestoreUpper(context.Background(), s, m, restored, overlay.DialectKernel))
	checkSparseCopy(t, "restored upper", filepath.Join(restored, "disk.img"))

	snaptMust(t, os.WriteFile(filepath.Join(upper, "disk.img"), []byte("overwritten"), 0o644))
	snaptMust(t, RestorePaths(context.Background(), s, m, upper, overlay.DialectKernel, []string{"disk.img"}))
	checkSparseCopy(t, "restored path", filepath.Join(upper, "disk.img"))
}
