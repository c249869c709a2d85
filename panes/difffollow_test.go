package panes

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
)

func numbered(n int, edit map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := edit[i]; ok {
			b.WriteString(s)
		} else {
			fmt.Fprintf(&b, "line %d", i)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The file under review changes on disk (lines added above the cursor):
// the cursor stays on the line it was on, not on the row number it had.
func TestDiffReloadKeepsCursorLine(t *testing.T) {
	old := numbered(60, nil)
	nw := numbered(60, map[int]string{10: "line ten", 40: "line forty"})
	p := NewDiff(testEnv(t, "dark")).SetSize(80, 20).SetFile(DiffFile{World: "w", Path: "f.txt", Old: old, New: nw})
	p, _ = p.Do(keymap.DiffNextHunk) // the second hunk
	for range 3 {
		p, _ = p.Do(keymap.DiffDown)
	}
	l, ok := p.lineOf(p.rows[p.cur])
	if !ok {
		t.Fatal("the cursor is on no line")
	}
	// The World inserts a third hunk at the top: every row below moves.
	nw2 := "new first line\nanother\n" + nw
	p2 := p.SetFile(DiffFile{World: "w", Path: "f.txt", Old: old, New: nw2})
	l2, ok := p2.lineOf(p2.rows[p2.cur])
	if !ok || l2.Text != l.Text || l2.Op != l.Op {
		t.Fatalf("the cursor moved from %q (%v) to %q (%v) when the file changed", l.Text, l.Op, l2.Text, l2.Op)
	}
	if p2.CurrentHunk() != p.CurrentHunk()+1 {
		t.Errorf("cursor in hunk %d, want %d (the same hunk, renumbered)", p2.CurrentHunk(), p.CurrentHunk()+1)
	}
	if y := p2.cur - p2.offset; y < 0 || y >= p2.body() {
		t.Errorf("the cursor's row %d is off screen (offset %d)", p2.cur, p2.offset)
	}
	// The line goes away: the cursor stays in its hunk.
	nw3 := numbered(60, map[int]string{10: "line ten", 40: "line 40 again"})
	p3 := p.SetFile(DiffFile{World: "w", Path: "f.txt", Old: old, New: nw3})
	if p3.CurrentHunk() != p.CurrentHunk() {
		t.Errorf("cursor in hunk %d after its line went, want %d", p3.CurrentHunk(), p.CurrentHunk())
	}
}

// Side by side, the two line-number gutters are as wide: from the left
// edge (the cursor column included) to the left line's marker, and from
// the separator to the right line's marker.
func TestDiffSideBySideGuttersMatch(t *testing.T) {
	old := numbered(120, nil)
	nw := numbered(120, map[int]string{5: "line five", 110: "line one hundred ten"})
	for _, w := range []int{80, 81, 119, 200} {
		p := NewDiff(testEnv(t, "dark")).SetSize(w, 40).SetFile(DiffFile{World: "w", Path: "f.txt", Old: old, New: nw})
		p, _ = p.Do(keymap.DiffSideBySide)
		checked := 0
		for _, l := range strings.Split(ansi.Strip(p.View(w, 40, true)), "\n") {
			left, right, ok := strings.Cut(l, "│")
			if !ok || !strings.Contains(left, "-line") || !strings.Contains(right, "+line") {
				continue
			}
			lg := ansi.StringWidth(left[:strings.Index(left, "-line")])
			rg := ansi.StringWidth(right[:strings.Index(right, "+line")])
			if lg != rg {
				t.Errorf("width %d: left gutter %d cells, right %d: %q", w, lg, rg, l)
			}
			if lw, rw := ansi.StringWidth(left), ansi.StringWidth(right); lw-rw > 1 || rw-lw > 1 {
				t.Errorf("width %d: columns %d and %d cells: %q", w, lw, rw, l)
			}
			checked++
		}
		if checked != 2 {
			t.Fatalf("width %d: %d changed rows side by side, want 2", w, checked)
		}
		if got := ansi.StringWidth(strings.Split(p.View(w, 40, true), "\n")[3]); got != w {
			t.Errorf("width %d: a row is %d cells", w, got)
		}
	}
}

// The help closes with the key config.toml gives it, as it opened.
func TestHelpClosesWithConfiguredKey(t *testing.T) {
	km, err := keymap.Load(map[string][]string{keymap.Help: {"f1"}})
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv(t, "dark")
	env.Keys = km
	h := NewHelp(env, keymap.Worlds)
	if _, done := h.Update(tea.KeyPressMsg{Code: tea.KeyF1}); !done {
		t.Error("f1, the configured help key, does not close the help")
	}
	if _, done := h.Update(tea.KeyPressMsg{Code: tea.KeyEscape}); !done {
		t.Error("esc does not close the help")
	}
}
