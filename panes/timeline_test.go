package panes

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/stratahq/strata/keymap"
)

// The keys labelled "older snapshot" and "newer snapshot" move that way.
func TestTimelineKeysMatchTheirHelp(t *testing.T) {
	env := testEnv(t, "dark")
	byDesc := map[string]string{}
	for _, a := range env.Keys.Area(keymap.Timeline) {
		byDesc[a.Desc()] = a.Name
	}
	for _, c := range []struct {
		desc  string
		older bool
	}{{"older snapshot", true}, {"newer snapshot", false}} {
		name, ok := byDesc[c.desc]
		if !ok {
			t.Fatalf("no timeline action says %q", c.desc)
		}
		p := NewTimeline(env).SetRows("w", fixtureSnapshots(), nil).SetSize(0, 10)
		p, _ = p.Do(keymap.TimelineDown) // snap-0002, between older and newer
		rows := fixtureSnapshots()
		before := rows[1].Time
		p, _ = p.Do(name)
		var after SnapshotRow
		for _, r := range rows {
			if r.ID == p.Selected() {
				after = r
			}
		}
		if got := after.Time.Before(before); got != c.older {
			t.Errorf("%q (%s) moved from %v to %s at %v", c.desc, name, before, after.ID, after.Time)
		}
	}
}

// Automatic snapshots read muted: no bold id, no plain text, unlike the
// person's own.
func TestTimelineAutoSnapshotsMuted(t *testing.T) {
	env := testEnv(t, "dark")
	st := env.Styles
	rows := fixtureSnapshots()
	rows[2].Message = "fork into 2"
	p := NewTimeline(env).SetRows("w", rows, nil).SetSize(0, 10)
	p.Now = fixedNow
	lines := strings.Split(p.View(80, 10, false), "\n")
	var auto, manual string
	for _, l := range lines {
		switch {
		case strings.Contains(ansi.Strip(l), "fork into 2"):
			auto = l
		case strings.Contains(ansi.Strip(l), "auth works"):
			manual = l
		}
	}
	if !strings.Contains(manual, st.Bold.Render("snap-000")) {
		t.Fatalf("test premise: a manual snapshot's id is bold: %q", manual)
	}
	if strings.Contains(auto, st.Bold.Render("snap-000")) || !strings.Contains(auto, st.Muted.Render(ansi.Strip(strings.TrimRight(auto, " "))[len("├─"):])) {
		t.Errorf("automatic snapshot not muted: %q", auto)
	}
}

// An info box closes with enter or esc, sends nothing and says close.
func TestInfoBoxOnlyTells(t *testing.T) {
	env := testEnv(t, "dark")
	d := NewInfo(env, "Changes in snapshot snap-0002", []string{"A b.txt"})
	if v := ansi.Strip(d.View(80)); strings.Contains(strings.ToLower(v), "confirm") || !strings.Contains(v, "close") {
		t.Errorf("info box:\n%s", v)
	}
	for _, k := range []string{"enter", "esc"} {
		_, cmd, done := d.Update(keyPress(k))
		if !done || cmd != nil {
			t.Errorf("%s: done %v cmd %v", k, done, cmd != nil)
		}
	}
}

// strata's own snapshot messages name snapshots by their full id; the
// Timeline shows those ids as short as its id column, so "before rollback
// to …" keeps its target in the 46-column pane of a 120x40 screen.
func TestTimelineAutoMessageShortIDs(t *testing.T) {
	rows := []SnapshotRow{
		{ID: "s-fc4df66e7c12", Time: fixedNow, Message: "first try", Files: 3},
		{ID: "s-c81407aa90be", Parent: "s-fc4df66e7c12", Time: fixedNow, Message: "before rollback to s-fc4df66e7c12", Auto: true, Files: 3},
	}
	p := NewTimeline(testEnv(t, "dark")).SetRows("w", rows, nil).SetSize(0, 5)
	p.Now = fixedNow
	if view := ansi.Strip(p.View(46, 5, true)); !strings.Contains(view, "○ s-c81407 0s before rollback to s-fc4df6 ·") {
		t.Errorf("automatic snapshot at 46 columns:\n%s", view)
	}
	if view := ansi.Strip(p.View(80, 5, true)); !strings.Contains(view, "○ s-c81407 0s before rollback to s-fc4df6 · 3 files") {
		t.Errorf("automatic snapshot at 80 columns:\n%s", view)
	}
}
