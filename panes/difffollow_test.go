package panes

import (
	"fmt"
	"strings"
	"testing"

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

