package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A World this strata creates records metacopy_off (its uppers are only
// ever mounted with metacopy=off), so status skips per-file xattr reads; a
// World without the record (made by an older strata, whose upper may hold
// metacopy files) keeps them: a hand-written metacopy file there whose data
// is the lower's is still no change.
func TestNewWorldRecordsMetacopyOff(t *testing.T) {
	e, src := testEngine(t)
	ctx := context.Background()
	if _, err := e.Create(ctx, CreateOptions{Name: "mc", Source: src}); err != nil {
		t.Fatal(err)
	}
	toml, err := os.ReadFile(e.Paths.WorldFile("mc"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(toml), "metacopy_off = true") {
		t.Fatalf("world.toml of a new local World lacks metacopy_off = true:\n%s", toml)
	}
	w, err := e.World("mc")
	if err != nil || !w.Layers(e.Paths).NoFileMarks {
		t.Fatalf("reloaded World: NoFileMarks unset (%v)", err)
	}

	// An odd upper: d0/f0.txt as a metacopy copy-up (sparse, same size and
	// mode, data in the lower), written by hand as an old mount could have.
	lower, err := os.ReadFile(filepath.Join(src, "d0/f0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	up := filepath.Join(e.Paths.UpperOf(w), "d0/f0.txt")
	if err := os.MkdirAll(filepath.Dir(up), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(up, make([]byte, len(lower)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(up, "trusted.overlay.metacopy", nil, 0); err != nil {
		t.Fatal(err)
	}

	// Unmarked (an older World): the metacopy mark is read, no change.
	old := strings.Replace(string(toml), "metacopy_off = true\n", "", 1)
	if err := os.WriteFile(e.Paths.WorldFile("mc"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err = e.World("mc")
	if err != nil {
		t.Fatal(err)
	}
	if w.MetacopyOff {
		t.Fatal("a world.toml without metacopy_off loaded as MetacopyOff")
	}
	cs, err := e.Changes(ctx, w, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Changes) != 0 {
		t.Errorf("status of an unmarked World with a metacopy file = %v, want no change (its data is the lower's)", cs.Changes)
	}
}
