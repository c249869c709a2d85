package overlay

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

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
		d          Dialect
		upper      string
		oldDeleted bool // d/old reads deleted (d opaque) in the World
		absent     string
	}{
		// the kernel ignores fuse-overlayfs's fallback xattr: d stays merged.
		{"kernel ignores fuse opaque xattr", DialectKernel, "dir d\nxattr d user.fuseoverlayfs.opaque y\nfile d/new 0644 n", false, ""},
		// a char .wh..opq is an opaque marker wherever .wh. names are markers.
		{"oci char opaque marker", DialectOCI, "dir d\nchar d/.wh..opq 0 0 0000\nfile d/new 0644 n", true, "d/.wh..opq"},
		{"oci file opaque marker", DialectOCI, "dir d\nfile d/.wh..opq 0644\nfile d/new 0644 n", true, "d/.opq"},
		// an open-but-deleted FUSE leftover is never the World's file.
		{"fuse hidden leftover", DialectKernel, "dir d\nfile d/.fuse_hidden0000001 0644 x\nfile d/new 0644 n", false, "d/.fuse_hidden0000001"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := vocabLayers(t, tc.d, "file d/old 0644 old\n", tc.upper)
			cs, err := ReadChanges(context.Background(), l, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			changed := map[string]Kind{}
			for _, c := range cs.Changes {
				changed[c.Path] = c.Kind
			}
			if got := changed["d/old"] == Deleted; got != tc.oldDeleted {
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
		d     Dialect
		upper string
		rel   string
		want  UpperMark
	}{
		{DialectKernel, "whiteout d/old", "d/old", UpperMark{Marker: MarkerWhiteout, Target: "d/old"}},
		{DialectKernel, "file d/old 0644\nxattr d/old trusted.overlay.whiteout \"\"", "d/old", UpperMark{Marker: MarkerWhiteout, Target: "d/old"}},
		{DialectKernel, "file d/.wh.old 0644", "d/.wh.old", UpperMark{Marker: MarkerPlain, Target: "d/.wh.old"}},
		{DialectOCI, "file d/.wh.old 0644", "d/.wh.old", UpperMark{Marker: MarkerWhiteout, Target: "d/old"}},
		{DialectFuseOverlayfs, "file d/.wh..wh..opq 0644", "d/.wh..wh..opq", UpperMark{Marker: MarkerOpaque}},
		{DialectOCI, "file .wh..wh.aufs 0644", ".wh..wh.aufs", UpperMark{Marker: MarkerSkip}},
		{DialectUnionfs, "whiteout d/old", "d/old", UpperMark{Marker: MarkerPlain, Target: "d/old"}},
		{DialectUnionfs, "file .unionfs-fuse/d/old_HIDDEN~ 0644", ".unionfs-fuse/d/old_HIDDEN~", UpperMark{Marker: MarkerWhiteout, Target: "d/old"}},
		{DialectUnionfs, "dir .unionfs/d", ".unionfs/d", UpperMark{Marker: MarkerSkip}},
		{DialectKernel, "file d/.fuse_hidden01 0644", "d/.fuse_hidden01", UpperMark{Marker: MarkerSkip}},
	}
	for _, tc := range cases {
		l := vocabLayers(t, tc.d, "file d/old 0644 old\n", tc.upper)
		got, err := ClassifyUpperEntry(tc.d, l.Upper, tc.rel)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.d, tc.rel, err)
		}
		if got.Marker != tc.want.Marker || got.Target != tc.want.Target {
			t.Errorf("%s %q = %+v, want %+v", tc.d, tc.rel, got, tc.want)
		}
		if tc.want.Marker == MarkerWhiteout {
			cs, err := ReadChanges(context.Background(), l, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, c := range cs.Changes {
				found = found || (c.Path == tc.want.Target && c.Kind == Deleted)
			}
			if !found {
				t.Errorf("%s %q: watcher says deletes %q, change reader does not: %+v", tc.d, tc.rel, tc.want.Target, cs.Changes)
			}
		}
	}
	if _, err := ClassifyUpperEntry(DialectKernel, t.TempDir(), "gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("vanished entry: err = %v, want not-exist", err)
	}
}

// vocabLayers is resolve_test.go's resolveLayers: lower and upper built from
// specs under a temp dir.
func vocabLayers(t *testing.T, d Dialect, lower, upper string) Layers {
	t.Helper()
	dir := t.TempDir()
	l := Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower"), Dialect: d}
	overlaytest.Build(t, l.Lower, "dir .\n"+lower)
	overlaytest.Build(t, l.Upper, "dir .\n"+upper)
	return l
}
