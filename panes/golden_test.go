package panes

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/stratahq/strata/keymap"
)

// Golden renders of every pane at 80x24 and 200x60 in the dark and light
// themes (go test ./panes -update rewrites them).

var sizes = []struct{ w, h int }{{80, 24}, {120, 40}, {200, 60}}

// paneSizes adds, per pane, the box the 120x40 screen's layout gives it
// (the Worlds pane is 46x9 inside its border there).
var paneSizes = map[string][]struct{ w, h int }{
	"worlds-resources": {{46, 9}},
	"worlds-forks":     {{46, 9}},
	"worlds-empty":     {{46, 9}},
}

func renderPane(t *testing.T, env *Env, pane string, w, h int) string {
	t.Helper()
	switch pane {
	case "worlds":
		p := NewWorlds(env)
		p.Scope = "/src/app"
		p, _ = p.SetRows(fixtureWorldRows())
		p = p.SetSize(0, h)
		p, _ = p.Do(keymap.WorldsDown)
		return p.View(w, h, true)
	case "worlds-empty":
		p := NewWorlds(env)
		p.Scope = "/tmp/ncwalk-120/strata-playground"
		p, _ = p.SetRows(nil)
		return p.View(w, h, true)
	case "worlds-empty-elsewhere":
		p := NewWorlds(env)
		p.Scope, p.Elsewhere = "/src/app", 2
		p, _ = p.SetRows(nil)
		return p.View(w, h, true)
	case "transcript":
		p := NewTranscript(env)
		p, _ = p.SetSessions("refactor-auth", fixtureSessions())
		p = p.SetSize(0, h).Append(fixtureTranscript())
		return p.View(w, h, true)
	case "transcript-search":
		p := NewTranscript(env)
		p, _ = p.SetSessions("refactor-auth", fixtureSessions())
		p = p.SetSize(0, h).Append(fixtureTranscript())
		p, _ = p.Do(keymap.TranscriptSearch)
		for _, k := range typeText("fail") {
			p, _ = p.Update(k)
		}
		p, _ = p.Update(keyPress("enter"))
		p, _ = p.Do(keymap.TranscriptPrevMatch)
		return p.View(w, h, true)
	case "transcript-waiting":
		p := NewTranscript(env)
		p, _ = p.SetSessions("refactor-auth", []SessionRow{{ID: "s-0002bbbbbbbb", Command: "claude", State: "running", TTY: false, Waiting: true}})
		p = p.SetSize(0, h).Append(fixtureTranscript())
		p, _ = p.Scroll(-20)
		return p.View(w, h, true)
	case "transcript-pty":
		p := NewTranscript(env)
		p, _ = p.SetSessions("refactor-auth", []SessionRow{{ID: "s-0003cccccccc", Command: "top", State: "running", TTY: true}})
		p = p.SetSize(0, h).AppendChunks([]TranscriptChunk{
			{Time: fixedNow, Cols: 60, Rows: 8},
			{Time: fixedNow, Data: []byte("\x1b[?1049h\x1b[H\x1b[2J\x1b[1mtop - 12:00:00 up 3 days\x1b[0m\r\n" +
				"Tasks: \x1b[32m42\x1b[0m total\x1b[4;1H\x1b[7m  PID USER   %CPU COMMAND      \x1b[0m\r\n" +
				" 4242 agent  99.0 go test ./...\r\n   17 agent   0.3 sh\x1b[2;30Hload 1.02")},
		})
		return p.View(w, h, true)
	case "changes":
		p := NewChanges(env)
		p, _ = p.SetChanges("refactor-auth", fixtureChanges(), nil)
		p = p.SetSize(0, h).SetPicks(map[string]PickState{"README.md": PickAll, "internal/auth/token.go": PickPartial})
		p, _ = p.Do(keymap.ChangesDown)
		return p.View(w, h, true)
	case "changes-tree":
		p := NewChanges(env)
		p, _ = p.SetChanges("refactor-auth", fixtureChanges(), nil)
		p = p.SetSize(0, h)
		p, _ = p.Do(keymap.ChangesTree)
		p, _ = p.Do(keymap.ChangesKind) // A only
		return p.View(w, h, false)
	case "changes-deleted-dir":
		p := NewChanges(env)
		p, _ = p.SetChanges("refactor-auth", bigDeletion(), nil)
		p = p.SetSize(0, h)
		p, _ = p.Do(keymap.ChangesTree)
		picks := map[string]PickState{}
		for _, c := range bigDeletion()[1:] {
			picks[c.Path] = PickAll
		}
		p = p.SetPicks(picks)
		p, _ = p.Do(keymap.ChangesDown)
		p, _ = p.Do(keymap.ChangesFold)
		return p.View(w, h, true)
	case "diff":
		old, nw := fixtureOldNew()
		p := NewDiff(env).SetSize(w, h)
		p = p.SetFile(DiffFile{World: "refactor-auth", Path: "internal/auth/token.go", Old: old, New: nw})
		p, _ = p.Do(keymap.DiffNextHunk)
		p, _ = p.Do(keymap.DiffPick)
		return p.View(w, h, true)
	case "diff-comments":
		old, nw := fixtureOldNew()
		p := NewDiff(env).SetSize(w, h)
		p = p.SetFile(DiffFile{World: "refactor-auth", Path: "internal/auth/token.go", Old: old, New: nw})
		p = p.SetComments("refactor-auth", "internal/auth/token.go", fixtureComments())
		p, _ = p.Do(keymap.DiffNextHunk)
		p, _ = p.Do(keymap.DiffDown)
		return p.View(w, h, true)
	case "diff-side-by-side":
		old, nw := fixtureOldNew()
		p := NewDiff(env).SetSize(w, h)
		p = p.SetFile(DiffFile{World: "refactor-auth", Path: "internal/auth/token.go", Old: old, New: nw})
		p, _ = p.Do(keymap.DiffSideBySide)
		p, _ = p.Do(keymap.DiffDown)
		p, _ = p.Do(keymap.DiffRange)
		p, _ = p.Do(keymap.DiffDown)
		return p.View(w, h, true)
	case "diff-drift":
		p := NewDiff(env).SetSize(w, h).SetFile(fixtureDrift())
		p, _ = p.Do(keymap.DiffNextHunk)
		p, _ = p.Do(keymap.DiffPick)
		return p.View(w, h, true)
	case "diff-vs-source":
		p := NewDiff(env).SetSize(w, h).SetFile(fixtureDrift())
		p, _ = p.Do(keymap.DiffVsSource)
		return p.View(w, h, true)
	case "diff-binary":
		p := NewDiff(env).SetSize(w, h)
		p = p.SetFile(DiffFile{World: "w", Path: "logo.png", Old: "\x89PNG\x00\x01", New: "\x89PNG\x00\x02\x03"})
		return p.View(w, h, true)
	case "timeline":
		p := NewTimeline(env)
		p.Now = fixedNow
		p = p.SetRows("refactor-auth", fixtureSnapshots(), nil).SetSize(0, h)
		p, _ = p.Do(keymap.TimelineDown)
		return p.View(w, h, true)
	case "conflicts":
		c := NewConflicts(env, "refactor-auth", fixtureConflicts())
		c, _ = c.Do(keymap.ConflictsTheirs)
		return c.View(w, h)
	case "conflicts-edited":
		c := NewConflicts(env, "refactor-auth", fixtureConflicts())
		c = c.SetEdited("internal/auth/token.go", "a\n<<<<<<< ours\nB ours\n=======\nB theirs\n>>>>>>> theirs\n")
		return c.View(w, h)
	case "compare":
		c := fixtureCompare(env)
		c, _ = c.Do(keymap.CompareDown)
		c, _ = c.Do(keymap.CompareRight)
		c, _ = c.Do(keymap.CompareAdopt)
		return c.View(w, h)
	case "worlds-resources":
		p := NewWorlds(env)
		p.Scope = "/src/app"
		p, _ = p.SetRows(fixtureWorldRows())
		p = p.SetResources(map[string]WorldResources{
			"refactor-auth": {CPU: 97, Memory: 412 << 20, Processes: 6, History: []float64{10, 40, 80, 95, 97}, Live: true},
			"upgrade-deps":  {CPU: 3, Memory: 35 << 20, Processes: 2, History: []float64{60, 20, 5, 3}, Live: true},
			"tidy":          {History: []float64{30, 0}},
		}).SetSize(0, h)
		return p.View(w, h, true)
	case "worlds-forks":
		p := NewWorlds(env)
		p.Scope = "/src/app"
		p, _ = p.SetRows([]WorldRow{
			{Name: "refactor", Status: "idle", Backend: "local", Changes: 4, Sessions: 1},
			{Name: "refactor-1", Status: "running", Backend: "local", Changes: 5, Sessions: 1, Running: 1},
			{Name: "refactor-2", Status: "waiting", Backend: "local", Changes: 7, Sessions: 1, Running: 1},
		})
		p = p.SetResources(map[string]WorldResources{
			"refactor-1": {CPU: 55, Memory: 90 << 20, Processes: 3, History: []float64{10, 50, 55}, Live: true},
			"refactor-2": {CPU: 2, Memory: 20 << 20, Processes: 1, History: []float64{5, 2}, Live: true},
		}).SetSize(0, h)
		return p.View(w, h, true)
	case "help":
		return NewHelp(env, keymap.Diff).View(w, h)
	case "palette":
		p := NewPalette(env)
		for _, k := range typeText("pick") {
			p, _, _ = p.Update(k)
		}
		return p.View(w, h)
	case "confirm-remove":
		return NewTypedConfirm(env, "Remove refactor-auth with its unapplied work?",
			[]string{"refactor-auth holds 12 changes that were never applied."}, "refactor-auth", nil).View(w)
	case "new-world":
		return NewForm(env, "New World", []string{"name", "source", "backend"}, []string{"", "/src/app", "local"}, nil).View(w)
	}
	t.Fatalf("unknown pane %s", pane)
	return ""
}

func TestGolden(t *testing.T) {
	panes := []string{
		"worlds", "worlds-empty", "worlds-empty-elsewhere", "transcript", "transcript-search", "transcript-pty", "transcript-waiting", "changes", "changes-tree", "changes-deleted-dir",
		"diff", "diff-comments", "diff-side-by-side", "diff-drift", "diff-vs-source", "diff-binary", "timeline", "conflicts", "conflicts-edited", "compare", "worlds-resources", "worlds-forks", "help", "palette", "confirm-remove", "new-world",
	}
	for _, pane := range panes {
		for _, sz := range append(sizes, paneSizes[pane]...) {
			for _, theme := range []string{"dark", "light"} {
				t.Run(fmt.Sprintf("%s/%dx%d/%s", pane, sz.w, sz.h, theme), func(t *testing.T) {
					out := renderPane(t, testEnv(t, theme), pane, sz.w, sz.h)
					checkBox(t, pane, out, sz.w, sz.h)
					golden.RequireEqual(t, out)
				})
			}
		}
	}
}

// checkBox asserts the pane filled exactly its box: panes must be correct
// at every size, not only look right in the golden.
func checkBox(t *testing.T, pane, out string, w, h int) {
	t.Helper()
	lines := strings.Split(out, "\n")
	overlay := pane == "help" || pane == "palette" || pane == "confirm-remove" || pane == "new-world"
	if !overlay && len(lines) != h {
		t.Errorf("%d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		lw := ansi.StringWidth(l)
		if (!overlay && lw != w) || lw > w {
			t.Errorf("line %d is %d cells wide, want %d: %q", i, lw, w, ansi.Strip(l))
			break
		}
	}
}
