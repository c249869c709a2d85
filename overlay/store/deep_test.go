package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

// makeDeepTree builds levels nested dirs named name under root, one
// mkdirat/openat step at a time (no path string ever names the bottom), and
// a file leaf holding content at the bottom. It returns the leaf's rel path.
func makeDeepTree(t *testing.T, root, name string, levels int, content string) string {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]string, 0, levels+1)
	for range levels {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
		parts = append(parts, name)
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "leaf", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(f, []byte(content)); err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
	return strings.Join(append(parts, "leaf"), "/")
}

// An upper deeper than PATH_MAX (a hostile agent needs only mkdir and
// chdir) is read, resolved and captured like any other.
func TestDeeperThanPathMax(t *testing.T) {
	base := t.TempDir()
	upper, lower := filepath.Join(base, "upper"), filepath.Join(base, "lower")
	for _, d := range []string{upper, lower} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const levels = 300
	leaf := makeDeepTree(t, upper, strings.Repeat("d", 20), levels, "deep\n")
	if len(upper)+1+len(leaf) <= unix.PathMax {
		t.Fatalf("tree only %d bytes deep", len(leaf))
	}
	l := overlay.Layers{Upper: upper, Lower: lower, Dialect: overlay.DialectKernel}

	cs, err := overlay.ReadChanges(context.Background(), l, overlay.ReadOptions{})
	if err != nil {
		t.Fatalf("read changes: %v", err)
	}
	if len(cs.Changes) != levels+1 || cs.Changes[levels].Path != leaf || cs.Changes[levels].Kind != overlay.Added || cs.Changes[levels].Size != 5 {
		t.Fatalf("%d changes, last %v", len(cs.Changes), cs.Changes[len(cs.Changes)-1])
	}

	data, err := l.ReadFile(leaf)
	if err != nil || string(data) != "deep\n" {
		t.Fatalf("Layers.ReadFile: %q %v", data, err)
	}
	ent, err := l.Stat(leaf)
	if err != nil || ent.Type != overlay.TypeFile || ent.RealPath != upper+"/"+leaf {
		t.Fatalf("Layers.Stat: %+v %v", ent, err)
	}
	if info, err := overlay.LstatBeneath(upper, leaf); err != nil || info.Size() != 5 {
		t.Fatalf("LstatBeneath: %v %v", info, err)
	}
	if data, _, err := overlay.ReadFileBeneath(upper, leaf); err != nil || string(data) != "deep\n" {
		t.Fatalf("ReadFileBeneath: %q %v", data, err)
	}

	store, err := OpenStore(filepath.Join(base, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	m, stats, err := CaptureUpper(context.Background(), store, upper, overlay.DialectKernel, nil)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	e := m.Lookup(leaf)
	if stats.Files != 1 || stats.Dirs != levels || e == nil || e.Object == "" {
		t.Fatalf("capture: %+v, leaf %+v", stats, e)
	}
	if got, err := store.ReadAll(e.Object); err != nil || string(got) != "deep\n" {
		t.Fatalf("captured leaf: %q %v", got, err)
	}

	// Restoring the snapshot rebuilds the whole deep tree.
	restored := filepath.Join(base, "restored")
	if err := RestoreUpper(context.Background(), store, m, restored, overlay.DialectKernel); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if data, _, err := overlay.ReadFileBeneath(restored, leaf); err != nil || string(data) != "deep\n" {
		t.Fatalf("restored leaf: %q %v", data, err)
	}
	// And restoring one path of it into a live upper too.
	if err := RestorePaths(context.Background(), store, m, upper, overlay.DialectKernel, []string{leaf}); err != nil {
		t.Fatalf("restore path: %v", err)
	}
	if data, _, err := overlay.ReadFileBeneath(upper, leaf); err != nil || string(data) != "deep\n" {
		t.Fatalf("leaf restored in place: %q %v", data, err)
	}
}
