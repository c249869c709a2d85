package panes

import (
	"strings"
	"testing"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/keymap"
)

func init() {
	paneActionTests[keymap.DiffComment] = testDiffComment
	paneActionTests[keymap.DiffUncomment] = testDiffUncomment
	paneActionTests[keymap.DiffSendReview] = func(t *testing.T) {
		_, cmd := diffFixture(t).Update(firstKey(t, keymap.DiffSendReview))
		if got := run(cmd); got != (ActionMsg{Action: keymap.DiffSendReview, World: "w", Path: "f.txt"}) {
			t.Fatalf("send: %#v", got)
		}
		if _, cmd := NewDiff(testEnv(t, "dark")).Do(keymap.DiffSendReview); cmd != nil {
			t.Fatal("send with no file shown")
		}
	}
}

// gotoRow puts the cursor on the first row whose text holds s.
func gotoRow(t *testing.T, p Diff, s string) Diff {
	t.Helper()
	for i, r := range p.rows {
		if strings.Contains(r.Text(), s) {
			p.cur = i
			return p
		}
	}
	t.Fatalf("no row holds %q", s)
	return p
}

func commentReq(t *testing.T, p Diff) CommentReqMsg {
	t.Helper()
	_, cmd := p.Update(firstKey(t, keymap.DiffComment))
	m, ok := run(cmd).(CommentReqMsg)
	if !ok {
		t.Fatalf("no comment request: %#v", run(cmd))
	}
	return m
}

func testDiffComment(t *testing.T) {
	p := diffFixture(t)
	// On a hunk's header: the whole hunk, as strata diff numbers it.
	m := commentReq(t, p)
	if m.World != "w" || m.Path != "f.txt" || m.Side != "new" || m.Start != 1 || m.End != 6 || m.Hunk != 1 || len(m.Quote) != 6 {
		t.Fatalf("hunk comment: %+v", m)
	}
	// On a line: that line of the World's version.
	m = commentReq(t, gotoRow(t, p, "FILE, changed"))
	if m.Side != "new" || m.Start != 3 || m.End != 3 || m.Hunk != 0 || m.Quote[0] != "line 3 of the FILE, changed" {
		t.Fatalf("line comment: %+v", m)
	}
	// On a removed line: the base's line.
	m = commentReq(t, gotoRow(t, p, "-line 35 of"))
	if m.Side != "old" || m.Start != 35 || m.End != 35 || m.Quote[0] != "line 35 of the file" {
		t.Fatalf("removed-line comment: %+v", m)
	}
	// A range: from line 18 down over the insertion to line 20 (new 21).
	p = gotoRow(t, p, "line 18 of")
	p, _ = p.Do(keymap.DiffRange)
	p, _ = p.Do(keymap.DiffDown)
	p, _ = p.Do(keymap.DiffDown)
	p, _ = p.Do(keymap.DiffDown)
	m = commentReq(t, p)
	if m.Start != 18 || m.End != 21 || len(m.Quote) != 4 || m.Quote[2] != "an inserted line" {
		t.Fatalf("range comment: %+v", m)
	}
	// The source view is for reading: no comments there.
	d := NewDiff(testEnv(t, "dark")).SetSize(80, 20).SetFile(fixtureDrift())
	d, _ = d.Do(keymap.DiffVsSource)
	if _, cmd := d.Do(keymap.DiffComment); cmd != nil {
		t.Fatal("a comment asked for in the source view")
	}
}

func testDiffUncomment(t *testing.T) {
	p := diffFixture(t).SetComments("w", "f.txt", fixtureComments())
	if _, cmd := p.Do(keymap.DiffUncomment); cmd != nil {
		t.Fatal("removed a comment from a row that is not one")
	}
	p = gotoRow(t, p, "✎ 3")
	_, cmd := p.Update(firstKey(t, keymap.DiffUncomment))
	if got := run(cmd); got != (CommentRemoveMsg{World: "w", ID: 3}) {
		t.Fatalf("uncomment: %#v", got)
	}
}

// Comment rows sit under their lines and do not shift what the lines
// mean: a range picked across one picks the same lines as without it.
func TestDiffCommentRowsKeepPicksAndPlaces(t *testing.T) {
	pickRange := func(p Diff) (int, int) {
		p = gotoRow(t, p, "line 18 of")
		p, _ = p.Do(keymap.DiffRange)
		for p.cur < len(p.rows) && !strings.Contains(p.rows[p.cur].Text(), "line 21 of") {
			p, _ = p.Do(keymap.DiffDown)
		}
		p, _ = p.Do(keymap.DiffPick)
		return p.Selection().Count()
	}
	h0, l0 := pickRange(diffFixture(t))
	p := diffFixture(t).SetComments("w", "f.txt", fixtureComments())
	h1, l1 := pickRange(p)
	if h0 != h1 || l0 != l1 || l1 != 1 {
		t.Fatalf("picked %d/%d with comments, %d/%d without", h1, l1, h0, l0)
	}
	// Each comment right under its line; the one on a line no hunk shows
	// first.
	var texts []string
	for _, r := range p.rows {
		texts = append(texts, r.Text())
	}
	all := strings.Join(texts, "\n")
	for _, order := range [][2]string{
		{"+line 3 of the FILE", "✎ 1 why upper case"},
		{"✎ 1 why upper case", "✎ 2 [stale: the code changed since this comment]"},
		{"line 20 of the file", "✎ 3 (lines 20-21) this insertion needs a test …"},
		{"-line 35 of the file", "✎ 4 do not drop line 35"},
	} {
		i, j := strings.Index(all, order[0]), strings.Index(all, order[1])
		if i < 0 || j < 0 || j < i || strings.Count(all[i:j], "\n") != 1 {
			t.Errorf("%q is not right under %q:\n%s", order[1], order[0], all)
		}
	}
	if !strings.HasPrefix(texts[0], "  ✎ 5 (line 12) unrelated") || p.rows[0].Kind != diffview.RowSummary {
		t.Errorf("comment outside the hunks not first: %q", texts[0])
	}
	// Another file's comments are not shown on this one.
	if q := diffFixture(t).SetComments("w", "other.txt", fixtureComments()); len(q.Comments()) != 0 {
		t.Error("comments of another file shown")
	}
	// A new file drops the last one's comments.
	if q := p.SetFile(DiffFile{World: "w", Path: "g.txt", Old: "a\n", New: "b\n"}); len(q.Comments()) != 0 || strings.Contains(q.View(80, 20, true), "✎") {
		t.Error("comments kept across files")
	}
}
