package panes

import (
	"fmt"
	"strings"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/keymap"
)

// DiffComment is a review comment shown in the diff, under the last line
// it is on: Side "new" counts lines of the World's version, "old" of the
// base (lines the World removed).
type DiffComment struct {
	ID         int
	Side       string
	Start, End int
	Text       string
	// Stale: its code changed since it was written (Note says how).
	Stale bool
	Note  string
}

// CommentReqMsg asks the root to write a comment on these lines of the
// World's diff (Hunk is the hunk as `strata diff` numbers it, for a
// comment on a whole hunk; Quote the lines commented on).
type CommentReqMsg struct {
	World, Path string
	Side        string
	Start, End  int
	Hunk        int
	Quote       []string
}

// CommentRemoveMsg asks the root to drop a comment of the open round.
type CommentRemoveMsg struct {
	World string
	ID    int
}

// SetComments shows the open round's comments on the file on screen
// (those of another file or World are ignored).
func (p Diff) SetComments(world, path string, cs []DiffComment) Diff {
	if world != p.file.World || path != p.file.Path {
		return p
	}
	at := p.spot()
	p.comments = cs
	p = p.relayout()
	if i, ok := p.find(at); ok {
		p.cur = i
	}
	return p.scrollToCursor()
}

// Comments are the comments shown.
func (p Diff) Comments() []DiffComment { return p.comments }

// CommentAt is the comment drawn on row i of the layout.
func (p Diff) commentAt(i int) (DiffComment, bool) {
	c, ok := p.noteRows[i]
	return c, ok
}

// addCommentRows puts each comment under the row of its last line (after
// that row's wrapped continuations); comments on lines the diff does not
// show go first, under the file's name.
func (p Diff) addCommentRows() Diff {
	p.noteRows = nil
	if len(p.comments) == 0 || len(p.rows) == 0 || p.vsSource {
		return p
	}
	after := map[int][]DiffComment{} // row index -> comments under it
	placed := map[int]bool{}
	for i, r := range p.rows {
		if r.Kind != diffview.RowLine || r.Continuation {
			continue
		}
		for _, li := range []int{r.Line, r.PairLine} {
			if li < 0 {
				continue
			}
			l, ok := p.lineAt(r.Hunk, li)
			if !ok {
				continue
			}
			for _, c := range p.comments {
				if placed[c.ID] {
					continue
				}
				if (c.Side == "old" && l.Op == diffview.Delete && l.OldNo == c.End) || (c.Side != "old" && l.Op != diffview.Delete && l.NewNo == c.End) {
					last := i
					for last+1 < len(p.rows) && p.rows[last+1].Continuation {
						last++
					}
					after[last] = append(after[last], c)
					placed[c.ID] = true
				}
			}
		}
	}
	var rows []diffview.Row
	p.noteRows = map[int]DiffComment{}
	add := func(c DiffComment, hunk int, elsewhere bool) {
		p.noteRows[len(rows)] = c
		rows = append(rows, p.commentRow(c, hunk, elsewhere))
	}
	for _, c := range p.comments {
		if !placed[c.ID] {
			add(c, -1, true)
		}
	}
	for i, r := range p.rows {
		rows = append(rows, r)
		for _, c := range after[i] {
			add(c, r.Hunk, false)
		}
	}
	shift := len(rows) - len(p.rows)
	if p.cur >= 0 && shift > 0 {
		p.cur = min(p.cur, len(rows)-1)
	}
	p.rows = rows
	return p
}

func (p Diff) lineAt(h, l int) (diffview.Line, bool) {
	fd := p.shown()
	if fd == nil || h < 0 || h >= len(fd.Hunks) || l < 0 || l >= len(fd.Hunks[h].Lines) {
		return diffview.Line{}, false
	}
	return fd.Hunks[h].Lines[l], true
}

// commentRow is one row: the marker, the number, where (when not under
// its line, or a range), the first line of the text, and stale's note.
func (p Diff) commentRow(c DiffComment, hunk int, elsewhere bool) diffview.Row {
	text := fmt.Sprintf("  ✎ %d ", c.ID)
	where := ""
	switch {
	case elsewhere:
		where = fmt.Sprintf("line %d", c.Start)
		if c.End > c.Start {
			where = fmt.Sprintf("lines %d-%d", c.Start, c.End)
		}
		if c.Side == "old" {
			where += " (removed)"
		}
	case c.End > c.Start:
		where = fmt.Sprintf("lines %d-%d", c.Start, c.End)
	}
	if where != "" {
		text += "(" + where + ") "
	}
	if c.Stale {
		note := c.Note
		if note == "" {
			note = "its code changed"
		}
		text += "[stale: " + note + "] "
	}
	first, rest, more := strings.Cut(c.Text, "\n")
	text += first
	if more && rest != "" {
		text += " …"
	}
	return diffview.Row{Kind: diffview.RowSummary, Hunk: hunk, Line: -1, PairLine: -1, Segments: []diffview.Segment{{Text: text, Role: diffview.RoleMeta}}}
}

// comment asks to comment on the range being selected, else the line
// under the cursor, else (on a hunk's header) the whole hunk.
func (p Diff) comment() (Diff, tea.Cmd) {
	if !p.loaded || p.vsSource || p.fd == nil || p.fd.Summarised() || p.file.Note != "" || p.cur < 0 || p.cur >= len(p.rows) {
		return p, nil // comments are on the base diff's lines
	}
	h := p.rows[p.cur].Hunk
	if h < 0 || h >= len(p.fd.Hunks) {
		return p, nil
	}
	var idx []int
	hunkNo := 0
	switch r := p.rows[p.cur]; {
	case p.anchor >= 0:
		lo, hi := p.rangeLines()
		for l := lo; l <= hi; l++ {
			idx = append(idx, l)
		}
		p.anchor = -1
	case r.Kind == diffview.RowHunkHeader:
		for l := range p.fd.Hunks[h].Lines {
			idx = append(idx, l)
		}
		if labels := diffview.HunkNumbers(p.fd, p.numbered); h < len(labels) && len(labels[h]) > 0 && !p.numbered.Summarised() {
			hunkNo = labels[h][0]
		}
	case r.Kind == diffview.RowLine && r.Line >= 0:
		idx = []int{r.Line}
	default:
		return p, nil
	}
	m := CommentReqMsg{World: p.file.World, Path: p.file.Path, Side: "new", Hunk: hunkNo}
	lines := p.fd.Hunks[h].Lines
	// The World's lines when there are any, else the removed ones.
	for _, side := range []string{"new", "old"} {
		lo, hi := 0, 0
		var quote []string
		for _, i := range idx {
			l := lines[i]
			n := l.NewNo
			if side == "old" {
				n = 0
				if l.Op == diffview.Delete {
					n = l.OldNo
				}
			} else if l.Op == diffview.Delete {
				n = 0
			}
			if n == 0 {
				continue
			}
			if lo == 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
			quote = append(quote, l.Text)
		}
		if lo > 0 {
			m.Side, m.Start, m.End, m.Quote = side, lo, hi, quote
			break
		}
	}
	if m.Start == 0 {
		return p, nil
	}
	return p, func() tea.Msg { return m }
}

// removeComment asks to drop the comment under the cursor.
func (p Diff) removeComment() (Diff, tea.Cmd) {
	c, ok := p.commentAt(p.cur)
	if !ok {
		return p, nil
	}
	m := CommentRemoveMsg{World: p.file.World, ID: c.ID}
	return p, func() tea.Msg { return m }
}

// commentKeysHint is the status of the comment row under the cursor.
func (p Diff) commentHint() string {
	if _, ok := p.commentAt(p.cur); !ok {
		return ""
	}
	return " · " + p.env.Keys.Binding(keymap.DiffUncomment).Help().Key + " removes the comment"
}
