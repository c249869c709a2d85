package diffview

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rivo/uniseg"
)

func dump(rows []Row) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("|" + r.Text() + "|\n")
	}
	return b.String()
}

// randomLine mixes ASCII, tabs, CJK, emoji (including ZWJ sequences and
// flags), combining marks, control bytes and invalid UTF-8.
func randomLine(rng *rand.Rand) string {
	pieces := []string{"a", "word", " ", "\t", "世界", "日本語", "🎉", "👩‍👩‍👧", "🇫🇷", "e\u0301", "\x1b[31m", "\x00", "\r", "\xff", "ｆｕｌｌ", "…", "\u200b", "x"}
	var b strings.Builder
	for n := rng.IntN(40); n > 0; n-- {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func randomDiff(seed uint64) *FileDiff {
	rng := rand.New(rand.NewPCG(seed, 7))
	var old, nw []string
	for i := rng.IntN(30); i > 0; i-- {
		l := randomLine(rng) + "\n"
		old = append(old, l)
		switch rng.IntN(4) {
		case 0:
		case 1:
			nw = append(nw, randomLine(rng)+"\n")
		case 2:
			nw = append(nw, l, randomLine(rng)+"\n")
		default:
			nw = append(nw, l)
		}
	}
	return Diff(join(old), join(nw), Options{Force: true, Context: 1 + rng.IntN(3)})
}

func TestLayoutRowsFillWidthExactly(t *testing.T) {
	seeds := uint64(30)
	if raceEnabled {
		seeds = 6 // the race detector slows layout ~10x; single goroutine anyway
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		fd := randomDiff(seed)
		sel := NewSelection(fd, seed%2 == 0)
		for _, width := range []int{1, 2, 3, 5, 8, 21, 40, 80, 133} {
			for mode := 0; mode < 16; mode++ {
				o := LayoutOptions{
					Width: width, SideBySide: mode&1 != 0, Wrap: mode&2 != 0,
					ShowLineNumbers: mode&4 != 0, TabWidth: 1 + int(seed%8), Title: "dir/文件.go",
				}
				if mode&8 != 0 {
					o.Selection = sel
				}
				for i, r := range Layout(fd, o) {
					if w := r.Width(); w != width {
						t.Fatalf("seed %d width %d mode %b row %d: width %d: %q", seed, width, mode, i, w, r.Text())
					}
					if strings.ContainsAny(r.Text(), "\x1b\x00\r\n\t") || !utf8Valid(r.Text()) {
						t.Fatalf("seed %d: row %d carries raw control or invalid bytes: %q", seed, i, r.Text())
					}
				}
			}
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestLayoutWrapKeepsAllText(t *testing.T) {
	text := "alpha 世界 beta 🎉 gamma ｆｕｌｌ delta " + strings.Repeat("long", 20)
	fd := Diff("x\n", text+"\n", Options{})
	for _, width := range []int{4, 7, 10, 33} {
		rows := Layout(fd, LayoutOptions{Width: width, Wrap: true})
		var joined strings.Builder
		for _, r := range rows {
			if r.Kind == RowLine && fd.Hunks[r.Hunk].Lines[r.Line].Op == Insert {
				joined.WriteString(r.Text()[1:]) // drop the marker column
			}
		}
		strip := func(s string) string { return strings.ReplaceAll(s, " ", "") }
		if strip(joined.String()) != strip(text) {
			t.Fatalf("width %d: wrapped text %q lost content", width, joined.String())
		}
	}
	rows := Layout(fd, LayoutOptions{Width: 20})
	for _, r := range rows {
		if r.Kind == RowLine && fd.Hunks[r.Hunk].Lines[r.Line].Op == Insert {
			if !strings.HasSuffix(r.Text(), "…") || r.Continuation {
				t.Fatalf("truncated row %q", r.Text())
			}
		}
	}
}

func TestLayoutTabsAndRoles(t *testing.T) {
	fd := Diff("\tx := 1\n", "\tx := 10\n", Options{})
	rows := Layout(fd, LayoutOptions{Width: 30, TabWidth: 4})
	removed, added := rows[1], rows[2]
	if !strings.HasPrefix(removed.Text(), "-    x := 1") {
		t.Fatalf("tab not expanded: %q", removed.Text())
	}
	find := func(r Row, role Role) string {
		for _, s := range r.Segments {
			if s.Role == role {
				return s.Text
			}
		}
		return ""
	}
	if got := find(removed, RoleRemovedWord); got != "1" {
		t.Fatalf("removed word %q in %+v", got, removed.Segments)
	}
	if got := find(added, RoleAddedWord); got != "10" {
		t.Fatalf("added word %q in %+v", got, added.Segments)
	}
	if rows[0].Kind != RowHunkHeader || find(rows[0], RoleHunkHeader) == "" {
		t.Fatalf("header row %+v", rows[0])
	}
}

func TestLayoutSideBySideAlignment(t *testing.T) {
	old, nw := "a\nb\nc\nd\n", "a\nB\nX\nY\nd\n"
	fd := Diff(old, nw, Options{})
	width := 41
	rows := Layout(fd, LayoutOptions{Width: width, SideBySide: true, ShowLineNumbers: true})
	leftW := (width - 1) / 2
	var lines []Row
	for _, r := range rows {
		if r.Kind == RowLine {
			lines = append(lines, r)
		}
		// The separator sits at the same column in every line row.
		if r.Kind == RowLine {
			before, _, found := strings.Cut(r.Text(), "│")
			if w := uniseg.StringWidth(before); !found || w != leftW {
				t.Fatalf("separator at %d, want %d: %q", w, leftW, r.Text())
			}
			if !segmentsHaveRole(r, "│", RoleGutter) {
				t.Fatalf("separator is not in a gutter segment: %+v", r.Segments)
			}
		}
	}
	// a | a, -b | +B, -c | +X, filler | +Y, d | d
	if len(lines) != 5 {
		t.Fatalf("%d line rows:\n%s", len(lines), dump(rows))
	}
	h := fd.Hunks[0]
	if l := h.Lines[lines[1].Line]; l.Op != Delete || l.Text != "b" || h.Lines[lines[1].PairLine].Text != "B" {
		t.Fatalf("row 1 pairs %+v", lines[1])
	}
	if lines[3].PairLine != -1 || h.Lines[lines[3].Line].Text != "Y" {
		t.Fatalf("row 3 should hold only +Y: %+v", lines[3])
	}
	hasFiller := false
	for _, s := range lines[3].Segments {
		hasFiller = hasFiller || s.Role == RoleFiller
	}
	if !hasFiller {
		t.Fatalf("row 3 has no filler: %+v", lines[3].Segments)
	}
}

func TestLayoutSelectionMarks(t *testing.T) {
	old, nw := threeHunks()
	fd := Diff(old, nw, Options{})
	sel := NewSelection(fd, false)
	_ = sel.PickHunk(1)
	_ = sel.PickLines(0, 0, 2) // the - line of hunk 0, not its +
	rows := Layout(fd, LayoutOptions{Width: 40, Selection: sel})
	states := map[int]string{}
	for _, r := range rows {
		if r.Kind == RowHunkHeader {
			states[r.Hunk] = r.Segments[0].Text
			if r.Segments[0].Role != RolePickMark {
				t.Fatalf("header pick mark role %v", r.Segments[0].Role)
			}
		}
		if r.Kind == RowLine {
			l := fd.Hunks[r.Hunk].Lines[r.Line]
			if r.Picked != sel.IsPicked(r.Hunk, r.Line) || (l.Op == Equal && r.Picked) {
				t.Fatalf("row picked=%v for %+v", r.Picked, l)
			}
		}
	}
	if states[0] != "~" || states[1] != "✓" || states[2] != " " {
		t.Fatalf("hunk marks %v", states)
	}
}

func TestLayoutSummaries(t *testing.T) {
	rows := Layout(Diff("\x00bin", "\x00bon", Options{}), LayoutOptions{Width: 50})
	if len(rows) != 1 || rows[0].Kind != RowSummary || !strings.Contains(rows[0].Text(), "Binary file differs (4 B → 4 B)") || rows[0].Segments[0].Role != RoleMeta {
		t.Fatalf("binary rows:\n%s", dump(rows))
	}
	rows = Layout(Diff(strings.Repeat("x\n", 2000), "y\n", Options{MaxBytes: 1024}), LayoutOptions{Width: 60})
	if len(rows) != 1 || !strings.Contains(rows[0].Text(), "too large") {
		t.Fatalf("large rows:\n%s", dump(rows))
	}
	rows = Layout(Diff("same\n", "same\n", Options{}), LayoutOptions{Width: 60})
	if len(rows) != 1 || !strings.Contains(rows[0].Text(), "No changes") {
		t.Fatalf("identical rows:\n%s", dump(rows))
	}
}

func TestLayoutRangeAndHunkCountsMatchLayout(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		fd := randomDiff(seed)
		for mode := 0; mode < 4; mode++ {
			o := LayoutOptions{Width: 30, SideBySide: mode&1 != 0, Wrap: mode&2 != 0, ShowLineNumbers: true, Title: "t"}
			all := Layout(fd, o)
			n := 1
			for i := range fd.Hunks {
				hr := LayoutHunk(fd, i, o)
				if c := HunkRowCount(fd, i, o); c != len(hr) {
					t.Fatalf("seed %d mode %d hunk %d: count %d, rows %d", seed, mode, i, c, len(hr))
				}
				n += len(hr)
			}
			if len(fd.Hunks) > 0 && n != len(all) {
				t.Fatalf("seed %d: hunks give %d rows, Layout %d", seed, n, len(all))
			}
			for _, win := range [][2]int{{0, 5}, {3, 7}, {len(all) - 2, 10}, {len(all) + 3, 4}} {
				got := LayoutRange(fd, o, max(win[0], 0), win[1])
				lo := min(max(win[0], 0), len(all))
				want := all[lo:min(lo+win[1], len(all))]
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("seed %d mode %d window %v: got %d rows, want %d", seed, mode, win, len(got), len(want))
				}
			}
		}
	}
}

func segmentsHaveRole(r Row, text string, role Role) bool {
	for _, s := range r.Segments {
		if s.Role == role && strings.Contains(s.Text, text) {
			return true
		}
	}
	return false
}
