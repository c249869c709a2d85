package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

func writeTestFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Build state scattered among sources (*.o next to .c files, a build/ dir,
// a build file under a directory the target no longer has) is left out of
// the capture unread, and carried into a staged upper by rename.
func TestBuildStateCaptureAndCarry(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("whiteout char devices need root")
	}
	dir := t.TempDir()
	from, to := filepath.Join(dir, "from"), filepath.Join(dir, "to")
	writeTestFile(t, filepath.Join(from, "src", "a.c"), "int a;\n")
	writeTestFile(t, filepath.Join(from, "src", "a.o"), "OBJ-A")
	writeTestFile(t, filepath.Join(from, "build", "deep", "x.bin"), "X")
	writeTestFile(t, filepath.Join(from, "gone", "g.o"), "OBJ-G")
	writeTestFile(t, filepath.Join(from, "newdir", "n.o"), "OBJ-N")
	if err := os.Chmod(filepath.Join(from, "newdir"), 0o750); err != nil {
		t.Fatal(err)
	}
	// An unreadable build file: the capture must not even open it.
	writeTestFile(t, filepath.Join(from, "src", "locked.o"), "secret")
	if err := os.Chmod(filepath.Join(from, "src", "locked.o"), 0); err != nil {
		t.Fatal(err)
	}
	build, err := overlay.NewIgnore("*.o", "build/")
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	m, stats, err := CaptureUpperWith(context.Background(), st, from, overlay.DialectKernel, nil, CaptureOptions{BuildState: build})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range m.Entries {
		paths = append(paths, e.Path)
	}
	if got := strings.Join(paths, " "); got != "gone newdir src src/a.c" {
		t.Fatalf("captured %q, want only the sources (and their dirs)", got)
	}
	if stats.BuildState != 5 || stats.Files != 1 || stats.NewObjects != 1 {
		t.Fatalf("stats %+v: want 5 build entries left out, 1 file stored", stats)
	}

	// The staged upper: src/ exists, gone is a whiteout now, newdir absent,
	// and a stale src/a.o from an old snapshot is there to be replaced.
	writeTestFile(t, filepath.Join(to, "src", "a.c"), "int a_old;\n")
	writeTestFile(t, filepath.Join(to, "src", "a.o"), "STALE")
	if err := unix.Mknod(filepath.Join(to, "gone"), unix.S_IFCHR|0o600, 0); err != nil {
		t.Fatal(err)
	}
	moved, dropped, err := CarryBuildState(from, to, overlay.DialectKernel, build)
	if err != nil {
		t.Fatal(err)
	}
	if moved != 4 || dropped != 1 {
		t.Fatalf("moved %d dropped %d, want 4 and 1 (gone/g.o: its directory is a whiteout)", moved, dropped)
	}
	for p, want := range map[string]string{"src/a.o": "OBJ-A", "build/deep/x.bin": "X", "newdir/n.o": "OBJ-N", "src/a.c": "int a_old;\n"} {
		got, err := os.ReadFile(filepath.Join(to, p))
		if err != nil || string(got) != want {
			t.Errorf("%s in the staged upper = %q, %v; want %q", p, got, err, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(to, "src", "locked.o")); err != nil || fi.Mode().Perm() != 0 {
		t.Errorf("src/locked.o not carried as it was: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(to, "newdir")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("newdir made with %v (%v), want from's 0750", fi.Mode().Perm(), err)
	}
	if fi, err := os.Lstat(filepath.Join(to, "gone")); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("the whiteout gone was replaced: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(from, "src", "a.o")); err == nil {
		t.Error("src/a.o is still in from: carried by copy, not rename")
	}
}
