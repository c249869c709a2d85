package overlay

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

func resolveLayers(t *testing.T, d Dialect, lower, upper string) Layers {
	t.Helper()
	dir := t.TempDir()
	l := Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower"), Dialect: d}
	overlaytest.Build(t, l.Lower, "dir .\n"+lower)
	overlaytest.Build(t, l.Upper, "dir .\n"+upper)
	return l
}

func TestResolveKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for whiteout devices and trusted xattrs")
	}
	l := resolveLayers(t, DialectKernel, `
file a/b/file 0644 "lower"
file a/gone 0644 "gone"
file a/kept 0644 "kept"
file op/old 0644 "old"
file op/keep 0644 "keep, lower"
symlink link a
file meta.txt 0644 "data"
file f 0644 "plain"
file "-odd\nname" 0644 "odd"
`, `
file a/b/file 0600 "upper"
whiteout a/gone
file a/new 0644 "new"
dir op
xattr op trusted.overlay.opaque y
file op/keep 0644 "keep, upper"
sparse meta.txt 0600 4
xattr meta.txt trusted.overlay.metacopy ""
symlink sl a/b
`)
	e, err := l.Stat("a/b/file")
	if err != nil || e.Layer != LayerUpper || e.Size != 5 || e.Mode.Perm() != 0o600 || e.Type != TypeFile || e.Name != "file" {
		t.Errorf("Stat(a/b/file) = %+v, %v", e, err)
	}
	if data, err := l.ReadFile("/a/./b/file"); err != nil || string(data) != "upper" {
		t.Errorf("ReadFile(a/b/file) = %q, %v", data, err)
	}
	if e, err := l.Stat("a/kept"); err != nil || e.Layer != LayerLower || e.RealPath != filepath.Join(l.Lower, "a/kept") {
		t.Errorf("Stat(a/kept) = %+v, %v", e, err)
	}
	for _, p := range []string{"a/gone", "op/old", "missing", "missing/deeper", "a/gone/below"} {
		_, err := l.Stat(p)
		var pe *fs.PathError
		if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) {
			t.Errorf("Stat(%q) = %v, want a *fs.PathError with fs.ErrNotExist", p, err)
		}
	}
	if data, err := l.ReadFile("op/keep"); err != nil || string(data) != "keep, upper" {
		t.Errorf("ReadFile(op/keep) = %q, %v", data, err)
	}
	// metacopy: the mode is the upper's, the bytes the lower's.
	if e, err := l.Stat("meta.txt"); err != nil || e.Mode.Perm() != 0o600 || e.Size != 4 {
		t.Errorf("Stat(meta.txt) = %+v, %v", e, err)
	}
	if data, err := l.ReadFile("meta.txt"); err != nil || string(data) != "data" {
		t.Errorf("ReadFile(meta.txt) = %q, %v, want the lower's data", data, err)
	}
	// Symlinks: described, never followed.
	if e, err := l.Stat("link"); err != nil || e.Type != TypeSymlink || e.Target != "a" {
		t.Errorf("Stat(link) = %+v, %v", e, err)
	}
	if target, err := l.Readlink("sl"); err != nil || target != "a/b" {
		t.Errorf("Readlink(sl) = %q, %v", target, err)
	}
	if _, err := l.Readlink("f"); err == nil {
		t.Error("Readlink of a file succeeded")
	}
	if _, err := l.Stat("link/b/file"); !errors.Is(err, ErrCrossesSymlink) {
		t.Errorf("Stat through a symlink = %v, want ErrCrossesSymlink", err)
	}
	if _, err := l.Open("link"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Open(link) = %v, want ELOOP", err)
	}
	if _, err := l.Stat("f/x"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Stat(f/x) = %v, want ENOTDIR", err)
	}
	if _, err := l.Stat("../outside"); err == nil {
		t.Error("Stat(../outside) succeeded")
	}
	if e, err := l.Stat("-odd\nname"); err != nil || e.Size != 3 {
		t.Errorf("Stat(odd name) = %+v, %v", e, err)
	}

	names := func(p string) []string {
		entries, err := l.ReadDir(p)
		if err != nil {
			t.Fatalf("ReadDir(%q): %v", p, err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name)
		}
		return out
	}
	assertNames := func(p string, want ...string) {
		t.Helper()
		got := names(p)
		if len(got) != len(want) {
			t.Errorf("ReadDir(%q) = %q, want %q", p, got, want)
			return
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("ReadDir(%q) = %q, want %q", p, got, want)
				return
			}
		}
	}
	assertNames("", "-odd\nname", "a", "f", "link", "meta.txt", "op", "sl")
	assertNames("a", "b", "kept", "new")
	assertNames("op", "keep")
	if _, err := l.ReadDir("f"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("ReadDir(f) = %v, want ENOTDIR", err)
	}
	root, err := l.Stat("")
	if err != nil || root.Type != TypeDir {
		t.Errorf("Stat(root) = %+v, %v", root, err)
	}
}

func TestResolveHidesForeignMarkers(t *testing.T) {
	oci := resolveLayers(t, DialectOCI, `
file d/x 0644 x
file d/y 0644 y
file r/old 0644 old
`, `
file d/.wh.x 0644
file .wh..wh.aufs 0444
file r/.wh..wh..opq 0644
file r/new 0644 new
file .fuse_hidden000a 0644 "open but deleted"
`)
	for _, p := range []string{"d/x", "d/.wh.x", ".wh..wh.aufs", "r/old", "r/.wh..wh..opq", ".fuse_hidden000a"} {
		if _, err := oci.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("oci Stat(%q) = %v, want not exist", p, err)
		}
	}
	if entries, err := oci.ReadDir("d"); err != nil || len(entries) != 1 || entries[0].Name != "y" {
		t.Errorf("oci ReadDir(d) = %+v, %v", entries, err)
	}
	if entries, err := oci.ReadDir(""); err != nil || len(entries) != 2 {
		t.Errorf("oci ReadDir(root) = %+v, %v; want d and r only", entries, err)
	}

	union := resolveLayers(t, DialectUnionfs, `
file a/b 0644 b
file a/c 0644 c
file gone/x 0644 x
file re/old 0644 old
`, `
file .unionfs-fuse/a/b_HIDDEN~ 0644
dir .unionfs-fuse/gone_HIDDEN~
dir .unionfs-fuse/re_HIDDEN~
file re/new 0644 new
`)
	for _, p := range []string{"a/b", "gone", "gone/x", "re/old", ".unionfs-fuse"} {
		if _, err := union.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("unionfs Stat(%q) = %v, want not exist", p, err)
		}
	}
	if data, err := union.ReadFile("a/c"); err != nil || string(data) != "c" {
		t.Errorf("unionfs ReadFile(a/c) = %q, %v", data, err)
	}
	if entries, err := union.ReadDir(""); err != nil || len(entries) != 2 {
		t.Errorf("unionfs ReadDir(root) = %+v, %v; want a and re", entries, err)
	}
}
