package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine"
)

// After s, the cursor is on the snapshot just taken, not on the row it
// was on; enter on it opens an info box that closes with enter and says
// nothing of confirming.
func TestTimelineSnapshotCursorAndInfoBox(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w1", "echo one > b.txt")
	ctx := context.Background()
	for _, msg := range []string{"first", "second"} {
		if _, err := eng.Snapshot(ctx, "w1", engine.SnapshotOptions{Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("5")
	first := d.m.timeline.Selected()
	d.keys("s")
	d.typeText("third")
	d.keys("enter")
	tl, err := eng.Timeline("w1")
	if err != nil {
		t.Fatal(err)
	}
	var newest engine.Snapshot
	for _, s := range tl.Snapshots {
		if s.Message == "third" {
			newest = s
		}
	}
	if newest.ID == "" {
		t.Fatalf("no snapshot taken:\n%s", d.screen())
	}
	if got := d.m.timeline.Selected(); got != newest.ID {
		t.Fatalf("cursor on %s (was %s), want the new snapshot %s:\n%s", got, first, newest.ID, d.screen())
	}

	d.keys("enter")
	if d.m.dialog == nil {
		t.Fatalf("enter opens nothing:\n%s", d.screen())
	}
	if scr := d.screen(); strings.Contains(strings.ToLower(scr), "confirm") || !strings.Contains(scr, "close") {
		t.Errorf("the info box offers to confirm:\n%s", scr)
	}
	d.keys("enter")
	if d.m.dialog != nil {
		t.Error("enter does not close the info box")
	}
	d.keys("enter", "esc")
	if d.m.dialog != nil {
		t.Error("esc does not close the info box")
	}
}
