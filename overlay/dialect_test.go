package overlay

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

func TestDetectDialect(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for device nodes and trusted xattrs")
	}
	cases := []struct {
		name, upper string
		want        Dialect
	}{
		{"empty upper", ``, DialectKernel},
		{"plain files", "file a/b 0644 x\ndir c", DialectKernel},
		{"char whiteouts", "whiteout gone\nfile a 0644 x", DialectKernel},
		{"unionfs meta", "file .unionfs-fuse/x_HIDDEN~ 0644", DialectUnionfs},
		{"upstream unionfs meta", "dir .unionfs/d_HIDDEN~", DialectUnionfs},
		{"oci whiteout files", "file d/.wh.gone 0644\nfile d/new 0644 n", DialectOCI},
		{"oci opaque marker", "file d/.wh..wh..opq 0644", DialectOCI},
		{"aufs bookkeeping", "file .wh..wh.aufs 0444\nfile .wh.x 0444", DialectOCI},
		{"fuse char opaque marker", "dir d\nchar d/.wh..opq 0 0 0000", DialectFuseOverlayfs},
		{"fuse opaque file beside opaque xattr", "dir d\nxattr d trusted.overlay.opaque y\nfile d/.wh..wh..opq 0644", DialectFuseOverlayfs},
		{"fuse user xattr", "dir d\nxattr d user.fuseoverlayfs.opaque y", DialectFuseOverlayfs},
		{"fuse origin on a file", "file f 0644 x\nxattr f user.fuseoverlayfs.origin /f", DialectFuseOverlayfs},
		{"fuse mixed whiteouts", "whiteout a\nfile .wh.b 0644", DialectFuseOverlayfs},
		{"kernel bookkeeping beats a .wh. user file", "xattr . trusted.overlay.uuid u\nwhiteout a\nfile .wh.b 0644", DialectKernel},
		{"kernel origin on a file", "file .wh.b 0644\nfile f 0644 x\nxattr f trusted.overlay.origin o", DialectKernel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			upper := t.TempDir()
			overlaytest.Build(t, upper, c.upper)
			got, err := DetectDialect(upper)
			if err != nil || got != c.want {
				t.Errorf("DetectDialect = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if _, err := DetectDialect(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("DetectDialect of a missing dir succeeded")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := DetectDialect(file); err == nil {
		t.Error("DetectDialect of a file succeeded")
	}
}

// TestDialectDecidesWhatAMarkerIs reads one upper in two dialects: a .wh.
// file is a whiteout for OCI and a user file for the kernel.
func TestDialectDecidesWhatAMarkerIs(t *testing.T) {
	dir := t.TempDir()
	l := Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower")}
	overlaytest.Build(t, l.Lower, "file x 0644 x")
	overlaytest.Build(t, l.Upper, "file .wh.x 0644")
	for d, want := range map[Dialect]string{
		DialectOCI:           "D file 0644 1 \"x\" whiteout\n",
		DialectFuseOverlayfs: "D file 0644 1 \"x\" whiteout\n",
		DialectKernel:        "A file 0644 0 \".wh.x\"\n",
		DialectUnionfs:       "A file 0644 0 \".wh.x\"\n",
		DialectAuto:          "D file 0644 1 \"x\" whiteout\n",
	} {
		l.Dialect = d
		cs, err := ReadChanges(context.Background(), l, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := formatChanges(cs); got != want {
			t.Errorf("dialect %q: got %q, want %q", d, got, want)
		}
	}
	l.Dialect = "nonsense"
	if _, err := ReadChanges(context.Background(), l, ReadOptions{}); err == nil {
		t.Error("ReadChanges accepted an unknown dialect")
	}
}
