package panes

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/keymap"
)

// DiffFile is one path's diff as the engine computed it: Old is the base
// (what the World's change started from), New the World's version.
type DiffFile struct {
	World, Path string
	Old, New    string
	// Diff is the engine's diff of Old and New with the default context;
	// the pane shows it as is, so its hunks are the ones `strata diff`
	// prints and apply counts. Another context size lays out a diff of the
	// same two texts. nil: the pane diffs Old and New itself.
	Diff *diffview.FileDiff
	// Drift: the source now differs from the base (apply will merge).
	// SourceDiff is the engine's diff of the source now against New, for
	// the vs-source view; nil with Drift set means the source now holds
	// New. Source is the source's text.
	Drift      bool
	Source     string
	SourceDiff *diffview.FileDiff
	// LateBase: the source changed before the base was captured.
	LateBase bool
	// BaseHash and WorldHash identify Old and New; picks carry them so
	// apply refuses them if either moved.
	BaseHash, WorldHash string
	// Note replaces the diff for what has no text to show (a directory, a
	// whiteout of a directory, an error reading a side).
	Note string
	// Sel is the path's existing selection (from an earlier visit); nil
	// with PickAll set means the whole path was picked from the list.
	Sel     *diffview.Selection
	PickAll bool
}

// DiffPicksMsg says the picks of one path changed; Sel is nil for a path
// that can only be picked whole (State says which).
type DiffPicksMsg struct {
	World, Path string
	Sel         *diffview.Selection
	State       PickState
}

// Diff shows one path's diff with a hunk cursor and hunk/line picking.
type Diff struct {
	env  *Env
	file DiffFile
	fd   *diffview.FileDiff
	sel  *diffview.Selection
	// sfd is the World against the source now (file.Drift only); vsSource
	// shows it instead of fd. It is a view: picks are made on fd.
	sfd      *diffview.FileDiff
	vsSource bool
	// numbered is the diff hunks are numbered in (the engine's, with the
	// default context), for the "hunk N" labels.
	numbered *diffview.FileDiff
	// whole is the pick of a file that has no hunks to pick (summarised).
	whole bool

	context    int
	sideBySide bool
	wrap       bool

	rows   []diffview.Row
	cur    int
	anchor int // first row of the line range being selected; -1 = none
	offset int
	width  int
	height int
	loaded bool

	// comments are the open review round's comments on this file;
	// noteRows the rows of rows that draw them.
	comments []DiffComment
	noteRows map[int]DiffComment
}

// NewDiff makes an empty Diff pane.
func NewDiff(env *Env) Diff {
	return Diff{env: env, context: diffview.DefaultContext, anchor: -1, width: 80, height: 20}
}

// SetFile shows a file, keeping its selection and the view settings.
func (p Diff) SetFile(f DiffFile) Diff {
	same := p.loaded && f.World == p.file.World && f.Path == p.file.Path
	if !same {
		p.comments = nil // the root sends the new file's (SetComments)
	}
	// The same file again (it changed on disk): the cursor stays on its
	// line, or its hunk, where they still exist.
	at, screenRow := p.spot(), p.cur-p.offset
	p.file = f
	p.loaded = true
	p.fd, p.sfd = p.diffs(f, p.context)
	switch {
	case f.Diff != nil:
		p.numbered = f.Diff
	case p.context == diffview.DefaultContext:
		p.numbered = p.fd
	default:
		p.numbered = diffview.Diff(f.Old, f.New, diffview.Options{})
	}
	if !same || !f.Drift {
		p.vsSource = false
	}
	p.whole = f.PickAll
	switch {
	case p.fd.Summarised() || f.Note != "":
		p.sel = nil
	case f.Sel != nil:
		if s, err := f.Sel.Retarget(p.fd); err == nil {
			p.sel = s
		} else {
			p.sel = diffview.NewSelection(p.fd, f.PickAll)
		}
	default:
		p.sel = diffview.NewSelection(p.fd, f.PickAll)
	}
	if !same {
		p.cur, p.offset, p.anchor = 0, 0, -1
	}
	p = p.relayout()
	if !same {
		p.cur = p.firstHunkRow()
		return p
	}
	if i, ok := p.find(at); ok {
		p.cur = i
		p.offset = clamp(i-screenRow, 0, max(len(p.rows)-p.body(), 0))
	}
	if p.anchor >= len(p.rows) || (p.anchor >= 0 && p.rows[p.anchor].Hunk != p.rows[p.cur].Hunk) {
		p.anchor = -1 // the range's lines moved under it
	}
	return p.scrollToCursor()
}

// diffSpot is what the cursor is on, to find it again in another diff of
// the file: a line (its side, text and number) or else a hunk.
type diffSpot struct {
	hunk int
	line bool
	op   diffview.Op
	text string
	no   int
}

func (p Diff) lineOf(r diffview.Row) (diffview.Line, bool) {
	fd := p.shown()
	if fd == nil || r.Hunk < 0 || r.Hunk >= len(fd.Hunks) || r.Line < 0 || r.Line >= len(fd.Hunks[r.Hunk].Lines) {
		return diffview.Line{}, false
	}
	return fd.Hunks[r.Hunk].Lines[r.Line], true
}

func spotNo(l diffview.Line) int {
	if l.NewNo > 0 {
		return l.NewNo
	}
	return l.OldNo
}

func (p Diff) spot() diffSpot {
	if p.cur < 0 || p.cur >= len(p.rows) {
		return diffSpot{hunk: -1}
	}
	r := p.rows[p.cur]
	s := diffSpot{hunk: r.Hunk}
	if l, ok := p.lineOf(r); ok && r.Kind != diffview.RowHunkHeader {
		s.line, s.op, s.text, s.no = true, l.Op, l.Text, spotNo(l)
	}
	return s
}

// find is the row of s in the layout: the same line (the nearest to its
// old number when the text repeats), else the header of the same hunk
// (the last one when there are fewer now).
func (p Diff) find(s diffSpot) (int, bool) {
	if s.line {
		best, dist := -1, 0
		for i, r := range p.rows {
			if r.Continuation || r.Kind == diffview.RowHunkHeader {
				continue
			}
			l, ok := p.lineOf(r)
			if !ok || l.Op != s.op || l.Text != s.text {
				continue
			}
			d := spotNo(l) - s.no
			if d < 0 {
				d = -d
			}
			if best < 0 || d < dist {
				best, dist = i, d
			}
		}
		if best >= 0 {
			return best, true
		}
	}
	if s.hunk < 0 {
		return 0, false
	}
	last := -1
	for i, r := range p.rows {
		if r.Kind != diffview.RowHunkHeader {
			continue
		}
		if r.Hunk == s.hunk {
			return i, true
		}
		if r.Hunk < s.hunk {
			last = i
		}
	}
	return last, last >= 0
}

// diffs are the base and the source diffs of f with c context lines: the
// engine's own at the default context.
func (p Diff) diffs(f DiffFile, c int) (fd, sfd *diffview.FileDiff) {
	fd, sfd = f.Diff, f.SourceDiff
	if fd == nil || c != diffview.DefaultContext {
		fd = diffview.Diff(f.Old, f.New, diffview.Options{Context: contextOption(c)})
	}
	if f.SourceDiff != nil && c != diffview.DefaultContext {
		sfd = diffview.Diff(f.Source, f.New, diffview.Options{Context: contextOption(c)})
	}
	return fd, sfd
}

// shown is the diff on screen.
func (p Diff) shown() *diffview.FileDiff {
	if p.vsSource {
		return p.sfd
	}
	return p.fd
}

// VsSource reports whether the World is shown against the source now.
func (p Diff) VsSource() bool { return p.vsSource }

// Clear shows nothing.
func (p Diff) Clear() Diff {
	p.loaded = false
	p.file = DiffFile{}
	p.fd, p.sel, p.rows, p.sfd, p.vsSource, p.numbered = nil, nil, nil, nil, false, nil
	return p
}

// File is what the pane shows.
func (p Diff) File() DiffFile { return p.file }

// FileDiff is the diff shown (nil when none).
func (p Diff) FileDiff() *diffview.FileDiff { return p.fd }

// Selection is the current file's selection (nil for summarised files).
func (p Diff) Selection() *diffview.Selection { return p.sel }

// Context is the number of context lines.
func (p Diff) Context() int { return p.context }

// SideBySide reports the layout.
func (p Diff) SideBySide() bool { return p.sideBySide }

// Wrap reports whether long lines wrap.
func (p Diff) Wrap() bool { return p.wrap }

// CurrentHunk is the hunk under the cursor (-1 when none).
func (p Diff) CurrentHunk() int {
	if p.cur < 0 || p.cur >= len(p.rows) {
		return -1
	}
	return p.rows[p.cur].Hunk
}

// RangeActive reports whether a line range is being selected.
func (p Diff) RangeActive() bool { return p.anchor >= 0 }

// SetSize lays the diff out for a new size.
func (p Diff) SetSize(w, h int) Diff {
	if w == p.width && h == p.height {
		return p
	}
	p.width, p.height = w, h
	return p.relayout()
}

func (p Diff) relayout() Diff {
	fd, sel := p.shown(), p.sel
	if p.vsSource {
		sel = nil
	}
	if fd == nil {
		p.rows = nil
		return p
	}
	p.rows = diffview.Layout(fd, diffview.LayoutOptions{
		Width:           max(p.width-1, 4), // one cell for the cursor gutter
		Margin:          1,                 // side by side: as much before the right gutter
		SideBySide:      p.sideBySide,
		Wrap:            p.wrap,
		ShowLineNumbers: true,
		Selection:       sel,
		HunkLabels:      p.hunkLabels(),
	})
	p = p.addCommentRows()
	p.cur = clamp(p.cur, 0, len(p.rows)-1)
	return p
}

func (p Diff) firstHunkRow() int {
	for i, r := range p.rows {
		if r.Kind == diffview.RowHunkHeader {
			return i
		}
	}
	return 0
}

// hunkLabels name each hunk of the base diff as apply counts it (in the
// engine's diff with the default context), as `strata diff` prints them.
func (p Diff) hunkLabels() []string {
	if p.vsSource || p.fd == nil || p.fd.Summarised() || p.numbered == nil || p.numbered.Summarised() {
		return nil
	}
	var out []string
	for _, nums := range diffview.HunkNumbers(p.fd, p.numbered) {
		out = append(out, diffview.HunkLabel(nums))
	}
	return out
}

// headerLines is 2 when a warning line follows the title line.
func (p Diff) headerLines() int {
	if p.loaded && p.file.Note == "" && (p.file.Drift || p.file.LateBase) {
		return 2
	}
	return 1
}

func (p Diff) body() int { return max(p.height-p.headerLines(), 1) }

// Update handles keys while focused.
func (p Diff) Update(msg tea.Msg) (Diff, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		if k.String() == "esc" && p.anchor >= 0 {
			p.anchor = -1
			return p, nil
		}
		if a, ok := p.env.Keys.Match(keymap.Diff, k); ok {
			return p.Do(a)
		}
	}
	return p, nil
}

// Do performs one action of the diff area.
func (p Diff) Do(a string) (Diff, tea.Cmd) {
	n := len(p.rows)
	switch a {
	case keymap.DiffUp:
		p.cur = p.moveLine(-1)
	case keymap.DiffDown:
		p.cur = p.moveLine(1)
	case keymap.DiffPageUp:
		p.cur = clamp(p.cur-p.body()+1, 0, n-1)
	case keymap.DiffPageDown:
		p.cur = clamp(p.cur+p.body()-1, 0, n-1)
	case keymap.DiffNextHunk, keymap.DiffPrevHunk:
		p.anchor = -1
		p.cur = p.hunkRow(a == keymap.DiffNextHunk)
	case keymap.DiffPick:
		return p.pick()
	case keymap.DiffComment:
		return p.comment()
	case keymap.DiffUncomment:
		return p.removeComment()
	case keymap.DiffSendReview:
		if !p.loaded {
			return p, nil
		}
		return p, action(ActionMsg{Action: a, World: p.file.World, Path: p.file.Path})
	case keymap.DiffVsSource:
		if !p.loaded || !p.file.Drift || p.file.Note != "" {
			return p, nil
		}
		p.vsSource = !p.vsSource
		p.anchor = -1
		p = p.relayout()
		p.cur, p.offset = p.firstHunkRow(), 0
	case keymap.DiffRange:
		if p.vsSource {
			return p, nil
		}
		if p.anchor >= 0 {
			p.anchor = -1
		} else if p.cur < n && p.rows[p.cur].Kind == diffview.RowLine {
			p.anchor = p.cur
		}
	case keymap.DiffSideBySide:
		p.sideBySide = !p.sideBySide
		p.anchor = -1
		p = p.keepHunk(p.relayout)
	case keymap.DiffWrap:
		p.wrap = !p.wrap
		p.anchor = -1
		p = p.keepHunk(p.relayout)
	case keymap.DiffLessContext, keymap.DiffMoreContext:
		c := p.context
		if a == keymap.DiffLessContext {
			c = max(c-1, 0)
		} else {
			c = min(c+1, 50)
		}
		return p.setContext(c), nil
	case keymap.DiffEdit, keymap.DiffApply, keymap.DiffNextFile, keymap.DiffPrevFile, keymap.DiffBack:
		return p, action(ActionMsg{Action: a, World: p.file.World, Path: p.file.Path})
	}
	p = p.scrollToCursor()
	return p, nil
}

// setContext re-diffs with c context lines; picks follow their lines.
func (p Diff) setContext(c int) Diff {
	if !p.loaded || c == p.context {
		p.context = c
		return p
	}
	p.context = c
	fd, sfd := p.diffs(p.file, c)
	p.sfd = sfd
	if p.sel != nil {
		if s, err := p.sel.Retarget(fd); err == nil {
			p.sel = s
		}
	}
	p.fd = fd
	p.anchor = -1
	return p.keepHunk(p.relayout).scrollToCursor()
}

// keepHunk relayouts and puts the cursor back on the hunk it was in.
func (p Diff) keepHunk(relayout func() Diff) Diff {
	h := p.CurrentHunk()
	p = relayout()
	for i, r := range p.rows {
		if r.Hunk == h && r.Kind == diffview.RowHunkHeader {
			p.cur = i
			break
		}
	}
	return p
}

func (p Diff) moveLine(d int) int {
	i := clamp(p.cur+d, 0, len(p.rows)-1)
	// Inside a range the cursor stays within the anchor's hunk.
	if p.anchor >= 0 && p.rows[i].Hunk != p.rows[p.anchor].Hunk {
		return p.cur
	}
	return i
}

func (p Diff) hunkRow(next bool) int {
	h := p.CurrentHunk()
	for i := range p.rows {
		j := i
		if !next {
			j = len(p.rows) - 1 - i
		}
		r := p.rows[j]
		if r.Kind != diffview.RowHunkHeader {
			continue
		}
		if (next && r.Hunk > h) || (!next && r.Hunk < h && r.Hunk >= 0) {
			return j
		}
	}
	if !next && h >= 0 { // already in the first hunk: go to its header
		for i, r := range p.rows {
			if r.Hunk == h && r.Kind == diffview.RowHunkHeader {
				return i
			}
		}
	}
	return p.cur
}

// pick toggles the range being selected, else the hunk under the cursor;
// a summarised file toggles as a whole.
func (p Diff) pick() (Diff, tea.Cmd) {
	if !p.loaded || p.vsSource {
		return p, nil // the source view is for reading: picks are made on the base diff
	}
	if p.sel == nil {
		p.whole = !p.whole
		st := PickNone
		if p.whole {
			st = PickAll
		}
		return p, p.picksChanged(st)
	}
	h := p.CurrentHunk()
	if h < 0 {
		return p, nil
	}
	if p.anchor >= 0 {
		lo, hi := p.rangeLines()
		all := true
		for l := lo; l <= hi; l++ {
			if p.fd.Hunks[h].Lines[l].Op != diffview.Equal && !p.sel.IsPicked(h, l) {
				all = false
			}
		}
		if all {
			_ = p.sel.UnpickLines(h, lo, hi)
		} else {
			_ = p.sel.PickLines(h, lo, hi)
		}
		p.anchor = -1
	} else {
		_ = p.sel.ToggleHunk(h)
	}
	p = p.relayout()
	return p, p.picksChanged(p.state())
}

func (p Diff) state() PickState {
	hunks, lines := p.sel.Count()
	switch {
	case lines == 0:
		return PickNone
	case hunks == len(p.fd.Hunks) && lines == p.fd.Added+p.fd.Removed:
		return PickAll
	}
	return PickPartial
}

func (p Diff) picksChanged(st PickState) tea.Cmd {
	m := DiffPicksMsg{World: p.file.World, Path: p.file.Path, Sel: p.sel, State: st}
	return func() tea.Msg { return m }
}

// rangeLines is the range of hunk line indices between anchor and cursor.
func (p Diff) rangeLines() (lo, hi int) {
	lo, hi = 1<<30, -1
	from, to := min(p.anchor, p.cur), max(p.anchor, p.cur)
	h := p.rows[p.anchor].Hunk
	for i := from; i <= to; i++ {
		r := p.rows[i]
		if r.Hunk != h {
			continue
		}
		for _, l := range []int{r.Line, r.PairLine} {
			if l >= 0 {
				lo, hi = min(lo, l), max(hi, l)
			}
		}
	}
	if hi < 0 {
		return 0, -1
	}
	return lo, hi
}

func (p Diff) scrollToCursor() Diff {
	b := p.body()
	if p.cur < p.offset {
		p.offset = p.cur
	}
	if p.cur >= p.offset+b {
		p.offset = p.cur - b + 1
	}
	p.offset = clamp(p.offset, 0, max(len(p.rows)-b, 0))
	return p
}

// Click puts the cursor on the row at y.
func (p Diff) Click(y int) (Diff, tea.Cmd) {
	i := p.offset + y - p.headerLines()
	if i >= 0 && i < len(p.rows) {
		p.cur = i
	}
	return p, nil
}

// Scroll moves the view by delta rows.
func (p Diff) Scroll(delta int) (Diff, tea.Cmd) {
	p.offset = clamp(p.offset+delta, 0, max(len(p.rows)-p.body(), 0))
	p.cur = clamp(p.cur, p.offset, min(p.offset+p.body(), len(p.rows))-1)
	return p, nil
}

// View draws the header and the visible rows.
func (p Diff) View(width, height int, focused bool) string {
	st := p.env.Styles
	if height <= 0 {
		return ""
	}
	if !p.loaded {
		return block([]string{st.Muted.Render("select a changed path")}, width, height)
	}
	head := st.Bold.Render(p.file.Path)
	if p.file.Note != "" {
		return block([]string{head, "", st.Muted.Render(p.file.Note)}, width, height)
	}
	fd := p.shown()
	if fd == nil { // the source now holds the World's version
		return block([]string{
			head + st.Muted.Render(" · against the source now"), p.driftLine(),
			"", st.Muted.Render("the source now holds exactly the World's version"),
		}, width, height)
	}
	head += " " + st.Added.Render(fmt.Sprintf("+%d", fd.Added)) + " " + st.Removed.Render(fmt.Sprintf("-%d", fd.Removed))
	if len(fd.Hunks) > 0 {
		head += st.Muted.Render(fmt.Sprintf(" · hunk %d/%d", p.CurrentHunk()+1, len(fd.Hunks)))
	}
	switch {
	case p.vsSource:
		head += st.Warning.Render(" · against the source now: view only")
	case p.sel != nil:
		if h, l := p.sel.Count(); l > 0 {
			head += st.Picked.Render(fmt.Sprintf(" · picked %d/%s, %s", h, Count(len(fd.Hunks), "hunk", "hunks"), Count(l, "line", "lines")))
		}
	case p.whole:
		head += st.Picked.Render(" · picked whole")
	}
	mode := "unified"
	if p.sideBySide {
		mode = "side by side"
	}
	head += st.Muted.Render(fmt.Sprintf(" · %s · ctx %d", mode, p.context))
	if p.anchor >= 0 {
		head += st.Warning.Render(" · range: move, " + p.env.Keys.Binding(keymap.DiffPick).Help().Key + " picks, " + p.env.Keys.Binding(keymap.DiffComment).Help().Key + " comments")
	}
	if n := len(p.comments); n > 0 {
		head += st.Accent.Render(" · " + Count(n, "comment", "comments"))
	}
	if h := p.commentHint(); h != "" {
		head += st.Muted.Render(h)
	}
	lines := []string{head}
	if p.headerLines() == 2 {
		lines = append(lines, p.driftLine())
	}
	body := height - len(lines)
	off := p.offset
	if p.cur < off || p.cur >= off+body { // the size changed since the last move
		off = clamp(p.cur-body/2, 0, max(len(p.rows)-body, 0))
	}
	lo, hi := -1, -1
	if p.anchor >= 0 {
		lo, hi = min(p.anchor, p.cur), max(p.anchor, p.cur)
	}
	curHunk := p.CurrentHunk()
	for i := off; i < min(off+body, len(p.rows)); i++ {
		r := p.rows[i]
		gutter := " "
		switch {
		case i == p.cur && focused:
			gutter = st.Accent.Render("▶")
		case i == p.cur:
			gutter = st.Muted.Render("▷")
		case i >= lo && i <= hi:
			gutter = st.Warning.Render("┃")
		}
		var b strings.Builder
		b.WriteString(gutter)
		if c, ok := p.commentAt(i); ok {
			style := st.Accent
			if c.Stale {
				style = st.Warning
			}
			b.WriteString(style.Render(fit(r.Text(), max(width-1, 1))))
			lines = append(lines, b.String())
			continue
		}
		for _, s := range r.Segments {
			b.WriteString(p.roleStyle(s.Role, r, curHunk).Render(s.Text))
		}
		lines = append(lines, b.String())
	}
	return block(lines, width, height)
}

// driftLine warns that the source moved under the path since the base.
func (p Diff) driftLine() string {
	st := p.env.Styles
	key := p.env.Keys.Binding(keymap.DiffVsSource).Help().Key
	switch {
	case p.file.LateBase:
		return st.Warning.Render("▲ the source changed before the World's base was captured: apply will ask to merge by hand")
	case p.vsSource:
		return st.Warning.Render("▲ source changed since the World's base: apply will merge") + st.Muted.Render(" · "+key+": vs base")
	}
	return st.Warning.Render("▲ source changed since the World's base: apply will merge") + st.Muted.Render(" · "+key+": vs source now")
}

func (p Diff) roleStyle(role diffview.Role, r diffview.Row, curHunk int) lipgloss.Style {
	st := p.env.Styles
	switch role {
	case diffview.RoleAdded:
		return st.Added
	case diffview.RoleRemoved:
		return st.Removed
	case diffview.RoleAddedWord:
		return st.AddedWord
	case diffview.RoleRemovedWord:
		return st.RemovedWord
	case diffview.RoleHunkHeader:
		if r.Hunk == curHunk {
			return st.HunkHeaderFocused
		}
		return st.HunkHeader
	case diffview.RoleFileHeader:
		return st.Bold
	case diffview.RoleGutter, diffview.RoleFiller:
		return st.LineNumber
	case diffview.RoleMeta:
		return st.Muted
	case diffview.RolePickMark:
		return st.Picked
	}
	return st.Text
}

// contextOption maps a context size to diffview.Options.Context, where 0
// means the default and a negative value means none.
func contextOption(c int) int {
	if c == 0 {
		return -1
	}
	return c
}
