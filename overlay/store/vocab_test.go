package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
)

// TestCaptureAndChangesShareOneVocabulary feeds the change reader (what the
// reviewer sees) and capture (what a snapshot freezes and a rollback
// restores) uppers whose markers the two used to read differently: each
// case must mean the same to both, or a rollback would silently resurrect or
// delete what the diff showed.
func TestCaptureAndChangesShareOneVocabulary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for whiteout devices and trusted xattrs")
	}
	cases := []struct {
		name       string
		d          overlay.Dialect
		upper      string
		oldDeleted bool // d/old reads deleted (d opaque) in the World
		absent     string
	}{
		// the kernel ignores fuse-overlayfs's fallback xattr: d stays merged.
		{"kernel ignores fuse opaque xattr", overlay.DialectKernel, "dir d\nxattr d user.fuseoverlayfs.opaque y\nfile d/new 0644 n", false, ""},
		// a char .wh..opq is an opaque marker wherever .wh. names are markers.
		{"oci char opaque marker", overlay.DialectOCI, "dir d\nchar d/.wh..opq 0 0 0000\nfile d/new 0644 n", true, "d/.wh..opq"},
		{"oci file opaque marker", overlay.DialectOCI, "dir d\nfile d/.wh..opq 0644\nfile d/new 0644 n", true, "d/.opq"},
		// an open-but-deleted FUSE leftover is never the World's file.
		{"fuse hidden leftover", overlay.DialectKernel, "dir d\nfile d/.fuse_hidden0000001 0644 x\nfile d/new 0644 n", false, "d/.fuse_hidden0000001"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := vocabLayers(t, tc.d, "file d/old 0644 old\n", tc.upper)
			cs, err := overlay.ReadChanges(context.Background(), l, overlay.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			changed := map[string]overlay.Kind{}
			for _, c := range cs.Changes {
				changed[c.Path] = c.Kind
			}
			if got := changed["d/old"] == overlay.Deleted; got != tc.oldDeleted {
				t.Errorf("change reader: d/old deleted = %v, want %v (changes %v)", got, tc.oldDeleted, changed)
			}
			m, _, err := CaptureUpper(context.Background(), snaptStore(t), l.Upper, tc.d, nil)
			if err != nil {
				t.Fatal(err)
			}
			e := m.Lookup("d")
			if e == nil || e.Kind != EntryDir {
				t.Fatalf("capture: d = %+v, want a dir", e)
			}
			if e.Opaque != tc.oldDeleted {
				t.Errorf("capture: d opaque = %v, change reader: d/old deleted = %v; they must agree", e.Opaque, tc.oldDeleted)
			}
			if tc.absent != "" {
				if _, ok := changed[tc.absent]; ok {
					t.Errorf("change reader reports marker %q as a change", tc.absent)
				}
				if e := m.Lookup(tc.absent); e != nil {
					t.Errorf("capture freezes marker %q as %+v", tc.absent, e)
				}
			}
		})
	}
}

// TestClassifyUpperEntryMatchesChangeReader checks the watcher's classifier
// against the change reader on each dialect's markers.
func TestClassifyUpperEntryMatchesChangeReader(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for whiteout devices and trusted xattrs")
	}
	cases := []struct {
		d     overlay.Dialect
		upper string
		rel   string
		want  overlay.UpperMark
	}{
		{overlay.DialectKernel, "whiteout d/old", "d/old", overlay.UpperMark{Marker: overlay.MarkerWhiteout, Target: "d/old"}},
		{overlay.DialectKernel, "file d/old 0644\nxattr d/old trusted.overlay.whiteout \"\"", "d/old", overlay.UpperMark{Marker: overlay.MarkerWhiteout, Target: "d/old"}},
		{overlay.DialectKernel, "file d/.wh.old 0644", "d/.wh.old", overlay.UpperMark{Marker: overlay.MarkerPlain, Target: "d/.wh.old"}},
		{overlay.DialectOCI, "file d/.wh.old 0644", "d/.wh.old", overlay.UpperMark{Marker: overlay.MarkerWhiteout, Target: "d/old"}},
		{overlay.DialectFuseOverlayfs, "file d/.wh..wh..opq 0644", "d/.wh..wh..opq", overlay.UpperMark{Marker: overlay.MarkerOpaque}},
		{overlay.DialectOCI, "file .wh..wh.aufs 0644", ".wh..wh.aufs", overlay.UpperMark{Marker: overlay.MarkerSkip}},
		{overlay.DialectUnionfs, "whiteout d/old", "d/old", overlay.UpperMark{Marker: overlay.MarkerPlain, Target: "d/old"}},
		{overlay.DialectUnionfs, "file .unionfs-fuse/d/old_HIDDEN~ 0644", ".unionfs-fuse/d/old_HIDDEN~", overlay.UpperMark{Marker: overlay.MarkerWhiteout, Target: "d/old"}},
		{overlay.DialectUnionfs, "dir .unionfs/d", ".unionfs/d", overlay.UpperMark{Marker: overlay.MarkerSkip}},
		{overlay.DialectKernel, "file d/.fuse_hidden01 0644", "d/.fuse_hidden01", overlay.UpperMark{Marker: overlay.MarkerSkip}},
	}
	for _, tc := range cases {
		l := vocabLayers(t, tc.d, "file d/old 0644 old\n", tc.upper)
		got, err := overlay.ClassifyUpperEntry(tc.d, l.Upper, tc.rel)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.d, tc.rel, err)
		}
		if got.Marker != tc.want.Marker || got.Target != tc.want.Target {
			t.Errorf("%s %q = %+v, want %+v", tc.d, tc.rel, got, tc.want)
		}
		if tc.want.Marker == overlay.MarkerWhiteout {
			cs, err := overlay.ReadChanges(context.Background(), l, overlay.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, c := range cs.Changes {
				found = found || (c.Path == tc.want.Target && c.Kind == overlay.Deleted)
			}
			if !found {
				t.Errorf("%s %q: watcher says deletes %q, change reader does not: %+v", tc.d, tc.rel, tc.want.Target, cs.Changes)
			}
		}
	}
	if _, err := overlay.ClassifyUpperEntry(overlay.DialectKernel, t.TempDir(), "gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("vanished entry: err = %v, want not-exist", err)
	}
}

// vocabLayers is resolve_test.go's resolveLayers: lower and upper built from
// specs under a temp dir.
func vocabLayers(t *testing.T, d overlay.Dialect, lower, upper string) overlay.Layers {
	t.Helper()
	dir := t.TempDir()
	l := overlay.Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower"), Dialect: d}
	overlaytest.Build(t, l.Lower, "dir .\n"+lower)
	overlaytest.Build(t, l.Upper, "dir .\n"+upper)
	return l
}
