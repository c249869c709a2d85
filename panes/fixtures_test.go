package panes

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/themes"
)

// Fixed data for engine-free pane tests: panes take plain data.

func testEnv(t testing.TB, theme string) *Env {
	t.Helper()
	st, err := themes.New(themes.Options{Theme: theme})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Keys: keymap.Default(), Styles: st}
}

var fixedNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func fixtureWorldRows() []WorldRow {
	return []WorldRow{
		{Name: "refactor-auth", Status: "running", Backend: "local", Changes: 12, Sessions: 2, Running: 1},
		{Name: "fix-flaky-test", Status: "failed", Backend: "local", Changes: 3, Sessions: 1},
		{Name: "upgrade-deps", Status: "waiting", Backend: "local", Changes: 40, Sessions: 1, Running: 1},
		{Name: "docs", Status: "idle", Backend: "local"},
		{Name: "remote-build", Status: "planned", Backend: "cube"},
		{Name: "tidy", Status: "done", Backend: "local", Changes: 1, Sessions: 3},
	}
}

func fixtureChanges() []overlay.Change {
	return []overlay.Change{
		{Path: "README.md", Kind: overlay.Modified, Type: overlay.TypeFile, Size: 1200},
		{Path: "cmd/app/main.go", Kind: overlay.Modified, Type: overlay.TypeFile},
		{Path: "docs/old", Kind: overlay.Deleted, Type: overlay.TypeDir, Whiteout: true},
		{Path: "gen", Kind: overlay.Added, Type: overlay.TypeDir, Opaque: true},
		{Path: "gen/api.go", Kind: overlay.Added, Type: overlay.TypeFile, Opaque: true},
		{Path: "internal/auth/token.go", Kind: overlay.Modified, Type: overlay.TypeFile},
		{Path: "internal/auth/token_test.go", Kind: overlay.Added, Type: overlay.TypeFile},
		{Path: "internal/legacy.go", Kind: overlay.Deleted, Type: overlay.TypeFile, Whiteout: true},
		{Path: "link", Kind: overlay.TypeChanged, Type: overlay.TypeSymlink, Target: "README.md"},
	}
}

func fixtureSessions() []SessionRow {
	return []SessionRow{
		{ID: "s-0001aaaaaaaa", Command: "make test", State: "exited", ExitCode: 2, Started: fixedNow.Add(-time.Hour)},
		{ID: "s-0002bbbbbbbb", Command: "claude --resume", State: "running", TTY: true, Started: fixedNow.Add(-time.Minute)},
	}
}

func fixtureTranscript() []byte {
	var b strings.Builder
	for i := 1; i <= 60; i++ {
		switch {
		case i%10 == 0:
			fmt.Fprintf(&b, "\x1b[31mFAIL\x1b[0m step %d: assertion failed\n", i)
		case i%7 == 0:
			fmt.Fprintf(&b, "\x1b[32mok\x1b[0m   step %d\tpackage/with/a/rather/long/path/that/wraps/at/eighty/columns/for/sure/yes\n", i)
		default:
			fmt.Fprintf(&b, "step %d: compiling\n", i)
		}
	}
	b.WriteString("progress 10%\rprogress 50%\rprogress 100%\n")
	b.WriteString("waiting for input> ")
	return []byte(b.String())
}

// fixtureOldNew has three hunks far apart.
func fixtureOldNew() (string, string) {
	var o, n strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&o, "line %d of the file\n", i)
		switch i {
		case 3:
			fmt.Fprintf(&n, "line %d of the FILE, changed\n", i)
		case 20:
			n.WriteString("an inserted line\n")
			fmt.Fprintf(&n, "line %d of the file\n", i)
		case 35:
		default:
			fmt.Fprintf(&n, "line %d of the file\n", i)
		}
	}
	return o.String(), n.String()
}

// fixtureComments are review comments on fixtureOldNew's diff: a line, a
// stale one, a range, removed lines and a line no hunk shows.
func fixtureComments() []DiffComment {
	return []DiffComment{
		{ID: 1, Side: "new", Start: 3, End: 3, Text: "why upper case? keep the old spelling"},
		{ID: 2, Side: "new", Start: 3, End: 3, Text: "and say why in the commit", Stale: true, Note: "the code changed since this comment"},
		{ID: 3, Side: "new", Start: 20, End: 21, Text: "this insertion needs a test\nsecond line of the comment"},
		{ID: 4, Side: "old", Start: 35, End: 35, Text: "do not drop line 35"},
		{ID: 5, Side: "new", Start: 12, End: 12, Text: "unrelated: rename this"},
	}
}

func fixtureSnapshots() []SnapshotRow {
	return []SnapshotRow{
		{ID: "snap-0001", Time: fixedNow.Add(-3 * time.Hour), Message: "baseline", Files: 0},
		{ID: "snap-0002", Parent: "snap-0001", Time: fixedNow.Add(-2 * time.Hour), Message: "auth works", Files: 8},
		{Prefix: "├─", ID: "snap-0003", Parent: "snap-0002", Time: fixedNow.Add(-time.Hour), Auto: true, Files: 9},
		{Prefix: "└─", ID: "snap-0004", Parent: "snap-0002", Time: fixedNow.Add(-10 * time.Minute), Message: "after rollback", Files: 8, Head: true},
	}
}

// run executes a command and returns its message (nil for nil).
func run(cmd tea.Cmd) tea.Msg {
	if cmd == nil {
		return nil
	}
	return cmd()
}

func keyPress(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	}
	r := []rune(s)
	return tea.KeyPressMsg{Code: r[0], Text: s}
}

func typeText(s string) []tea.KeyPressMsg {
	var out []tea.KeyPressMsg
	for _, r := range s {
		out = append(out, keyPress(string(r)))
	}
	return out
}

// fixtureConflicts: a text file with two conflicting regions (and a
// clean one), and a binary file that can only keep the source's version.
func fixtureConflicts() []ConflictFile {
	base := "a\nb\nc\nd\ne\nf\ng\n"
	ours := "a\nB ours\nc\nd\nE ours\nf\nG ours\n"
	theirs := "a\nB theirs\nc\nd\nE theirs\nf\ng\n"
	mr := diffview.Merge3(base, ours, theirs)
	return []ConflictFile{
		{
			Path: "internal/auth/token.go", Reason: "2 overlapping edit(s) in the World and the source",
			Regions: mr.Conflicts, Base: base, Ours: ours, Theirs: theirs, Merged: mr.Merged, TheirsHash: "h1",
		},
		{Path: "logo.png", Reason: "binary file changed in both the World and the source", TheirsHash: "h2"},
	}
}

func fixtureCompare(env *Env) Compare {
	paths := []ComparePath{
		{
			Path: "agree.txt", ChangedBy: []string{"try-1", "try-2", "try-3"}, Agree: true,
			Versions: []CompareVersion{{Worlds: []string{"try-1", "try-2", "try-3"}, Type: "file", Size: 5}},
		},
		{
			Path: "internal/auth/token.go", ChangedBy: []string{"try-1", "try-2", "try-3"},
			Versions: []CompareVersion{
				{Worlds: []string{"try-1"}, Type: "file", Size: 2100},
				{Worlds: []string{"try-2", "try-3"}, Type: "file", Size: 1900},
			},
		},
		{
			Path: "old.go", ChangedBy: []string{"try-2"},
			Versions: []CompareVersion{{Worlds: []string{"try-2"}, Type: "absent"}, {Worlds: []string{"try-1", "try-3"}, Type: "file", Size: 300, Source: true}},
		},
	}
	fo := &FanOut{Command: "claude -p 'fix the token refresh'", At: fixedNow, Rows: []FanOutRow{
		{World: "try-1", Duration: "4m2s", Changed: 2},
		{World: "try-2", ExitCode: 1, Duration: "3m40s", Changed: 3},
		{World: "try-3", Duration: "5m1s", Changed: -1, Running: true},
	}}
	return NewCompare(env, []string{"try-1", "try-2", "try-3"}, "/src/app", paths, fo)
}

// fixtureDrift is fixtureOldNew's file after a teammate edited line 10 of
// the source: the base diff, and the World against the source now, as the
// engine hands them over.
func fixtureDrift() DiffFile {
	old, nw := fixtureOldNew()
	src := strings.Replace(old, "line 10 of the file\n", "a teammate's line 10\n", 1)
	return DiffFile{
		World: "refactor-auth", Path: "internal/auth/token.go", Old: old, New: nw,
		Diff: diffview.Diff(old, nw, diffview.Options{}), Drift: true, Source: src,
		SourceDiff: diffview.Diff(src, nw, diffview.Options{}), BaseHash: "b0", WorldHash: "w0",
	}
}
