package panes

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/overlay"
)

// oneThings is "1 <plural>" or a "(s)" plural: what a count of one must
// never read like.
var oneThings = regexp.MustCompile(`(^|[^0-9,])1 (paths|hunks|conflicts|files|lines|snapshots|sessions|edits|changed paths|overlapping edits)\b|\(s\)`)

// Panes say "1 path", "1 hunk", "1 overlapping edit": never "1 paths" or
// "edit(s)".
func TestPluralsOfOne(t *testing.T) {
	env := testEnv(t, "dark")
	var views []string

	ch := NewChanges(env).SetSize(0, 10)
	ch, _ = ch.SetChanges("w", []overlay.Change{{Path: "a.txt", Kind: overlay.Modified, Type: overlay.TypeFile}}, nil)
	views = append(views, ch.SetPicks(map[string]PickState{"a.txt": PickAll}).View(80, 10, true))

	tl := NewTimeline(env).SetRows("w", []SnapshotRow{{ID: "s-1", Time: fixedNow, Message: "one", Files: 1}}, nil).SetSize(0, 5)
	tl.Now = fixedNow
	views = append(views, tl.View(80, 5, true))

	old, nw := "a\nb\nc\n", "a\nB\nc\n"
	df := NewDiff(env).SetSize(80, 20).SetFile(DiffFile{World: "w", Path: "a.txt", Old: old, New: nw})
	df, _ = df.Do(keymap.DiffNextHunk)
	df, _ = df.Do(keymap.DiffPick)
	views = append(views, df.View(80, 20, true))

	cf := NewConflicts(env, "w", []ConflictFile{{
		Path: "a.txt", Reason: "1 overlapping edit(s) in the World and the source",
		Regions: []diffview.Conflict{{}}, Base: "a\n", Ours: "b\n", Theirs: "c\n",
	}})
	views = append(views, cf.View(80, 20))
	if _, err := cf.Resolve(0); err != nil {
		views = append(views, err.Error())
	}

	for _, v := range views {
		plain := ansiStrip(v)
		if m := oneThings.FindString(plain); m != "" {
			t.Errorf("%q in:\n%s", m, plain)
		}
	}
	if !strings.Contains(ansiStrip(views[3]), "1 overlapping edit in") {
		t.Errorf("conflict reason:\n%s", ansiStrip(views[3]))
	}
}
