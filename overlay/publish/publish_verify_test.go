package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
	"github.com/stratahq/strata/overlay/store"
)

// A file whose content is not the hash the caller checked (it changed after
// the check) is never published: the staged temp is read back and hashed
// before the commit, and the whole publication writes nothing.
func TestPublishContentHashChecksStagedFile(t *testing.T) {
	root, journal, upper := t.TempDir(), t.TempDir(), t.TempDir()
	overlaytest.WriteTree(t, root, map[string]string{"keep": "old"})
	checked := strings.Repeat("checked version\n", 1000)
	overlaytest.WriteTree(t, upper, map[string]string{"big": checked[:len(checked)/2]}) // torn since the check
	before := pubTreeState(t, root)
	_, err := Publish(context.Background(), root, journal, []PublishOp{
		{Path: "keep", Kind: OpWrite, Data: []byte("new"), ContentHash: sha256Hex([]byte("new"))},
		{Path: "big", Kind: OpWrite, SourceFile: filepath.Join(upper, "big"), ContentHash: sha256Hex([]byte(checked))},
	}, PublishOptions{})
	var ce *store.ContentError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrContentChanged) || ce.Path != "big" {
		t.Fatalf("want *ContentError for big, got %v", err)
	}
	if diff := pubDiffStates(before, pubTreeState(t, root)); diff != "" {
		t.Fatalf("a publication with an unchecked file changed the tree:\n%s", diff)
	}
	pubAssertClean(t, root, journal)
	// The checked content is published, data or streamed.
	overlaytest.WriteTree(t, upper, map[string]string{"big": checked})
	if _, err := Publish(context.Background(), root, journal, []PublishOp{
		{Path: "keep", Kind: OpWrite, Data: []byte("new"), ContentHash: sha256Hex([]byte("new"))},
		{Path: "big", Kind: OpWrite, SourceFile: filepath.Join(upper, "big"), ContentHash: sha256Hex([]byte(checked))},
	}, PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if data, _, err := overlay.ReadFileBeneath(root, "big"); err != nil || string(data) != checked {
		t.Fatalf("big: %d bytes, %v", len(data), err)
	}
}

// A sparse source file is published sparse: holes and zero blocks are not
// allocated, the content is equal.
func TestPublishSourceFileKeepsHoles(t *testing.T) {
	root, journal, upper := t.TempDir(), t.TempDir(), t.TempDir()
	src := filepath.Join(upper, "sparse")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	const size = 256 << 20
	for _, off := range []int64{4096, 100 << 20, size - 4} {
		if _, err := f.WriteAt([]byte("data"), off); err != nil {
			t.Fatal(err)
		}
	}
	// A data extent of zeros: allocated in the source, a hole once published.
	if _, err := f.WriteAt(make([]byte, 8<<20), 200<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ = os.Open(src)
	want, _, err := store.HashFile(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Publish(context.Background(), root, journal, []PublishOp{{Path: "sparse", Kind: OpWrite, SourceFile: src, ContentHash: want}}, PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 1<<20 {
		t.Fatalf("published: size %d, %d bytes allocated", st.Size, st.Blocks*512)
	}
	f, _ = os.Open(filepath.Join(root, "sparse"))
	got, _, err := store.HashFile(f)
	f.Close()
	if err != nil || got != want {
		t.Fatalf("published content differs: %v", err)
	}
}
