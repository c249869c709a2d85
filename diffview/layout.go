package diffview

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"

	"github.com/stratahq/strata/fsx"
)

// Role is what a piece of a display row means; the TUI maps roles to theme
// styles.
type Role uint8

const (
	RoleContext Role = iota
	RoleAdded
	RoleRemoved
	// RoleAddedWord and RoleRemovedWord mark the changed words within an
	// added or removed line (intra-line highlight).
	RoleAddedWord
	RoleRemovedWord
	RoleHunkHeader
	RoleFileHeader
	// RoleGutter is line numbers, blank gutter cells and the side-by-side
	// separator.
	RoleGutter
	// RoleMeta is summaries (binary, too large, no changes) and
	// "\ No newline at end of file".
	RoleMeta
	// RoleFiller is an empty side-by-side cell facing a line on the other
	// side.
	RoleFiller
	// RolePickMark is the pick column (picked, partially picked, unpicked).
	RolePickMark
)

var roleNames = [...]string{"context", "added", "removed", "added-word", "removed-word", "hunk-header", "file-header", "gutter", "meta", "filler", "pick-mark"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Segment is a run of text with one role.
type Segment struct {
	Text string
	Role Role
}

// RowKind says what a row shows.
type RowKind uint8

const (
	RowFileHeader RowKind = iota
	RowHunkHeader
	RowLine
	// RowNoNewline is the "\ No newline at end of file" note under a line.
	RowNoNewline
	// RowSummary stands for a file that was not diffed, or has no changes.
	RowSummary
)

// Row is one terminal line of a laid-out diff. Its segments' total width,
// in terminal cells, is exactly LayoutOptions.Width (at most, for Width < 4).
type Row struct {
	Kind     RowKind
	Segments []Segment
	// Hunk is the hunk index, -1 for file-level rows.
	Hunk int
	// Line is the index in the hunk's Lines of the line shown (the left one
	// side by side, or the right one when the left is a filler); -1 for
	// header and summary rows.
	Line int
	// PairLine is, side by side, the index of the right-hand line when the
	// left holds another line; -1 otherwise.
	PairLine int
	// Continuation marks a wrapped continuation of the row above.
	Continuation bool
	// Picked: a change line shown is picked; on a hunk header, the whole
	// hunk is picked.
	Picked bool
}

// Text is the row's plain text.
func (r Row) Text() string {
	var b strings.Builder
	for _, s := range r.Segments {
		b.WriteString(s.Text)
	}
	return b.String()
}

// Width is the row's width in terminal cells.
func (r Row) Width() int {
	w := 0
	for _, s := range r.Segments {
		w += uniseg.StringWidth(s.Text)
	}
	return w
}

// LayoutOptions control Layout.
type LayoutOptions struct {
	// Width in terminal cells; every row fills it exactly. <= 0 means
	// unlimited: no wrapping, truncation or padding.
	Width int
	// SideBySide puts old on the left and new on the right.
	SideBySide bool
	// Wrap long lines onto continuation rows; otherwise truncate with "…".
	Wrap bool
	// ShowLineNumbers adds a gutter with old and new line numbers.
	ShowLineNumbers bool
	// TabWidth expands tabs to stops this far apart; 0 means 4.
	TabWidth int
	// Selection, when set, adds a pick column marking picked lines and
	// the state of each hunk.
	Selection *Selection
	// Title, when set, is shown as a file header row first.
	Title string
	// HunkLabels, when set, follow each hunk's "@@ ... @@" header (the
	// numbers apply counts the hunk as, like `strata diff` prints them).
	HunkLabels []string
	// Marks for the pick column; defaults "✓", "~" and " ". Each must be
	// one cell wide.
	PickedMark, PartialMark, UnpickedMark string
	// Margin is the cells the caller draws before every row (a cursor
	// column), outside Width. Side by side, the right column starts with
	// as many blank cells after the separator, so both line-number
	// gutters sit as far from their column's edge.
	Margin int
}

const ellipsis = "…"

// Layout lays the whole diff out as rows.
func Layout(fd *FileDiff, opts LayoutOptions) []Row {
	l := newLayouter(fd, opts)
	var rows []Row
	rows = append(rows, l.fileRows()...)
	for i := range fd.Hunks {
		rows = append(rows, l.hunk(i)...)
	}
	return rows
}

// LayoutHunk lays out hunk i alone (its header and lines), so a viewer can
// lay out only what is visible. It returns nil for an out-of-range index.
func LayoutHunk(fd *FileDiff, i int, opts LayoutOptions) []Row {
	if i < 0 || i >= len(fd.Hunks) {
		return nil
	}
	return newLayouter(fd, opts).hunk(i)
}

// HunkRowCount is len(LayoutHunk(fd, i, opts)); without Wrap it is computed
// without laying anything out.
func HunkRowCount(fd *FileDiff, i int, opts LayoutOptions) int {
	if i < 0 || i >= len(fd.Hunks) {
		return 0
	}
	l := newLayouter(fd, opts)
	if !opts.Wrap || opts.Width <= 0 {
		return l.unwrappedCount(i)
	}
	return len(l.hunk(i))
}

// LayoutRange returns rows [from, from+n) of Layout(fd, opts) while laying
// out only the hunks that overlap the window (hunks before it are counted,
// which without Wrap costs O(1) each).
func LayoutRange(fd *FileDiff, opts LayoutOptions, from, n int) []Row {
	if n <= 0 || from < 0 {
		return nil
	}
	l := newLayouter(fd, opts)
	var out []Row
	pos := 0
	take := func(rows []Row) {
		for _, r := range rows {
			if pos >= from && len(out) < n {
				out = append(out, r)
			}
			pos++
		}
	}
	take(l.fileRows())
	for i := range fd.Hunks {
		if len(out) >= n {
			break
		}
		count := 0
		if !opts.Wrap || opts.Width <= 0 {
			count = l.unwrappedCount(i)
		}
		if count > 0 && pos+count <= from {
			pos += count
			continue
		}
		take(l.hunk(i))
	}
	return out
}

type layouter struct {
	fd       *FileDiff
	opts     LayoutOptions
	sel      *Selection
	numWidth int
	tabWidth int
	marks    [3]string // none, partial, all
}

func newLayouter(fd *FileDiff, opts LayoutOptions) *layouter {
	l := &layouter{fd: fd, opts: opts, sel: opts.Selection, tabWidth: opts.TabWidth}
	if s := l.sel; s != nil && (s.fd.OldLineCount != fd.OldLineCount || s.fd.NewLineCount != fd.NewLineCount) {
		// A selection made on another diff cannot be shown on this one.
		l.sel = nil
	}
	if l.tabWidth <= 0 {
		l.tabWidth = 4
	}
	if opts.ShowLineNumbers {
		l.numWidth = len(strconv.Itoa(max(fd.OldLineCount, fd.NewLineCount, 1)))
	}
	l.marks = [3]string{" ", "~", "✓"}
	for i, m := range []string{opts.UnpickedMark, opts.PartialMark, opts.PickedMark} {
		if m != "" && uniseg.StringWidth(m) == 1 {
			l.marks[i] = m
		}
	}
	return l
}

func (l *layouter) fileRows() []Row {
	var rows []Row
	if l.opts.Title != "" {
		rows = append(rows, l.fullRow(RowFileHeader, -1, RoleFileHeader, l.opts.Title))
	}
	fd := l.fd
	var summary string
	switch {
	case fd.Binary:
		summary = fmt.Sprintf("Binary file differs (%s → %s)", fsx.HumanBytes(int64(fd.OldSize)), fsx.HumanBytes(int64(fd.NewSize)))
	case fd.TooLarge:
		summary = fmt.Sprintf("File too large to diff (%s → %s)", fsx.HumanBytes(int64(fd.OldSize)), fsx.HumanBytes(int64(fd.NewSize)))
	case len(fd.Hunks) == 0:
		summary = "No changes"
	}
	if summary != "" {
		rows = append(rows, l.fullRow(RowSummary, -1, RoleMeta, summary))
	}
	return rows
}

// fullRow is a one-row, full-width text (headers, summaries), truncated.
func (l *layouter) fullRow(kind RowKind, hunk int, role Role, text string) Row {
	cells := textCells(text, role, role, nil, l.tabWidth)
	segs := l.fit(l.opts.Width, role, cells)
	return Row{Kind: kind, Segments: segs, Hunk: hunk, Line: -1, PairLine: -1}
}

func (l *layouter) hunkHeader(i int) Row {
	h := &l.fd.Hunks[i]
	var cells []cell
	picked := false
	if l.sel != nil {
		state := l.sel.HunkState(i)
		picked = state == PickedAll
		cells = append(cells, cell{l.marks[state], 1, RolePickMark}, cell{" ", 1, RoleHunkHeader})
	}
	header := h.Header
	if i < len(l.opts.HunkLabels) && l.opts.HunkLabels[i] != "" {
		header += " " + l.opts.HunkLabels[i]
	}
	cells = append(cells, textCells(header, RoleHunkHeader, RoleHunkHeader, nil, l.tabWidth)...)
	return Row{Kind: RowHunkHeader, Segments: l.fit(l.opts.Width, RoleHunkHeader, cells), Hunk: i, Line: -1, PairLine: -1, Picked: picked}
}

func (l *layouter) unwrappedCount(i int) int {
	h := &l.fd.Hunks[i]
	n := 1
	if !l.opts.SideBySide {
		for k := range h.Lines {
			n++
			if h.Lines[k].NoNewline {
				n++
			}
		}
		return n
	}
	for _, p := range pairLines(h) {
		n++
		if p.noNewline(h) {
			n++
		}
	}
	return n
}

func (l *layouter) hunk(i int) []Row {
	rows := []Row{l.hunkHeader(i)}
	if l.opts.SideBySide {
		return append(rows, l.sideBySide(i)...)
	}
	h := &l.fd.Hunks[i]
	for k := range h.Lines {
		rows = append(rows, l.unifiedLine(i, k)...)
		if h.Lines[k].NoNewline {
			rows = append(rows, l.noNewlineRow(i, k))
		}
	}
	return rows
}

func (l *layouter) noNewlineRow(h, k int) Row {
	r := l.fullRow(RowNoNewline, h, RoleMeta, `\ No newline at end of file`)
	r.Line = k
	return r
}

func lineRoles(op Op) (text, word Role) {
	switch op {
	case Insert:
		return RoleAdded, RoleAddedWord
	case Delete:
		return RoleRemoved, RoleRemovedWord
	}
	return RoleContext, RoleContext
}

// gutterCells is the line-number gutter; blank for continuation rows.
func (l *layouter) gutterCells(nums []int, blank bool) []cell {
	if l.numWidth == 0 {
		return nil
	}
	cells := make([]cell, 0, len(nums)+2)
	for _, n := range nums {
		buf := make([]byte, 0, l.numWidth+1)
		digits := ""
		if n > 0 && !blank {
			digits = strconv.Itoa(n)
		}
		for range l.numWidth - len(digits) {
			buf = append(buf, ' ')
		}
		buf = append(buf, digits...)
		buf = append(buf, ' ')
		cells = append(cells, cell{string(buf), l.numWidth + 1, RoleGutter})
	}
	return cells
}

// prefixCells is gutter, pick mark and op marker of a line row.
func (l *layouter) prefixCells(line *Line, nums []int, cont bool) []cell {
	cells := l.gutterCells(nums, cont)
	if cells == nil {
		cells = make([]cell, 0, 2)
	}
	role, _ := lineRoles(line.Op)
	if l.sel != nil {
		mark := " "
		if !cont && line.Op != Equal && l.sel.picked(line) {
			mark = l.marks[PickedAll]
		}
		cells = append(cells, cell{mark, 1, RolePickMark})
	}
	marker := string(line.Op.Marker())
	if cont {
		marker = " "
	}
	return append(cells, cell{marker, 1, role})
}

func (l *layouter) unifiedLine(h, k int) []Row {
	line := &l.fd.Hunks[h].Lines[k]
	role, word := lineRoles(line.Op)
	nums := []int{line.OldNo, line.NewNo}
	prefixW := cellsWidth(l.prefixCells(line, nums, false))
	textW := 0
	if l.opts.Width > 0 {
		textW = max(l.opts.Width-prefixW, 1)
	}
	body := l.bodyRows(textCells(line.Text, role, word, line.Changed, l.tabWidth), textW)
	picked := line.Op != Equal && l.sel != nil && l.sel.picked(line)
	rows := make([]Row, len(body))
	for r, cells := range body {
		rows[r] = Row{
			Kind: RowLine, Segments: l.fit(l.opts.Width, role, l.prefixCells(line, nums, r > 0), cells),
			Hunk: h, Line: k, PairLine: -1, Continuation: r > 0, Picked: picked,
		}
	}
	return rows
}

// bodyRows wraps or truncates text cells to width (0: unlimited).
func (l *layouter) bodyRows(cells []cell, width int) [][]cell {
	if width <= 0 {
		return [][]cell{cells}
	}
	if !l.opts.Wrap {
		return [][]cell{truncateCells(cells, width)}
	}
	return wrapCells(cells, width)
}

// linePair is one side-by-side row: a left (old) and right (new) line index,
// -1 for a filler.
type linePair struct{ left, right int }

func (p linePair) noNewline(h *Hunk) bool {
	return (p.left >= 0 && h.Lines[p.left].NoNewline) || (p.right >= 0 && h.Lines[p.right].NoNewline)
}

// pairLines aligns a hunk for side by side: context lines face themselves,
// the k-th deleted line of a change faces its k-th inserted line.
func pairLines(h *Hunk) []linePair {
	var pairs []linePair
	for k := 0; k < len(h.Lines); {
		if h.Lines[k].Op == Equal {
			pairs = append(pairs, linePair{k, k})
			k++
			continue
		}
		var dels, ins []int
		for ; k < len(h.Lines) && h.Lines[k].Op == Delete; k++ {
			dels = append(dels, k)
		}
		for ; k < len(h.Lines) && h.Lines[k].Op == Insert; k++ {
			ins = append(ins, k)
		}
		for m := 0; m < max(len(dels), len(ins)); m++ {
			p := linePair{-1, -1}
			if m < len(dels) {
				p.left = dels[m]
			}
			if m < len(ins) {
				p.right = ins[m]
			}
			pairs = append(pairs, p)
		}
	}
	return pairs
}

func (l *layouter) sideBySide(h int) []Row {
	hunk := &l.fd.Hunks[h]
	// The separator, then the margin the caller's cursor column gives the
	// left column, so the two gutters match.
	margin := max(l.opts.Margin, 0)
	sep := "│" + strings.Repeat(" ", margin)
	leftW, rightW := 0, 0
	if l.opts.Width > 0 {
		leftW = (l.opts.Width - 1 - margin) / 2
		rightW = l.opts.Width - 1 - margin - leftW
	}
	var rows []Row
	for _, p := range pairLines(hunk) {
		left := l.sideColumn(hunk, p.left, true, leftW)
		right := l.sideColumn(hunk, p.right, false, rightW)
		n := max(len(left), len(right))
		row := Row{Kind: RowLine, Hunk: h, Line: p.left, PairLine: -1}
		if p.left < 0 {
			row.Line = p.right
		} else if p.right >= 0 && p.right != p.left {
			row.PairLine = p.right
		}
		for _, idx := range []int{p.left, p.right} {
			if idx >= 0 && l.sel != nil && l.sel.picked(&hunk.Lines[idx]) {
				row.Picked = true
			}
		}
		for r := 0; r < n; r++ {
			var segs []Segment
			segs = append(segs, l.columnRow(left, r, leftW)...)
			segs = append(segs, Segment{sep, RoleGutter})
			segs = append(segs, l.columnRow(right, r, rightW)...)
			out := row
			out.Segments = mergeSegments(segs)
			out.Continuation = r > 0
			rows = append(rows, out)
		}
		if p.noNewline(hunk) {
			rows = append(rows, l.noNewlineRow(h, row.Line))
		}
	}
	return rows
}

// sideColumn lays one side's line into column rows of width w (cells
// already fitted); nil for a filler.
func (l *layouter) sideColumn(h *Hunk, idx int, left bool, w int) [][]Segment {
	if idx < 0 {
		return nil
	}
	if l.opts.Width > 0 && w <= 0 {
		return [][]Segment{nil}
	}
	line := &h.Lines[idx]
	role, word := lineRoles(line.Op)
	num := line.NewNo
	if left {
		num = line.OldNo
	}
	prefixW := cellsWidth(l.prefixCells(line, []int{num}, false))
	textW := 0
	if w > 0 {
		textW = max(w-prefixW, 1)
	}
	body := l.bodyRows(textCells(line.Text, role, word, line.Changed, l.tabWidth), textW)
	out := make([][]Segment, len(body))
	for r, cells := range body {
		out[r] = l.fit(w, role, l.prefixCells(line, []int{num}, r > 0), cells)
	}
	return out
}

func (l *layouter) columnRow(col [][]Segment, r, w int) []Segment {
	if r < len(col) {
		return col[r]
	}
	if w <= 0 {
		return nil
	}
	return []Segment{{strings.Repeat(" ", w), RoleFiller}}
}

// cell is one grapheme cluster as displayed.
type cell struct {
	text  string
	width int
	role  Role
}

func cellsWidth(cells []cell) int {
	w := 0
	for _, c := range cells {
		w += c.width
	}
	return w
}

// textCells turns a line's text into display cells: tabs expanded, control
// characters shown as their Unicode control pictures, invalid UTF-8 as
// U+FFFD, a trailing CR dropped, and bytes inside spans given the word role.
func textCells(text string, role, word Role, spans []Span, tabWidth int) []cell {
	text = strings.TrimSuffix(text, "\r")
	cells := make([]cell, 0, len(text))
	col, off, si := 0, 0, 0
	state := -1
	for rest := text; rest != ""; {
		var cluster string
		var w int
		if c := rest[0]; c >= 0x20 && c < 0x7f && (len(rest) == 1 || rest[1] < 0x80) {
			// Printable ASCII not followed by a combining sequence is a
			// cluster of its own, one cell wide: skip the segmenter.
			cluster, rest, w, state = rest[:1], rest[1:], 1, -1
		} else {
			cluster, rest, w, state = uniseg.FirstGraphemeClusterInString(rest, state)
		}
		r := role
		for si < len(spans) && spans[si].End <= off {
			si++
		}
		if si < len(spans) && off >= spans[si].Start {
			r = word
		}
		off += len(cluster)
		switch c := cluster[0]; {
		case c == '\t':
			n := tabWidth - col%tabWidth
			for range n {
				cells = append(cells, cell{" ", 1, r})
			}
			col += n
			continue
		case c < 0x20:
			cluster, w = string(rune(0x2400+int(c))), 1
		case c == 0x7f:
			cluster, w = "\u2421", 1
		case !utf8.ValidString(cluster) || isC1(cluster):
			// C1 controls could be read as escape sequences by a terminal.
			cluster, w = "\uFFFD", 1
		}
		cells = append(cells, cell{cluster, w, r})
		col += w
	}
	return cells
}

func isC1(cluster string) bool {
	r, _ := utf8.DecodeRuneInString(cluster)
	return r >= 0x80 && r <= 0x9f
}

// wrapCells breaks cells into rows at most width wide; a cluster wider than
// a whole row is replaced by an ellipsis.
func wrapCells(cells []cell, width int) [][]cell {
	var rows [][]cell
	var cur []cell
	w := 0
	for _, c := range cells {
		if c.width > width {
			c = cell{ellipsis, 1, c.role}
		}
		if w+c.width > width {
			rows = append(rows, cur)
			cur, w = nil, 0
		}
		cur = append(cur, c)
		w += c.width
	}
	return append(rows, cur)
}

// truncateCells keeps what fits in width, ending in an ellipsis when text
// was cut.
func truncateCells(cells []cell, width int) []cell {
	if cellsWidth(cells) <= width {
		return cells
	}
	w := 0
	for i, c := range cells {
		if w+c.width > width-1 {
			return append(cells[:i:i], cell{ellipsis, 1, c.role})
		}
		w += c.width
	}
	return cells
}

// fit clips the concatenated cell parts to width and pads them with spaces
// of padRole to exactly width (no clipping or padding when width <= 0),
// building merged segments directly.
func (l *layouter) fit(width int, padRole Role, parts ...[]cell) []Segment {
	segs := make([]Segment, 0, 6)
	var b strings.Builder
	var cur Role
	flush := func() {
		if b.Len() > 0 {
			segs = append(segs, Segment{b.String(), cur})
			b = strings.Builder{}
		}
	}
	add := func(text string, role Role) {
		if role != cur {
			flush()
			cur = role
		}
		b.WriteString(text)
	}
	w := 0
	full := false
	for _, cells := range parts {
		for _, c := range cells {
			if width > 0 && w+c.width > width {
				full = true
				break
			}
			add(c.text, c.role)
			w += c.width
		}
		if full {
			break
		}
	}
	if width > w {
		add(strings.Repeat(" ", width-w), padRole)
	}
	flush()
	return segs
}

// mergeSegments joins neighbouring segments of the same role.
func mergeSegments(segs []Segment) []Segment {
	out := make([]Segment, 0, 4)
	var b strings.Builder
	for i := 0; i < len(segs); {
		j := i
		b.Reset()
		for j < len(segs) && segs[j].Role == segs[i].Role {
			b.WriteString(segs[j].Text)
			j++
		}
		if b.Len() > 0 {
			out = append(out, Segment{b.String(), segs[i].Role})
		}
		i = j
	}
	return out
}
