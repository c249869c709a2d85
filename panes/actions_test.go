package panes

import (
	"errors"
	"strings"
	"testing"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/keymap"
)

// Every action of every pane area and of dialogs, driven through Update
// with the action's first key (so the keymap and the pane agree), each with
// an assertion on the state it must produce.

func worldsFixture(t *testing.T) Worlds {
	p := NewWorlds(testEnv(t, "dark"))
	p, _ = p.SetRows(fixtureWorldRows())
	return p.SetSize(0, 10)
}

func transcriptFixture(t *testing.T) Transcript {
	p := NewTranscript(testEnv(t, "dark"))
	p, _ = p.SetSessions("w", fixtureSessions())
	return p.SetSize(0, 10).Append(fixtureTranscript())
}

func changesFixture(t *testing.T) Changes {
	p := NewChanges(testEnv(t, "dark"))
	p, _ = p.SetChanges("w", fixtureChanges(), nil)
	return p.SetSize(0, 10)
}

func diffFixture(t *testing.T) Diff {
	old, nw := fixtureOldNew()
	return NewDiff(testEnv(t, "dark")).SetSize(80, 20).SetFile(DiffFile{World: "w", Path: "f.txt", Old: old, New: nw})
}

func timelineFixture(t *testing.T) Timeline {
	return NewTimeline(testEnv(t, "dark")).SetRows("w", fixtureSnapshots(), nil).SetSize(0, 10)
}

// firstKey presses the action's first bound key.
func firstKey(t *testing.T, name string) tea.KeyPressMsg {
	t.Helper()
	k := keymap.Default().Binding(name).Keys()[0]
	switch k {
	case "pgup":
		return tea.KeyPressMsg{Code: tea.KeyPgUp}
	case "pgdown":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "home":
		return tea.KeyPressMsg{Code: tea.KeyHome}
	case "end":
		return tea.KeyPressMsg{Code: tea.KeyEnd}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	}
	return keyPress(k)
}

func wantAction(t *testing.T, cmd tea.Cmd, action string) ActionMsg {
	t.Helper()
	m, ok := run(cmd).(ActionMsg)
	if !ok || m.Action != action {
		t.Fatalf("got %#v, want ActionMsg %s", run(cmd), action)
	}
	return m
}

var paneActionTests = map[string]func(t *testing.T){
	keymap.WorldsDown: func(t *testing.T) {
		p, cmd := worldsFixture(t).Update(firstKey(t, keymap.WorldsDown))
		if p.Selected() != "fix-flaky-test" || run(cmd) != (WorldsSelectedMsg{Name: "fix-flaky-test"}) {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.WorldsUp: func(t *testing.T) {
		p, _ := worldsFixture(t).Do(keymap.WorldsBottom)
		p, _ = p.Update(firstKey(t, keymap.WorldsUp))
		if p.Selected() != "docs" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.WorldsTop: func(t *testing.T) {
		p, _ := worldsFixture(t).Do(keymap.WorldsBottom)
		p, _ = p.Update(firstKey(t, keymap.WorldsTop))
		if p.Selected() != "upgrade-deps" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.WorldsBottom: func(t *testing.T) {
		p, _ := worldsFixture(t).Update(firstKey(t, keymap.WorldsBottom))
		if p.Selected() != "remote-build" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.WorldsNew: func(t *testing.T) {
		_, cmd := worldsFixture(t).Update(firstKey(t, keymap.WorldsNew))
		wantAction(t, cmd, keymap.WorldsNew)
	},
	keymap.WorldsRemove: func(t *testing.T) {
		_, cmd := worldsFixture(t).Update(firstKey(t, keymap.WorldsRemove))
		if m := wantAction(t, cmd, keymap.WorldsRemove); m.World != "upgrade-deps" {
			t.Errorf("world %q", m.World)
		}
	},
	keymap.WorldsRun: func(t *testing.T) {
		_, cmd := worldsFixture(t).Update(firstKey(t, keymap.WorldsRun))
		wantAction(t, cmd, keymap.WorldsRun)
	},
	keymap.WorldsOpen: func(t *testing.T) {
		_, cmd := worldsFixture(t).Update(firstKey(t, keymap.WorldsOpen))
		wantAction(t, cmd, keymap.WorldsOpen)
	},

	keymap.TranscriptUp: func(t *testing.T) {
		p, _ := transcriptFixture(t).Update(firstKey(t, keymap.TranscriptUp))
		if p.Following() {
			t.Error("still following after scrolling up")
		}
	},
	keymap.TranscriptDown: func(t *testing.T) {
		p, _ := transcriptFixture(t).Scroll(-5)
		p, _ = p.Update(firstKey(t, keymap.TranscriptDown))
		if p.Following() {
			t.Error("one line down from five up follows")
		}
		p, _ = p.Scroll(10)
		if !p.Following() {
			t.Error("scrolling to the end does not follow again")
		}
	},
	keymap.TranscriptPageUp: func(t *testing.T) {
		p, _ := transcriptFixture(t).Update(firstKey(t, keymap.TranscriptPageUp))
		if p.Following() || !strings.Contains(p.View(80, 10, true), "more") {
			t.Errorf("page up: following=%v", p.Following())
		}
	},
	keymap.TranscriptPageDown: func(t *testing.T) {
		p, _ := transcriptFixture(t).Scroll(-30)
		before := p.View(80, 10, true)
		p, _ = p.Update(firstKey(t, keymap.TranscriptPageDown))
		if p.View(80, 10, true) == before {
			t.Error("page down did not move")
		}
	},
	keymap.TranscriptTop: func(t *testing.T) {
		p, _ := transcriptFixture(t).Update(firstKey(t, keymap.TranscriptTop))
		if !strings.Contains(p.View(80, 10, true), "step 1: compiling") {
			t.Error("top does not show the first line")
		}
	},
	keymap.TranscriptFollow: func(t *testing.T) {
		p, _ := transcriptFixture(t).Scroll(-20)
		p, _ = p.Update(firstKey(t, keymap.TranscriptFollow))
		p = p.Append([]byte("\nbrand new line\n"))
		if !p.Following() || !strings.Contains(p.View(80, 10, true), "brand new line") {
			t.Error("follow does not show new output")
		}
	},
	keymap.TranscriptSearch: func(t *testing.T) {
		p, _ := transcriptFixture(t).Update(firstKey(t, keymap.TranscriptSearch))
		if !p.Searching() {
			t.Fatal("search prompt not open")
		}
		for _, k := range typeText("FAIL") {
			p, _ = p.Update(k)
		}
		p, _ = p.Update(keyPress("enter"))
		if p.Matches() != 6 || p.Query() != "FAIL" {
			t.Errorf("%d matches for %q", p.Matches(), p.Query())
		}
	},
	keymap.TranscriptNextMatch: func(t *testing.T) {
		p := transcriptFixture(t).runSearch("fail")
		first := p.matchIdx
		p, _ = p.Update(firstKey(t, keymap.TranscriptNextMatch))
		if p.matchIdx != (first+1)%p.Matches() {
			t.Errorf("match %d after %d", p.matchIdx, first)
		}
	},
	keymap.TranscriptPrevMatch: func(t *testing.T) {
		p := transcriptFixture(t).runSearch("fail")
		p, _ = p.Update(firstKey(t, keymap.TranscriptPrevMatch))
		if p.matchIdx != p.Matches()-2 || !strings.Contains(ansiStrip(p.View(80, 10, true)), "step 50") {
			t.Errorf("match %d", p.matchIdx)
		}
	},
	keymap.TranscriptPrevSession: func(t *testing.T) {
		p, cmd := transcriptFixture(t).Update(firstKey(t, keymap.TranscriptPrevSession))
		if p.Session() != "s-0001aaaaaaaa" || run(cmd) != (TranscriptSessionMsg{World: "w", Session: "s-0001aaaaaaaa"}) || p.Lines() != 1 {
			t.Errorf("session %q, %d lines", p.Session(), p.Lines())
		}
	},
	keymap.TranscriptNextSession: func(t *testing.T) {
		p, _ := transcriptFixture(t).Do(keymap.TranscriptPrevSession)
		p, cmd := p.Update(firstKey(t, keymap.TranscriptNextSession))
		if p.Session() != "s-0002bbbbbbbb" || cmd == nil {
			t.Errorf("session %q", p.Session())
		}
	},
	keymap.TranscriptAttach: func(t *testing.T) {
		_, cmd := transcriptFixture(t).Update(firstKey(t, keymap.TranscriptAttach))
		if m := wantAction(t, cmd, keymap.TranscriptAttach); m.Session != "s-0002bbbbbbbb" {
			t.Errorf("session %q", m.Session)
		}
	},
	keymap.TranscriptRun: func(t *testing.T) {
		_, cmd := transcriptFixture(t).Update(firstKey(t, keymap.TranscriptRun))
		wantAction(t, cmd, keymap.TranscriptRun)
	},
	keymap.TranscriptKill: func(t *testing.T) {
		_, cmd := transcriptFixture(t).Update(firstKey(t, keymap.TranscriptKill))
		wantAction(t, cmd, keymap.TranscriptKill)
	},

	keymap.ChangesDown: func(t *testing.T) {
		p, cmd := changesFixture(t).Update(firstKey(t, keymap.ChangesDown))
		if p.Selected() != "cmd/app/main.go" || run(cmd) != (ChangesSelectedMsg{World: "w", Path: "cmd/app/main.go"}) {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.ChangesUp: func(t *testing.T) {
		p, _ := changesFixture(t).Do(keymap.ChangesBottom)
		p, _ = p.Update(firstKey(t, keymap.ChangesUp))
		if p.Selected() != "internal/legacy.go" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.ChangesPageDown: func(t *testing.T) {
		p, _ := changesFixture(t).Update(firstKey(t, keymap.ChangesPageDown))
		if p.Selected() != "link" { // a page is 8 rows: 10 lines, a header, one kept
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.ChangesPageUp: func(t *testing.T) {
		p, _ := changesFixture(t).Do(keymap.ChangesBottom)
		p, _ = p.Update(firstKey(t, keymap.ChangesPageUp))
		if p.Selected() != "README.md" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.ChangesTop: func(t *testing.T) {
		p, _ := changesFixture(t).Do(keymap.ChangesBottom)
		p, _ = p.Update(firstKey(t, keymap.ChangesTop))
		if p.Selected() != "README.md" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.ChangesBottom: func(t *testing.T) {
		p, _ := changesFixture(t).Update(firstKey(t, keymap.ChangesBottom))
		if p.Selected() != "link" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.ChangesOpen: func(t *testing.T) {
		_, cmd := changesFixture(t).Update(firstKey(t, keymap.ChangesOpen))
		if m := wantAction(t, cmd, keymap.ChangesOpen); m.Path != "README.md" {
			t.Errorf("path %q", m.Path)
		}
	},
	keymap.ChangesPickAll: func(t *testing.T) {
		_, cmd := changesFixture(t).Update(firstKey(t, keymap.ChangesPickAll))
		m, ok := run(cmd).(PickPathsMsg)
		if !ok || !m.Pick || len(m.Paths) != len(fixtureChanges()) {
			t.Fatalf("got %#v", run(cmd))
		}
		all := map[string]PickState{}
		for _, c := range fixtureChanges() {
			all[c.Path] = PickAll
		}
		_, cmd = changesFixture(t).SetPicks(all).Update(firstKey(t, keymap.ChangesPickAll))
		if m := run(cmd).(PickPathsMsg); m.Pick {
			t.Error("pick all with everything picked does not unpick")
		}
		// Only what the filter shows.
		p, _ := changesFixture(t).Do(keymap.ChangesKind) // A only
		_, cmd = p.Do(keymap.ChangesPickAll)
		if m := run(cmd).(PickPathsMsg); len(m.Paths) != 3 {
			t.Errorf("pick all under kind A: %v", m.Paths)
		}
	},
	keymap.ChangesFold: func(t *testing.T) {
		p, _ := changesFixture(t).Do(keymap.ChangesTree)
		n := len(p.rows)
		for p.rowPath(p.rows[p.list.Cursor]) != "internal/" {
			p, _ = p.Do(keymap.ChangesDown)
		}
		p, _ = p.Update(firstKey(t, keymap.ChangesFold))
		if len(p.rows) != n-4 || p.rows[p.list.Cursor].hidden != 4 || !strings.Contains(ansiStrip(p.View(80, 20, true)), "▸ internal/  ▸ 4 rows folded") {
			t.Fatalf("fold: %d rows of %d\n%s", len(p.rows), n, ansiStrip(p.View(80, 20, true)))
		}
		// Space on the folded heading picks what it hides.
		_, cmd := p.Do(keymap.ChangesPick)
		if m := run(cmd).(PickPathsMsg); len(m.Paths) != 3 {
			t.Errorf("pick on a folded heading: %v", m.Paths)
		}
		p, _ = p.Do(keymap.ChangesFold)
		if len(p.rows) != n {
			t.Errorf("unfold: %d rows, want %d", len(p.rows), n)
		}
	},
	keymap.ChangesPick: func(t *testing.T) {
		_, cmd := changesFixture(t).Update(firstKey(t, keymap.ChangesPick))
		m, ok := run(cmd).(PickPathsMsg)
		if !ok || !m.Pick || len(m.Paths) != 1 || m.Paths[0] != "README.md" {
			t.Fatalf("got %#v", run(cmd))
		}
		// Picked already: space unpicks.
		p := changesFixture(t).SetPicks(map[string]PickState{"README.md": PickAll})
		_, cmd = p.Update(firstKey(t, keymap.ChangesPick))
		if m := run(cmd).(PickPathsMsg); m.Pick {
			t.Error("picking a picked path picks it again")
		}
		// On a directory heading of the tree: every path under it.
		p, _ = changesFixture(t).Do(keymap.ChangesTree)
		for i, r := range p.rows {
			if r.change < 0 && r.dir == "internal/" {
				p.list.Cursor = i
			}
		}
		_, cmd = p.Update(firstKey(t, keymap.ChangesPick))
		if m := run(cmd).(PickPathsMsg); strings.Join(m.Paths, ",") != "internal/auth/token.go,internal/auth/token_test.go,internal/legacy.go" {
			t.Errorf("heading picks %v", m.Paths)
		}
	},
	keymap.ChangesTree: func(t *testing.T) {
		p, _ := changesFixture(t).Update(firstKey(t, keymap.ChangesTree))
		if !p.Tree() || !strings.Contains(ansiStrip(p.View(60, 20, true)), "▾ internal/") {
			t.Error("tree view has no headings")
		}
	},
	keymap.ChangesFilter: func(t *testing.T) {
		p, _ := changesFixture(t).Update(firstKey(t, keymap.ChangesFilter))
		for _, k := range typeText("auth") {
			p, _ = p.Update(k)
		}
		p, _ = p.Update(keyPress("enter"))
		if got := strings.Join(p.Visible(), ","); got != "internal/auth/token.go,internal/auth/token_test.go" || p.Editing() {
			t.Errorf("visible %s", got)
		}
	},
	keymap.ChangesKind: func(t *testing.T) {
		p, _ := changesFixture(t).Update(firstKey(t, keymap.ChangesKind))
		p, _ = p.Update(firstKey(t, keymap.ChangesKind))
		if _, kind := p.Filter(); kind != "M" || len(p.Visible()) != 3 {
			t.Errorf("kind %q, %v", kind, p.Visible())
		}
	},
	keymap.ChangesClearFilter: func(t *testing.T) {
		p, _ := changesFixture(t).Do(keymap.ChangesKind)
		p, _ = p.Update(firstKey(t, keymap.ChangesClearFilter))
		if len(p.Visible()) != len(fixtureChanges()) {
			t.Errorf("%d visible", len(p.Visible()))
		}
	},
	keymap.ChangesApply: func(t *testing.T) {
		_, cmd := changesFixture(t).Update(firstKey(t, keymap.ChangesApply))
		wantAction(t, cmd, keymap.ChangesApply)
	},

	keymap.DiffDown: func(t *testing.T) {
		p := diffFixture(t)
		before := p.cur
		p, _ = p.Update(firstKey(t, keymap.DiffDown))
		if p.cur != before+1 {
			t.Errorf("cursor %d", p.cur)
		}
	},
	keymap.DiffUp: func(t *testing.T) {
		p, _ := diffFixture(t).Do(keymap.DiffNextHunk)
		before := p.cur
		p, _ = p.Update(firstKey(t, keymap.DiffUp))
		if p.cur != before-1 {
			t.Errorf("cursor %d", p.cur)
		}
	},
	keymap.DiffNextHunk: func(t *testing.T) {
		p, _ := diffFixture(t).Update(firstKey(t, keymap.DiffNextHunk))
		p, _ = p.Update(firstKey(t, keymap.DiffNextHunk))
		if p.CurrentHunk() != 2 {
			t.Errorf("hunk %d", p.CurrentHunk())
		}
	},
	keymap.DiffPrevHunk: func(t *testing.T) {
		p, _ := diffFixture(t).Do(keymap.DiffNextHunk)
		p, _ = p.Update(firstKey(t, keymap.DiffPrevHunk))
		if p.CurrentHunk() != 0 {
			t.Errorf("hunk %d", p.CurrentHunk())
		}
	},
	keymap.DiffPageDown: func(t *testing.T) {
		p, _ := diffFixture(t).Update(firstKey(t, keymap.DiffPageDown))
		if p.cur < 15 {
			t.Errorf("cursor %d", p.cur)
		}
	},
	keymap.DiffPageUp: func(t *testing.T) {
		p, _ := diffFixture(t).Do(keymap.DiffPageDown)
		p, _ = p.Do(keymap.DiffPageDown)
		before := p.cur
		p, _ = p.Update(firstKey(t, keymap.DiffPageUp))
		if p.cur >= before {
			t.Errorf("cursor %d, was %d", p.cur, before)
		}
	},
	keymap.DiffPick: func(t *testing.T) {
		p, _ := diffFixture(t).Do(keymap.DiffNextHunk)
		p, cmd := p.Update(firstKey(t, keymap.DiffPick))
		m, ok := run(cmd).(DiffPicksMsg)
		if !ok || m.State != PickPartial || m.Path != "f.txt" {
			t.Fatalf("got %#v", run(cmd))
		}
		if got := p.Selection().PickedHunks(); len(got) != 1 || got[0] != 1 {
			t.Errorf("picked hunks %v", got)
		}
		_, cmd = p.Update(firstKey(t, keymap.DiffPick))
		if run(cmd).(DiffPicksMsg).State != PickNone {
			t.Error("second space does not unpick")
		}
	},
	keymap.DiffRange: func(t *testing.T) {
		p := diffFixture(t) // cursor on hunk 1's header
		p, _ = p.Do(keymap.DiffDown)
		p, _ = p.Do(keymap.DiffDown)
		p, _ = p.Do(keymap.DiffDown) // the "-" line
		p, _ = p.Update(firstKey(t, keymap.DiffRange))
		if !p.RangeActive() {
			t.Fatal("range not started")
		}
		p, _ = p.Do(keymap.DiffPick) // a one-line range: only the removal
		h, l := p.Selection().Count()
		if h != 1 || l != 1 || p.Selection().HunkState(0) != diffview.PickedPartial || p.RangeActive() {
			t.Errorf("picked %d hunks %d lines", h, l)
		}
	},
	keymap.DiffVsSource: func(t *testing.T) {
		// Without drift there is no other view.
		if p, _ := diffFixture(t).Update(firstKey(t, keymap.DiffVsSource)); p.VsSource() {
			t.Error("toggled to the source view without drift")
		}
		p := NewDiff(testEnv(t, "dark")).SetSize(80, 20).SetFile(fixtureDrift())
		if v := p.View(80, 20, true); !strings.Contains(v, "source changed since the World's base: apply will merge") || strings.Contains(v, "teammate") {
			t.Fatalf("base view:\n%s", v)
		}
		p, _ = p.Update(firstKey(t, keymap.DiffVsSource))
		if v := p.View(80, 20, true); !p.VsSource() || !strings.Contains(v, "teammate") || !strings.Contains(v, "view only") {
			t.Fatalf("source view:\n%s", v)
		}
		// Nothing is picked in the source view; back on the base, picks work.
		p, _ = p.Do(keymap.DiffNextHunk)
		if _, cmd := p.Do(keymap.DiffPick); cmd != nil {
			t.Error("picked in the source view")
		}
		p, _ = p.Update(firstKey(t, keymap.DiffVsSource))
		p, cmd := p.Do(keymap.DiffPick)
		if p.VsSource() || cmd == nil || run(cmd).(DiffPicksMsg).State != PickPartial {
			t.Error("no pick back on the base diff")
		}
	},
	keymap.DiffSideBySide: func(t *testing.T) {
		p, _ := diffFixture(t).Update(firstKey(t, keymap.DiffSideBySide))
		if !p.SideBySide() || !strings.Contains(p.View(80, 20, true), "│") {
			t.Error("not side by side")
		}
	},
	keymap.DiffWrap: func(t *testing.T) {
		p, _ := diffFixture(t).Update(firstKey(t, keymap.DiffWrap))
		if !p.Wrap() {
			t.Error("wrap not on")
		}
	},
	keymap.DiffLessContext: func(t *testing.T) {
		p, _ := diffFixture(t).Do(keymap.DiffPick)
		p, _ = p.Update(firstKey(t, keymap.DiffLessContext))
		p, _ = p.Update(firstKey(t, keymap.DiffLessContext))
		p, _ = p.Update(firstKey(t, keymap.DiffLessContext))
		if p.Context() != 0 || len(p.FileDiff().Hunks[0].Lines) != 2 {
			t.Errorf("context %d, %d lines", p.Context(), len(p.FileDiff().Hunks[0].Lines))
		}
		if _, l := p.Selection().Count(); l != 2 {
			t.Errorf("picks lost on re-diff: %d lines", l)
		}
	},
	keymap.DiffMoreContext: func(t *testing.T) {
		p, _ := diffFixture(t).Update(firstKey(t, keymap.DiffMoreContext))
		if p.Context() != 4 || len(p.FileDiff().Hunks[0].Lines) != 8 { // lines 1-7, the change at 3
			t.Errorf("context %d, %d lines", p.Context(), len(p.FileDiff().Hunks[0].Lines))
		}
	},
	keymap.DiffEdit: func(t *testing.T) {
		_, cmd := diffFixture(t).Update(firstKey(t, keymap.DiffEdit))
		if m := wantAction(t, cmd, keymap.DiffEdit); m.Path != "f.txt" || m.World != "w" {
			t.Errorf("%#v", m)
		}
	},
	keymap.DiffApply: func(t *testing.T) {
		_, cmd := diffFixture(t).Update(firstKey(t, keymap.DiffApply))
		wantAction(t, cmd, keymap.DiffApply)
	},
	keymap.DiffNextFile: func(t *testing.T) {
		_, cmd := diffFixture(t).Update(firstKey(t, keymap.DiffNextFile))
		wantAction(t, cmd, keymap.DiffNextFile)
	},
	keymap.DiffPrevFile: func(t *testing.T) {
		_, cmd := diffFixture(t).Update(firstKey(t, keymap.DiffPrevFile))
		wantAction(t, cmd, keymap.DiffPrevFile)
	},
	keymap.DiffBack: func(t *testing.T) {
		_, cmd := diffFixture(t).Update(firstKey(t, keymap.DiffBack))
		wantAction(t, cmd, keymap.DiffBack)
	},

	keymap.TimelineDown: func(t *testing.T) {
		p, _ := timelineFixture(t).Update(firstKey(t, keymap.TimelineDown))
		if p.Selected() != "snap-0002" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.TimelineUp: func(t *testing.T) {
		p, _ := timelineFixture(t).Do(keymap.TimelineDown)
		p, _ = p.Update(firstKey(t, keymap.TimelineUp))
		if p.Selected() != "snap-0001" {
			t.Errorf("selected %q", p.Selected())
		}
	},
	keymap.TimelineSnapshot: func(t *testing.T) {
		_, cmd := timelineFixture(t).Update(firstKey(t, keymap.TimelineSnapshot))
		wantAction(t, cmd, keymap.TimelineSnapshot)
	},
	keymap.TimelineRollback: func(t *testing.T) {
		_, cmd := timelineFixture(t).Update(firstKey(t, keymap.TimelineRollback))
		if m := wantAction(t, cmd, keymap.TimelineRollback); m.Snapshot != "snap-0001" {
			t.Errorf("%#v", m)
		}
	},
	keymap.TimelineFork: func(t *testing.T) {
		p, _ := timelineFixture(t).Do(keymap.TimelineDown)
		_, cmd := p.Update(firstKey(t, keymap.TimelineFork))
		if m := wantAction(t, cmd, keymap.TimelineFork); m.Snapshot != "snap-0002" {
			t.Errorf("%#v", m)
		}
	},
	keymap.TimelineShow: func(t *testing.T) {
		p, _ := timelineFixture(t).Do(keymap.TimelineDown)
		_, cmd := p.Update(firstKey(t, keymap.TimelineShow))
		if m := wantAction(t, cmd, keymap.TimelineShow); m.Parent != "snap-0001" {
			t.Errorf("%#v", m)
		}
	},

	keymap.DialogConfirm: func(t *testing.T) {
		d := NewPrompt(testEnv(t, "dark"), "Run", "command", "", nil, func(s string) tea.Msg { return s })
		for _, k := range typeText("make test") {
			d, _, _ = d.Update(k)
		}
		_, cmd, done := d.Update(firstKey(t, keymap.DialogConfirm))
		if !done || run(cmd) != "make test" {
			t.Errorf("done %v, %v", done, run(cmd))
		}
		// A typed confirm refuses the wrong text.
		tc := NewTypedConfirm(testEnv(t, "dark"), "Remove", nil, "w1", "yes")
		tc, cmd, done = tc.Update(firstKey(t, keymap.DialogConfirm))
		if done || cmd != nil || tc.Err == "" {
			t.Error("typed confirm accepted an empty answer")
		}
		for _, k := range typeText("w1") {
			tc, _, _ = tc.Update(k)
		}
		if _, cmd, done = tc.Update(firstKey(t, keymap.DialogConfirm)); !done || run(cmd) != "yes" {
			t.Error("typed confirm refused the right answer")
		}
	},
	keymap.DialogCancel: func(t *testing.T) {
		d := NewConfirm(testEnv(t, "dark"), "Sure?", nil, false, "yes")
		_, cmd, done := d.Update(firstKey(t, keymap.DialogCancel))
		if !done || cmd != nil {
			t.Error("cancel did not close without a message")
		}
	},
	keymap.DialogYes: func(t *testing.T) {
		d := NewConfirm(testEnv(t, "dark"), "Sure?", nil, false, "yes")
		_, cmd, done := d.Update(firstKey(t, keymap.DialogYes))
		if !done || run(cmd) != "yes" {
			t.Error("y did not confirm")
		}
		// In a text field, y is text.
		p := NewPrompt(testEnv(t, "dark"), "Run", "command", "", nil, func(s string) tea.Msg { return s })
		p, _, done = p.Update(firstKey(t, keymap.DialogYes))
		if done || p.Values()[0] != "y" {
			t.Errorf("y in a prompt: done %v value %q", done, p.Values()[0])
		}
	},
	keymap.DialogNo: func(t *testing.T) {
		d := NewConfirm(testEnv(t, "dark"), "Sure?", nil, false, "yes")
		_, cmd, done := d.Update(firstKey(t, keymap.DialogNo))
		if !done || cmd != nil {
			t.Error("n did not cancel")
		}
	},
	keymap.DialogNextField: func(t *testing.T) {
		d := NewForm(testEnv(t, "dark"), "New", []string{"name", "source"}, nil, func(v []string) tea.Msg { return strings.Join(v, "|") })
		d, _, _ = d.Update(keyPress("a"))
		d, _, _ = d.Update(firstKey(t, keymap.DialogNextField))
		d, _, _ = d.Update(keyPress("b"))
		if got := strings.Join(d.Values(), "|"); got != "a|b" {
			t.Errorf("values %s", got)
		}
	},
	keymap.DialogPrevField: func(t *testing.T) {
		d := NewForm(testEnv(t, "dark"), "New", []string{"name", "source"}, nil, nil)
		d, _, _ = d.Update(firstKey(t, keymap.DialogPrevField))
		d, _, _ = d.Update(keyPress("z"))
		if got := strings.Join(d.Values(), "|"); got != "|z" {
			t.Errorf("values %s", got)
		}
	},
	keymap.DialogHistoryPrev: func(t *testing.T) {
		d := NewPrompt(testEnv(t, "dark"), "Run", "command", "", []string{"make", "make test"}, nil)
		d, _, _ = d.Update(firstKey(t, keymap.DialogHistoryPrev))
		d, _, _ = d.Update(firstKey(t, keymap.DialogHistoryPrev))
		if d.Values()[0] != "make" {
			t.Errorf("value %q", d.Values()[0])
		}
	},
	keymap.DialogHistoryNext: func(t *testing.T) {
		d := NewPrompt(testEnv(t, "dark"), "Run", "command", "", []string{"make", "make test"}, nil)
		for _, k := range typeText("draft") {
			d, _, _ = d.Update(k)
		}
		d, _, _ = d.Update(firstKey(t, keymap.DialogHistoryPrev))
		d, _, _ = d.Update(firstKey(t, keymap.DialogHistoryNext))
		if d.Values()[0] != "draft" {
			t.Errorf("value %q", d.Values()[0])
		}
	},
}

func conflictsFixture(t *testing.T) Conflicts {
	return NewConflicts(testEnv(t, "dark"), "w", fixtureConflicts())
}

func init() {
	for _, tests := range []map[string]func(t *testing.T){conflictActionTests, compareActionTests} {
		for name, test := range tests {
			paneActionTests[name] = test
		}
	}
}

func compareFixture(t *testing.T) Compare { return fixtureCompare(testEnv(t, "dark")) }

var compareActionTests = map[string]func(t *testing.T){
	keymap.WorldsCompare: func(t *testing.T) {
		_, cmd := worldsFixture(t).Update(firstKey(t, keymap.WorldsCompare))
		if m := wantAction(t, cmd, keymap.WorldsCompare); m.World != "upgrade-deps" {
			t.Errorf("world %q", m.World)
		}
	},
	keymap.ChangesWriter: func(t *testing.T) {
		_, cmd := changesFixture(t).Update(firstKey(t, keymap.ChangesWriter))
		if m := wantAction(t, cmd, keymap.ChangesWriter); m.Path != "README.md" || m.World != "w" {
			t.Errorf("%+v", m)
		}
	},
	keymap.CompareDown: func(t *testing.T) {
		c, _ := compareFixture(t).Update(firstKey(t, keymap.CompareDown))
		if p, _ := c.Cursor(); p != "internal/auth/token.go" {
			t.Errorf("path %q", p)
		}
	},
	keymap.CompareUp: func(t *testing.T) {
		c, _ := compareFixture(t).Do(keymap.CompareDown)
		c, _ = c.Update(firstKey(t, keymap.CompareUp))
		if p, _ := c.Cursor(); p != "agree.txt" {
			t.Errorf("path %q", p)
		}
	},
	keymap.CompareRight: func(t *testing.T) {
		c, _ := compareFixture(t).Update(firstKey(t, keymap.CompareRight))
		c, _ = c.Update(firstKey(t, keymap.CompareRight))
		c, _ = c.Update(firstKey(t, keymap.CompareRight)) // stays on the last World
		if _, w := c.Cursor(); w != "try-3" {
			t.Errorf("world %q", w)
		}
	},
	keymap.CompareLeft: func(t *testing.T) {
		c, _ := compareFixture(t).Do(keymap.CompareRight)
		c, _ = c.Update(firstKey(t, keymap.CompareLeft))
		if _, w := c.Cursor(); w != "try-1" {
			t.Errorf("world %q", w)
		}
	},
	keymap.CompareAdopt: func(t *testing.T) {
		c, _ := compareFixture(t).Do(keymap.CompareDown)
		c, _ = c.Do(keymap.CompareRight)
		c, _ = c.Update(firstKey(t, keymap.CompareAdopt))
		if c.Chosen("internal/auth/token.go") != "try-2" {
			t.Fatalf("chosen %q", c.Chosen("internal/auth/token.go"))
		}
		c, _ = c.Update(firstKey(t, keymap.CompareAdopt)) // again: unadopt
		if c.Chosen("internal/auth/token.go") != "" {
			t.Error("adopt does not toggle")
		}
		// A World that did not change the path has nothing to adopt.
		c, _ = c.Do(keymap.CompareDown)
		c, _ = c.Update(firstKey(t, keymap.CompareAdopt))
		c, _ = c.Do(keymap.CompareLeft)
		if c.Chosen("old.go") != "try-2" {
			t.Fatalf("old.go: %q", c.Chosen("old.go"))
		}
		c, _ = c.Update(firstKey(t, keymap.CompareAdopt))
		if c.Chosen("old.go") != "try-2" || !strings.Contains(c.Err, "try-1 did not change old.go") {
			t.Errorf("adopted an unchanged path: %q %q", c.Chosen("old.go"), c.Err)
		}
	},
	keymap.CompareApply: func(t *testing.T) {
		c, cmd := compareFixture(t).Update(firstKey(t, keymap.CompareApply))
		if cmd != nil || !strings.Contains(c.Err, "nothing adopted") {
			t.Fatalf("applied nothing: %q", c.Err)
		}
		c, _ = c.Do(keymap.CompareAdopt) // agree.txt from try-1
		c, _ = c.Do(keymap.CompareDown)  // token.go
		c, _ = c.Do(keymap.CompareRight) // try-2
		c, _ = c.Do(keymap.CompareAdopt) // token.go from try-2
		_, cmd = c.Update(firstKey(t, keymap.CompareApply))
		m, ok := run(cmd).(CompareApplyMsg)
		if !ok || len(m.Picks) != 2 || m.Picks["try-1"][0] != "agree.txt" || m.Picks["try-2"][0] != "internal/auth/token.go" {
			t.Errorf("apply: %#v", run(cmd))
		}
	},
	keymap.CompareRemove: func(t *testing.T) {
		c, cmd := compareFixture(t).Update(firstKey(t, keymap.CompareRemove))
		if cmd != nil || c.Err == "" {
			t.Fatal("removed Worlds with nothing chosen")
		}
		c, _ = c.Do(keymap.CompareDown)
		c, _ = c.Do(keymap.CompareRight)
		c, _ = c.Do(keymap.CompareAdopt)
		_, cmd = c.Update(firstKey(t, keymap.CompareRemove))
		m, ok := run(cmd).(CompareRemoveMsg)
		if !ok || strings.Join(m.Worlds, ",") != "try-1,try-3" {
			t.Errorf("remove: %#v", run(cmd))
		}
	},
	keymap.CompareCancel: func(t *testing.T) {
		_, cmd := compareFixture(t).Update(firstKey(t, keymap.CompareCancel))
		if run(cmd) != (CompareClosedMsg{}) {
			t.Errorf("cancel: %#v", run(cmd))
		}
	},
}

var conflictActionTests = map[string]func(t *testing.T){
	keymap.ConflictsDown: func(t *testing.T) {
		c, _ := conflictsFixture(t).Update(firstKey(t, keymap.ConflictsDown))
		c, _ = c.Update(firstKey(t, keymap.ConflictsDown)) // stays on the last region
		if f, r := c.Current(); f != 0 || r != 1 {
			t.Errorf("at %d/%d", f, r)
		}
		if !strings.Contains(ansiStrip(c.View(80, 30)), "▸ conflict 2/2") {
			t.Errorf("cursor not drawn on region 2:\n%s", ansiStrip(c.View(80, 30)))
		}
	},
	keymap.ConflictsUp: func(t *testing.T) {
		c, _ := conflictsFixture(t).Do(keymap.ConflictsDown)
		c, _ = c.Update(firstKey(t, keymap.ConflictsUp))
		if _, r := c.Current(); r != 0 {
			t.Errorf("region %d", r)
		}
	},
	keymap.ConflictsNextFile: func(t *testing.T) {
		c, _ := conflictsFixture(t).Do(keymap.ConflictsDown)
		c, _ = c.Update(firstKey(t, keymap.ConflictsNextFile))
		if f, r := c.Current(); f != 1 || r != 0 {
			t.Errorf("at %d/%d", f, r)
		}
		c, _ = c.Update(firstKey(t, keymap.ConflictsNextFile)) // wraps
		if f, _ := c.Current(); f != 0 {
			t.Errorf("file %d", f)
		}
	},
	keymap.ConflictsPrevFile: func(t *testing.T) {
		c, _ := conflictsFixture(t).Update(firstKey(t, keymap.ConflictsPrevFile))
		if f, _ := c.Current(); f != 1 {
			t.Errorf("file %d", f)
		}
	},
	keymap.ConflictsOurs: func(t *testing.T) {
		c, _ := conflictsFixture(t).Update(firstKey(t, keymap.ConflictsOurs))
		if c.Choice(0, 0) != diffview.ChooseOurs {
			t.Fatalf("choice %v", c.Choice(0, 0))
		}
		if _, r := c.Current(); r != 1 {
			t.Errorf("the cursor did not move on to the open region")
		}
		c, _ = c.Update(firstKey(t, keymap.ConflictsOurs))
		r, err := c.Resolve(0)
		if err != nil || string(r.Content) != "a\nB ours\nc\nd\nE ours\nf\nG ours\n" || r.TheirsHash != "h1" {
			t.Errorf("resolve: %q %v", r.Content, err)
		}
		// A binary file cannot take ours from here.
		c, _ = c.Do(keymap.ConflictsNextFile)
		c, _ = c.Update(firstKey(t, keymap.ConflictsOurs))
		if c.Choice(1, 0) != diffview.Unresolved || !strings.Contains(c.Err, "binary") {
			t.Errorf("binary took ours: %v %q", c.Choice(1, 0), c.Err)
		}
	},
	keymap.ConflictsTheirs: func(t *testing.T) {
		c, _ := conflictsFixture(t).Update(firstKey(t, keymap.ConflictsTheirs))
		c, _ = c.Update(firstKey(t, keymap.ConflictsOurs))
		r, err := c.Resolve(0)
		// Region 1 theirs, region 2 ours, and the clean change (G) merged.
		if err != nil || string(r.Content) != "a\nB theirs\nc\nd\nE ours\nf\nG ours\n" {
			t.Errorf("resolve: %q %v", r.Content, err)
		}
		c, _ = c.Do(keymap.ConflictsNextFile)
		c, _ = c.Update(firstKey(t, keymap.ConflictsTheirs))
		if r, err := c.Resolve(1); err != nil || !r.Keep {
			t.Errorf("binary theirs: %+v %v", r, err)
		}
	},
	keymap.ConflictsBoth: func(t *testing.T) {
		c, _ := conflictsFixture(t).Update(firstKey(t, keymap.ConflictsBoth))
		c, _ = c.Update(firstKey(t, keymap.ConflictsTheirs))
		r, err := c.Resolve(0)
		if err != nil || string(r.Content) != "a\nB ours\nB theirs\nc\nd\nE theirs\nf\nG ours\n" {
			t.Errorf("resolve: %q %v", r.Content, err)
		}
	},
	keymap.ConflictsEdit: func(t *testing.T) {
		c, _ := conflictsFixture(t).Do(keymap.ConflictsOurs)
		c, cmd := c.Update(firstKey(t, keymap.ConflictsEdit))
		m, ok := run(cmd).(ConflictsEditMsg)
		want := "a\nB ours\nc\nd\n<<<<<<< ours\nE ours\n||||||| base\ne\n=======\nE theirs\n>>>>>>> theirs\nf\nG ours\n"
		if !ok || m.Path != "internal/auth/token.go" || m.Text != want {
			t.Fatalf("edit: %#v", run(cmd))
		}
		c = c.SetEdited(m.Path, m.Text)
		if _, err := c.Resolve(0); !errors.Is(err, ErrMarkersRemain) || c.Err == "" {
			t.Errorf("markers accepted: %v", err)
		}
		c = c.SetEdited(m.Path, "resolved by hand\n")
		if r, err := c.Resolve(0); err != nil || string(r.Content) != "resolved by hand\n" || !c.Edited(0) {
			t.Errorf("edited: %q %v", r.Content, err)
		}
		// Choosing again drops the hand edit.
		c, _ = c.Do(keymap.ConflictsTheirs)
		if c.Edited(0) {
			t.Error("choice kept the hand edit")
		}
	},
	keymap.ConflictsApply: func(t *testing.T) {
		c := conflictsFixture(t)
		c, cmd := c.Update(firstKey(t, keymap.ConflictsApply))
		if cmd != nil || !strings.Contains(c.Err, "2 of 2 conflicts unresolved") {
			t.Fatalf("applied unresolved: %q", c.Err)
		}
		c, _ = c.Do(keymap.ConflictsTheirs)
		c, _ = c.Do(keymap.ConflictsTheirs)
		c, cmd = c.Update(firstKey(t, keymap.ConflictsApply))
		if f, _ := c.Current(); cmd != nil || f != 1 {
			t.Fatalf("the binary file is open, yet: file %d", f)
		}
		c, _ = c.Do(keymap.ConflictsTheirs)
		_, cmd = c.Update(firstKey(t, keymap.ConflictsApply))
		m, ok := run(cmd).(ConflictsApplyMsg)
		if !ok || m.World != "w" || len(m.Resolutions) != 2 || string(m.Resolutions[0].Content) != "a\nB theirs\nc\nd\nE theirs\nf\nG ours\n" || !m.Resolutions[1].Keep {
			t.Errorf("apply: %#v", run(cmd))
		}
	},
	keymap.ConflictsCancel: func(t *testing.T) {
		_, cmd := conflictsFixture(t).Update(firstKey(t, keymap.ConflictsCancel))
		if run(cmd) != (ConflictsClosedMsg{World: "w"}) {
			t.Errorf("cancel: %#v", run(cmd))
		}
	},
}

// resolveMarkers is how files too large to carry three versions are
// resolved: it must agree with ResolveWith.
func TestResolveMarkersAgreesWithMerge(t *testing.T) {
	f := fixtureConflicts()[0]
	mr := diffview.Merge3(f.Base, f.Ours, f.Theirs)
	for _, chs := range [][]diffview.Choice{
		{diffview.ChooseOurs, diffview.ChooseTheirs},
		{diffview.ChooseBoth, diffview.ChooseBase},
		{diffview.Unresolved, diffview.ChooseOurs},
		{diffview.ChooseTheirs, diffview.Unresolved},
	} {
		want, err := mr.ResolveWith(chs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := resolveMarkers(f.Merged, f.Regions, chs)
		if err != nil || got != want {
			t.Errorf("%v: got %q, %v; want %q", chs, got, err, want)
		}
	}
	if _, err := resolveMarkers("no markers\n", f.Regions, []diffview.Choice{1, 1}); err == nil {
		t.Error("no error without markers")
	}
}

func TestPaneActions(t *testing.T) {
	for _, a := range keymap.Default().Actions() {
		if a.Area == keymap.Global {
			continue // the root model's, tested in tui
		}
		test, ok := paneActionTests[a.Name]
		if !ok {
			t.Errorf("no test for action %s", a.Name)
			continue
		}
		t.Run(a.Name, test)
	}
}

func ansiStrip(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		b.WriteString(strings.TrimRight(sanitizeStrip(l), " "))
		b.WriteByte('\n')
	}
	return b.String()
}

func sanitizeStrip(s string) string {
	out := []byte{}
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

func TestPaletteFuzzy(t *testing.T) {
	p := NewPalette(testEnv(t, "dark"))
	for _, k := range typeText("sbs") {
		p, _, _ = p.Update(k)
	}
	if len(p.Matches()) == 0 || p.Matches()[0].Name != keymap.DiffSideBySide {
		t.Fatalf("sbs: first match %v", p.Matches())
	}
	_, cmd, done := p.Update(keyPress("enter"))
	if !done || run(cmd) != (PaletteChosenMsg{Action: keymap.DiffSideBySide}) {
		t.Error("enter does not run the action")
	}
	if _, ok := FuzzyScore("zzz", "apply picked"); ok {
		t.Error("zzz matched")
	}
}

func TestSanitizeKeepsColoursOnly(t *testing.T) {
	got := sanitize([]byte("\x1b[2J\x1b[H\x1b[31mred\x1b[0m\x1b]0;title\x07 tab\there\x08"))
	if got != "\x1b[31mred\x1b[0m tab    here" {
		t.Errorf("%q", got)
	}
	p := NewTranscript(testEnv(t, "dark")).Append([]byte("a\r\nprogress 1\rprogress 2\nlast"))
	if p.Lines() != 3 || p.Line(0) != "a" || p.Line(1) != "progress 2" || p.Line(2) != "last" {
		t.Errorf("lines %d: %q %q %q", p.Lines(), p.Line(0), p.Line(1), p.Line(2))
	}
}
