package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/overlay"
)

// TestDropUpperPathRemovesEveryDialectsMarker: after an apply drops a path,
// no marker of any dialect may keep hiding the source's version of it, and a
// sibling's markers stay.
func TestDropUpperPathRemovesEveryDialectsMarker(t *testing.T) {
	upper := t.TempDir()
	write := func(rel string) {
		p := filepath.Join(upper, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	markers := overlay.DeletionMarkers(overlay.DialectAuto, "d/gone.txt")
	if len(markers) < 3 {
		t.Fatalf("DeletionMarkers(auto) = %q: want the OCI name and both unionfs meta trees", markers)
	}
	for _, m := range markers {
		write(m)
	}
	siblings := overlay.DeletionMarkers(overlay.DialectAuto, "d/kept.txt")
	for _, m := range siblings {
		write(m)
	}
	write("d/gone.txt")
	if err := dropUpperPath(upper, "d/gone.txt"); err != nil {
		t.Fatal(err)
	}
	for _, m := range append(markers, "d/gone.txt") {
		if _, err := os.Lstat(filepath.Join(upper, filepath.FromSlash(m))); err == nil {
			t.Errorf("%s survived the drop", m)
		}
	}
	for _, m := range siblings {
		if _, err := os.Lstat(filepath.Join(upper, filepath.FromSlash(m))); err != nil {
			t.Errorf("sibling marker %s removed: %v", m, err)
		}
	}
}
