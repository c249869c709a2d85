package engine

import (
	"strings"
	"testing"
)

// The timeline tree draws a snapshot's only child on its parent's line and
// branches under it: after a rollback the "before rollback" snapshot (a
// child of what was rolled away) must not read as a sibling of its parent.
func TestTimelineTreeKeepsLinesOfDescent(t *testing.T) {
	tl := &Timeline{Snapshots: []Snapshot{
		{ID: "one"},
		{ID: "two", Parent: "one"},
		{ID: "before-rollback", Parent: "two"},
		{ID: "three", Parent: "one"},
		{ID: "fork", Parent: "three"},
		{ID: "four", Parent: "fork"},
	}}
	var b strings.Builder
	for _, l := range TimelineTree(tl) {
		b.WriteString(l.Prefix + l.Snapshot.ID + "\n")
	}
	want := "one\n" +
		"├─two\n" +
		"│ before-rollback\n" +
		"└─three\n" +
		"  fork\n" +
		"  four\n"
	if b.String() != want {
		t.Errorf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
}
