package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
)

// sharedExtents says whether filefrag -v reports a shared extent in p
// (skips when filefrag is missing).
func sharedExtents(t *testing.T, p string) bool {
	t.Helper()
	if _, err := exec.LookPath("filefrag"); err != nil {
		t.Skip("filefrag (e2fsprogs) is not installed")
	}
	out, err := exec.Command("filefrag", "-v", p).CombinedOutput()
	if err != nil {
		t.Fatalf("filefrag -v %s: %v: %s", p, err, out)
	}
	return strings.Contains(string(out), "shared")
}

func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// On a reflink-capable state root, snapshotting an upper holding a 256 MB
// file and restoring it share extents: neither the object nor the restored
// file costs the file's size in free space, filefrag shows shared extents,
// and both are still independent copies with the right bytes.
func TestSnapshotRestoreReflinkSharesExtents(t *testing.T) {
	for _, c := range []struct {
		name string
		dir  func(t *testing.T) string
	}{{"xfs", overlaytest.XFSReflink}, {"btrfs", overlaytest.Btrfs}} {
		t.Run(c.name, func(t *testing.T) {
			root := c.dir(t)
			upper := filepath.Join(root, "upper")
			if err := os.MkdirAll(filepath.Join(upper, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			big := filepath.Join(upper, "bin", "game.pak")
			chunk := bytes.Repeat([]byte("strata-reflink-"), 1<<16) // ~960 KiB
			f, err := os.Create(big)
			if err != nil {
				t.Fatal(err)
			}
			const size = 256 << 20
			for n := 0; n < size; {
				k := min(len(chunk), size-n)
				if _, err := f.Write(chunk[:k]); err != nil {
					t.Fatal(err)
				}
				n += k
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			want := fileSum(t, big)
			st, err := OpenStore(filepath.Join(root, "objects"))
			if err != nil {
				t.Fatal(err)
			}
			overlaytest.SyncFS(t, root)
			free := freeBytes(t, root)
			m, stats, err := CaptureUpper(context.Background(), st, upper, overlay.DialectKernel, nil)
			if err != nil {
				t.Fatal(err)
			}
			overlaytest.SyncFS(t, root)
			if used := free - freeBytes(t, root); used > 16<<20 {
				t.Errorf("snapshot of a 256 MB file used %d MB of the state root: its bytes were copied, not reflinked", used>>20)
			}
			if st.Reflinked() != 1 || stats.NewObjects != 1 {
				t.Errorf("reflinked objects = %d, new objects %d, want 1 and 1", st.Reflinked(), stats.NewObjects)
			}
			e := m.Lookup("bin/game.pak")
			if e == nil {
				t.Fatal("manifest lacks bin/game.pak")
			}
			obj := st.Path(e.Object)
			if !sharedExtents(t, obj) {
				t.Error("filefrag -v: the object shares no extent with the upper's file")
			}
			// The object is independent of the World's file.
			wf, err := os.OpenFile(big, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wf.WriteAt([]byte("EDITED"), 4096); err != nil {
				t.Fatal(err)
			}
			wf.Close()
			if err := st.Verify(e.Object); err != nil {
				t.Fatalf("editing the World's file changed the object: %v", err)
			}

			restored := filepath.Join(root, "upper2")
			overlaytest.SyncFS(t, root)
			free = freeBytes(t, root)
			if err := RestoreUpperWith(context.Background(), st, m, restored, overlay.DialectKernel, RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			overlaytest.SyncFS(t, root)
			if used := free - freeBytes(t, root); used > 16<<20 {
				t.Errorf("restore of a 256 MB file used %d MB: its bytes were copied, not reflinked", used>>20)
			}
			rp := filepath.Join(restored, "bin", "game.pak")
			if !sharedExtents(t, rp) {
				t.Error("filefrag -v: the restored file shares no extent with the object")
			}
			if fileSum(t, rp) != want {
				t.Fatal("restored file's content differs from the snapshot's")
			}
		})
	}
}
