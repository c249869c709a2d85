package overlay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

func TestValidateRelPath(t *testing.T) {
	for _, ok := range []string{"a", "a/b", "a.b/c..d", ".hidden/x", "..."} {
		if err := ValidateRelPath(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", ".", "..", "a/..", "../a", "a/./b", "a\x00b"} {
		if err := ValidateRelPath(bad); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("%q: want ErrInvalidPath, got %v", bad, err)
		}
	}
}

func TestBeneathHelpers(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			Openat2Missing.Store(fallback)
			t.Cleanup(func() { Openat2Missing.Store(false) })
			root, outside := t.TempDir(), t.TempDir()
			overlaytest.WriteTree(t, outside, map[string]string{"secret": "s"})
			overlaytest.WriteTree(t, root, map[string]string{
				"dir/file":     "content",
				"dir/rel-link": "-> file",
				"abs-link":     "-> " + outside,
				"up-link":      "-> ../" + filepath.Base(outside),
				"dir/other":    "x",
			})
			data, info, err := ReadFileBeneath(root, "dir/file")
			if err != nil || string(data) != "content" || info.Name() != "file" || !info.Mode().IsRegular() {
				t.Fatalf("ReadFileBeneath = %q, %v, %v", data, info, err)
			}
			if _, _, err := ReadFileBeneath(root, "dir"); err == nil {
				t.Error("ReadFileBeneath of a directory succeeded")
			}
			// Even a link that stays inside the root is not followed.
			for _, rel := range []string{"dir/rel-link", "abs-link/secret", "up-link/secret"} {
				if _, _, err := ReadFileBeneath(root, rel); !errors.Is(err, ErrUnsafePath) {
					t.Errorf("ReadFileBeneath(%s): want ErrUnsafePath, got %v", rel, err)
				}
			}
			info, err = LstatBeneath(root, "dir/rel-link")
			if err != nil || info.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("LstatBeneath(link) = %v, %v", info, err)
			}
			if _, err := LstatBeneath(root, "dir/missing"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("LstatBeneath(missing): %v", err)
			}
			if target, err := ReadlinkBeneath(root, "dir/rel-link"); err != nil || target != "file" {
				t.Errorf("ReadlinkBeneath = %q, %v", target, err)
			}
			if _, err := ReadlinkBeneath(root, "abs-link/secret"); !errors.Is(err, ErrUnsafePath) {
				t.Errorf("ReadlinkBeneath through a link: %v", err)
			}
			for _, bad := range []string{"../" + filepath.Base(outside) + "/secret", "/etc/passwd", ""} {
				if _, err := OpenBeneath(root, bad); !errors.Is(err, ErrInvalidPath) {
					t.Errorf("OpenBeneath(%q): want ErrInvalidPath, got %v", bad, err)
				}
			}
			f, err := OpenBeneath(root, "dir")
			if err != nil {
				t.Fatal(err)
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil || len(names) != 3 {
				t.Errorf("OpenBeneath(dir) lists %v, %v", names, err)
			}
			if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
