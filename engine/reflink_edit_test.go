package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
)

// A one-byte edit to a big source file through a World on one XFS with
// reflinks costs (almost) no space: the kernel clones the file on copy-up,
// and the base strata keeps of the source's version (what exec captures
// after a command, for diff and apply) is a clone of the source file too.
// The base was streamed into the object store byte by byte: the edit cost
// the whole file even on XFS.
func TestBigFileEditCostsNoSpaceOnXFS(t *testing.T) {
	const size = 64 << 20
	x := overlaytest.XFSReflink(t)
	root, src := filepath.Join(x, "state"), filepath.Join(x, "src")
	mkdirs(t, root, src)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), bytes.Repeat([]byte("0123456789abcdef"), size/16), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := Open(ctx, Options{StateRoot: root, Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.Create(ctx, CreateOptions{Name: "w", Source: src, MountBackend: overlay.BackendKernel})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.EnsureMounted(ctx, w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.unmountLocked(ctx, w) })
	before := usedBytes(t, x)
	f, err := os.OpenFile(filepath.Join(e.Paths.Merged("w"), "big.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), 12345); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	cs, err := e.Changes(ctx, w, false)
	if err != nil || len(cs.Changes) != 1 {
		t.Fatalf("changes: %v, %v; want big.bin", cs, err)
	}
	if n, err := e.CaptureBases(ctx, w, cs); err != nil || n != 1 {
		t.Fatalf("capture bases: %d, %v", n, err)
	}
	if used := usedBytes(t, x) - before; used > size/8 {
		t.Errorf("a one-byte edit of a %d MiB file and its base used %d KiB on XFS with reflinks, want (almost) none", size>>20, used>>10)
	}
	// The base is the source's bytes, not the edit's.
	st, err := e.store()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.bases("w").Get("big.bin")
	if err != nil || rec == nil {
		t.Fatalf("base of big.bin: %v, %v", rec, err)
	}
	got, err := st.ReadAll(rec.Object)
	if err != nil || len(got) != size || got[12345] != "0123456789abcdef"[12345%16] {
		t.Fatalf("base of big.bin: %d bytes, %v; want the source's %d bytes", len(got), err, size)
	}
}
