package fsx

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestUnixModeRoundTrips(t *testing.T) {
	for _, c := range []struct {
		m fs.FileMode
		u uint32
	}{
		{0o644, 0o644},
		{0o755 | fs.ModeSetuid, 0o4755},
		{0o2750&^0o2000 | fs.ModeSetgid, 0o2750},
		{0o777 | fs.ModeSticky, 0o1777},
		{0o777 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky, 0o7777},
	} {
		if got := UnixMode(c.m); got != c.u {
			t.Errorf("UnixMode(%v) = %#o, want %#o", c.m, got, c.u)
		}
		if got := FileMode(c.u); got != c.m {
			t.Errorf("FileMode(%#o) = %v, want %v", c.u, got, c.m)
		}
	}
	// type bits never leak into the octal mode, nor back.
	if got := UnixMode(fs.ModeDir | fs.ModeSymlink | 0o700); got != 0o700 {
		t.Errorf("UnixMode kept type bits: %#o", got)
	}
	if got := FileMode(syscall.S_IFCHR | 0o4600); got != fs.ModeSetuid|0o600 {
		t.Errorf("FileMode kept type bits: %v", got)
	}
	if UnixMode(fs.ModeSetuid) != syscall.S_ISUID || UnixMode(fs.ModeSetgid) != syscall.S_ISGID || UnixMode(fs.ModeSticky) != syscall.S_ISVTX {
		t.Error("special bits disagree with the kernel's")
	}
}

func TestCanonicalDir(t *testing.T) {
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := CanonicalDir(filepath.Join(dir, "link")); err != nil || got != real {
		t.Errorf("CanonicalDir(link) = %q, %v; want %q", got, err, real)
	}
	if _, err := CanonicalDir(filepath.Join(dir, "file")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("CanonicalDir(file) err = %v, want not a directory", err)
	}
	if _, err := CanonicalDir(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("CanonicalDir(missing) err = %v, want not-exist", err)
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"a", "w1", "mx2fx7id-lmqe", "a.b_c-d", strings.Repeat("a", 63)} {
		if !ValidName(ok) {
			t.Errorf("ValidName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "-a", ".hidden", "_a", "A", "a/b", "a b", "ü", "a\x00", strings.Repeat("a", 64)} {
		if ValidName(bad) {
			t.Errorf("ValidName(%q) = true", bad)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:                  "0 B",
		1:                  "1 B",
		1023:               "1023 B",
		1024:               "1.0 KiB",
		1536:               "1.5 KiB",
		1<<20 - 1:          "1.0 MiB",
		1 << 20:            "1.0 MiB",
		1258291:            "1.2 MiB",
		5 << 30:            "5.0 GiB",
		3 << 40:            "3.0 TiB",
		1<<63 - 1:          "8.0 EiB",
		-2048:              "-2.0 KiB",
		-5:                 "-5 B",
		10*1024*1024 + 512: "10.0 MiB",
	} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
