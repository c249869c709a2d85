package panes

import (
	"errors"
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/keymap"
)

// conflictReason is the engine's reason with its count in words: it says
// "N overlapping edit(s)" of a text merge.
func conflictReason(f ConflictFile) string {
	if n := len(f.Regions); n > 0 {
		if _, rest, ok := strings.Cut(f.Reason, " overlapping edit(s)"); ok {
			return Count(n, "overlapping edit", "overlapping edits") + rest
		}
	}
	return f.Reason
}

// ConflictFile is one path an apply could not publish, with what the
// person needs to resolve it. Regions are the overlapping edits of a text
// merge; without regions the whole file is the conflict (a late base, a
// file changed in both when one side is not mergeable).
type ConflictFile struct {
	Path, Reason string
	Regions      []diffview.Conflict
	// Base, Ours (the World, as picked) and Theirs (the source) are the
	// three versions; the engine sends them for small text files only.
	Base, Ours, Theirs string
	// Merged is the merge with conflict markers, when there are regions.
	Merged string
	// TheirsHash identifies the source version the conflict was found
	// against; a resolution is published only if the source still holds it.
	TheirsHash string
}

// texts reports whether the three versions came with the conflict.
func (f ConflictFile) texts() bool { return f.Base != "" || f.Ours != "" || f.Theirs != "" }

// whole reports whether the file is resolved as one piece.
func (f ConflictFile) whole() bool { return len(f.Regions) == 0 }

// mergeable reports whether strata can build a resolution of the file.
func (f ConflictFile) mergeable() bool { return !f.whole() || f.texts() }

// Resolution is what the person decided for one path.
type Resolution struct {
	Path string
	// Content is the exact text to publish; Keep means "leave the source's
	// version": the path leaves the apply.
	Content    []byte
	Keep       bool
	TheirsHash string
}

// ConflictsApplyMsg asks the root to apply again with the resolutions.
type ConflictsApplyMsg struct {
	World       string
	Resolutions []Resolution
}

// ConflictsEditMsg asks the root to open Text in $EDITOR for Path; the
// edited text comes back through Conflicts.SetEdited.
type ConflictsEditMsg struct {
	World, Path, Text string
}

// ConflictsClosedMsg says the person closed the view without applying.
type ConflictsClosedMsg struct{ World string }

// ErrMarkersRemain refuses a resolution that still holds conflict markers.
var ErrMarkersRemain = errors.New("conflict markers remain")

type fileChoice struct {
	choices []diffview.Choice // one per region; one for a whole file
	edited  *string           // the text as edited in $EDITOR
}

// Conflicts is the conflict view: every conflicting path with ours,
// theirs and base per region, a choice per region, and apply again.
type Conflicts struct {
	env    *Env
	World  string
	files  []ConflictFile
	state  []fileChoice
	file   int
	region int
	Err    string
}

// NewConflicts opens the view on the conflicts of an apply from world.
func NewConflicts(env *Env, world string, files []ConflictFile) Conflicts {
	c := Conflicts{env: env, World: world, files: files, state: make([]fileChoice, len(files))}
	for i, f := range files {
		n := max(len(f.Regions), 1)
		c.state[i].choices = make([]diffview.Choice, n)
	}
	return c
}

// Files are the conflicting paths.
func (c Conflicts) Files() []ConflictFile { return c.files }

// Current is the index of the path shown and of the region under the cursor.
func (c Conflicts) Current() (file, region int) { return c.file, c.region }

// Choice is the choice made for a region of a file.
func (c Conflicts) Choice(file, region int) diffview.Choice { return c.state[file].choices[region] }

// Edited reports whether the file's resolution was edited by hand.
func (c Conflicts) Edited(file int) bool { return c.state[file].edited != nil }

// SetEdited records the text the person wrote in $EDITOR for path; it
// replaces the per-region choices of that file. Markers left in it keep the
// file unresolved.
func (c Conflicts) SetEdited(path, text string) Conflicts {
	for i, f := range c.files {
		if f.Path == path {
			c.state[i] = fileChoice{choices: make([]diffview.Choice, len(c.state[i].choices)), edited: &text}
			c.Err = ""
			if HasConflictMarkers(text) {
				c.Err = fmt.Sprintf("%s: %v; edit again (%s) or choose per conflict", path, ErrMarkersRemain, c.env.Keys.Binding(keymap.ConflictsEdit).Help().Key)
			}
		}
	}
	return c
}

// HasConflictMarkers reports whether text still holds a line that opens,
// splits off the base of, or closes a conflict. A lone "=======" line is
// legitimate text (a Markdown heading underline), so it does not count.
func HasConflictMarkers(text string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "<<<<<<<") || strings.HasPrefix(l, ">>>>>>>") || strings.HasPrefix(l, "|||||||") {
			return true
		}
	}
	return false
}

// Resolve builds the resolution of file i from the choices, or the edited
// text; it fails while any region is unresolved or markers remain.
func (c Conflicts) Resolve(i int) (Resolution, error) {
	f, st := c.files[i], c.state[i]
	r := Resolution{Path: f.Path, TheirsHash: f.TheirsHash}
	if st.edited != nil {
		if HasConflictMarkers(*st.edited) {
			return r, fmt.Errorf("%s: %w", f.Path, ErrMarkersRemain)
		}
		r.Content = []byte(*st.edited)
		return r, nil
	}
	open := 0
	for _, ch := range st.choices {
		if ch == diffview.Unresolved {
			open++
		}
	}
	if open > 0 {
		return r, fmt.Errorf("%s: %d of %s unresolved", f.Path, open, Count(len(st.choices), "conflict", "conflicts"))
	}
	if !f.mergeable() {
		// Only "keep the source's version" is possible here.
		if st.choices[0] != diffview.ChooseTheirs {
			return r, fmt.Errorf("%s: binary or too large to merge here; keep theirs, or cancel and apply it alone", f.Path)
		}
		r.Keep = true
		return r, nil
	}
	text, err := c.build(i, st.choices)
	if err != nil {
		return r, fmt.Errorf("%s: %w", f.Path, err)
	}
	r.Content = []byte(text)
	return r, nil
}

// build resolves file i with choices; Unresolved regions keep their markers.
func (c Conflicts) build(i int, choices []diffview.Choice) (string, error) {
	f := c.files[i]
	if f.whole() {
		switch choices[0] {
		case diffview.ChooseOurs:
			return f.Ours, nil
		case diffview.ChooseTheirs:
			return f.Theirs, nil
		case diffview.ChooseBoth:
			return f.Ours + f.Theirs, nil
		}
		return "<<<<<<< ours\n" + withNewline(f.Ours) + "=======\n" + withNewline(f.Theirs) + ">>>>>>> theirs\n", nil
	}
	if f.texts() {
		mr := diffview.Merge3(f.Base, f.Ours, f.Theirs)
		if len(mr.Conflicts) == len(choices) {
			return mr.ResolveWith(choices)
		}
	}
	return resolveMarkers(f.Merged, f.Regions, choices)
}

func withNewline(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		return s + "\n"
	}
	return s
}

// resolveMarkers replaces each marked region of merged (found at its
// MarkerLine) with the chosen side: the way to resolve a file the engine
// sent without its three versions (too large to carry).
func resolveMarkers(merged string, regions []diffview.Conflict, choices []diffview.Choice) (string, error) {
	lines := strings.SplitAfter(merged, "\n")
	var b strings.Builder
	next := 0
	for k, r := range regions {
		if r.MarkerLine < next || r.MarkerLine >= len(lines) || !strings.HasPrefix(lines[r.MarkerLine], "<<<<<<<") {
			return "", fmt.Errorf("conflict %d: no marker at line %d of the merge", k+1, r.MarkerLine+1)
		}
		end := r.MarkerLine
		for end < len(lines) && !strings.HasPrefix(lines[end], ">>>>>>>") {
			end++
		}
		if end == len(lines) {
			return "", fmt.Errorf("conflict %d: unterminated markers", k+1)
		}
		b.WriteString(strings.Join(lines[next:r.MarkerLine], ""))
		var side []string
		switch choices[k] {
		case diffview.ChooseOurs:
			side = r.Ours
		case diffview.ChooseTheirs:
			side = r.Theirs
		case diffview.ChooseBoth:
			side = append(append([]string(nil), r.Ours...), r.Theirs...)
		case diffview.ChooseBase:
			side = r.Base
		default:
			side = lines[r.MarkerLine : end+1]
		}
		b.WriteString(strings.Join(side, ""))
		next = end + 1
	}
	b.WriteString(strings.Join(lines[next:], ""))
	return b.String(), nil
}

// EditText is what $EDITOR opens for file i: the edited text if any, else
// the merge with the choices made so far and markers for the rest.
func (c Conflicts) EditText(i int) (string, error) {
	if e := c.state[i].edited; e != nil {
		return *e, nil
	}
	if !c.files[i].mergeable() {
		return "", fmt.Errorf("%s is binary or too large to edit here", c.files[i].Path)
	}
	return c.build(i, c.state[i].choices)
}

// Update handles a key.
func (c Conflicts) Update(msg tea.Msg) (Conflicts, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return c, nil
	}
	if a, ok := c.env.Keys.Match(keymap.Conflicts, k); ok {
		return c.Do(a)
	}
	return c, nil
}

// Do performs one action of the conflicts area.
func (c Conflicts) Do(a string) (Conflicts, tea.Cmd) {
	if len(c.files) == 0 {
		if a == keymap.ConflictsCancel {
			w := c.World
			return c, func() tea.Msg { return ConflictsClosedMsg{World: w} }
		}
		return c, nil
	}
	regions := len(c.state[c.file].choices)
	switch a {
	case keymap.ConflictsUp:
		c.region = max(c.region-1, 0)
	case keymap.ConflictsDown:
		c.region = min(c.region+1, regions-1)
	case keymap.ConflictsNextFile:
		c.file = (c.file + 1) % len(c.files)
		c.region = 0
	case keymap.ConflictsPrevFile:
		c.file = (c.file + len(c.files) - 1) % len(c.files)
		c.region = 0
	case keymap.ConflictsOurs, keymap.ConflictsTheirs, keymap.ConflictsBoth:
		ch := map[string]diffview.Choice{
			keymap.ConflictsOurs: diffview.ChooseOurs, keymap.ConflictsTheirs: diffview.ChooseTheirs, keymap.ConflictsBoth: diffview.ChooseBoth,
		}[a]
		if !c.files[c.file].mergeable() && ch != diffview.ChooseTheirs {
			c.Err = c.files[c.file].Path + " is binary or too large to merge here: only theirs (leave the source as it is) can be kept"
			return c, nil
		}
		st := &c.state[c.file]
		if st.edited != nil {
			// Choosing again drops the hand edit: the choices are the truth.
			st.edited = nil
		}
		st.choices[c.region] = ch
		c.Err = ""
		// Move on to the next open conflict, as a merge tool does.
		for i := c.region + 1; i < len(st.choices); i++ {
			if st.choices[i] == diffview.Unresolved {
				c.region = i
				break
			}
		}
	case keymap.ConflictsEdit:
		text, err := c.EditText(c.file)
		if err != nil {
			c.Err = err.Error()
			return c, nil
		}
		w, p := c.World, c.files[c.file].Path
		return c, func() tea.Msg { return ConflictsEditMsg{World: w, Path: p, Text: text} }
	case keymap.ConflictsApply:
		var res []Resolution
		for i := range c.files {
			r, err := c.Resolve(i)
			if err != nil {
				c.Err = err.Error()
				c.file, c.region = i, c.firstOpen(i)
				return c, nil
			}
			res = append(res, r)
		}
		w := c.World
		return c, func() tea.Msg { return ConflictsApplyMsg{World: w, Resolutions: res} }
	case keymap.ConflictsCancel:
		w := c.World
		return c, func() tea.Msg { return ConflictsClosedMsg{World: w} }
	}
	return c, nil
}

func (c Conflicts) firstOpen(i int) int {
	for k, ch := range c.state[i].choices {
		if ch == diffview.Unresolved {
			return k
		}
	}
	return 0
}

// resolvedCount is how many regions of file i are decided.
func (c Conflicts) resolvedCount(i int) (int, int) {
	st := c.state[i]
	if st.edited != nil {
		if HasConflictMarkers(*st.edited) {
			return 0, len(st.choices)
		}
		return len(st.choices), len(st.choices)
	}
	n := 0
	for _, ch := range st.choices {
		if ch != diffview.Unresolved {
			n++
		}
	}
	return n, len(st.choices)
}

func choiceLabel(ch diffview.Choice) string {
	switch ch {
	case diffview.ChooseOurs:
		return "ours"
	case diffview.ChooseTheirs:
		return "theirs"
	case diffview.ChooseBoth:
		return "both"
	case diffview.ChooseBase:
		return "base"
	}
	return "unresolved"
}

// View draws the view in width x height cells.
func (c Conflicts) View(width, height int) string {
	st := c.env.Styles
	if height <= 0 {
		return ""
	}
	km := c.env.Keys
	noun := "paths"
	if len(c.files) == 1 {
		noun = "path"
	}
	head := st.Error.Render(fmt.Sprintf("%d conflicting %s", len(c.files), noun)) +
		st.Muted.Render(" · nothing written · resolve each, then "+km.Binding(keymap.ConflictsApply).Help().Key+" applies again")
	lines := []string{head}
	if len(c.files) == 0 {
		return block(append(lines, "", "No conflicts."), width, height)
	}
	// The paths, at most a fifth of the view.
	listMax := max(min(len(c.files), height/5), 1)
	off := clamp(c.file-listMax+1, 0, max(len(c.files)-listMax, 0))
	for i := off; i < min(off+listMax, len(c.files)); i++ {
		done, all := c.resolvedCount(i)
		mark, ms := "✗", st.Error
		if done == all {
			mark, ms = "✓", st.StatusStyle("done")
		}
		info := fmt.Sprintf(" %d/%d resolved", done, all)
		if c.state[i].edited != nil {
			info += " · edited"
		}
		line := ms.Render(mark) + " " + c.files[i].Path + st.Muted.Render(info)
		if i == c.file {
			line = selectRow(st, line, width, true)
		}
		lines = append(lines, line)
	}
	f := c.files[c.file]
	lines = append(lines, "")
	for _, l := range wrapText(conflictReason(f), width) {
		lines = append(lines, st.Muted.Render(l))
	}
	if c.Err != "" {
		for _, l := range wrapText(c.Err, width) {
			lines = append(lines, st.Error.Render(l))
		}
	}
	top := len(lines)
	body := height - top
	if body <= 0 {
		return block(lines, width, height)
	}
	if ed := c.state[c.file].edited; ed != nil {
		lines = append(lines, st.Accent.Render("edited in $EDITOR")+st.Muted.Render(" · choosing ours/theirs/both drops the edit"))
		text := strings.Split(strings.TrimSuffix(*ed, "\n"), "\n")
		// Start a few lines above the first marker left, if any.
		from := 0
		for i, l := range text {
			if HasConflictMarkers(l) {
				from = max(i-3, 0)
				break
			}
		}
		for _, l := range text[from:] {
			lines = append(lines, "  "+st.Text.Render(expandTabs(l)))
		}
		return block(lines, width, height)
	}
	// Each side of a region shows at most sideMax lines, so the region
	// under the cursor fits on the screen.
	sideMax := max((body-5)/3, 1)
	var rows []string
	start := 0
	for k := range c.state[c.file].choices {
		if k == c.region {
			start = len(rows)
		}
		rows = append(rows, c.regionRows(k, width, sideMax)...)
	}
	// Scroll so the current region starts on screen, with as much of it
	// as fits.
	roff := clamp(start, 0, max(len(rows)-body, 0))
	lines = append(lines, rows[roff:]...)
	return block(lines, width, height)
}

// regionRows draws region k of the current file: its heading, then ours,
// base and theirs.
func (c Conflicts) regionRows(k, width, sideMax int) []string {
	st := c.env.Styles
	f := c.files[c.file]
	ch := c.state[c.file].choices[k]
	var ours, base, theirs []string
	where := "the whole file"
	if f.whole() {
		ours, base, theirs = splitLines(f.Ours), splitLines(f.Base), splitLines(f.Theirs)
	} else {
		r := f.Regions[k]
		ours, base, theirs = r.Ours, r.Base, r.Theirs
		where = fmt.Sprintf("base lines %d-%d", r.BaseStart+1, r.BaseEnd)
		switch {
		case r.BaseEnd == r.BaseStart+1:
			where = fmt.Sprintf("base line %d", r.BaseEnd)
		case r.BaseEnd <= r.BaseStart:
			where = fmt.Sprintf("insertion after base line %d", r.BaseStart)
		}
	}
	cs := st.Error
	if ch != diffview.Unresolved {
		cs = st.StatusStyle("done")
	}
	heading := fmt.Sprintf("conflict %d/%d · %s · ", k+1, len(c.state[c.file].choices), where)
	var rows []string
	if k == c.region {
		rows = append(rows, selectRow(st, "▸ "+heading+choiceLabel(ch), width, true))
	} else {
		rows = append(rows, st.Bold.Render("  "+heading)+cs.Render(choiceLabel(ch)))
	}
	type column struct {
		label  string
		style  lipgloss.Style
		text   []string
		chosen bool
	}
	cols := []column{{"ours · the World", st.Accent, ours, ch == diffview.ChooseOurs || ch == diffview.ChooseBoth}}
	if !f.whole() || !f.mergeable() || len(base) > 0 {
		cols = append(cols, column{"base", st.Muted, base, false})
	}
	cols = append(cols, column{"theirs · the source", st.Warning, theirs, ch == diffview.ChooseTheirs || ch == diffview.ChooseBoth})
	// draw is one column's lines: its label, then at most sideMax lines.
	draw := func(col column, w int) []string {
		mark := "  "
		if col.chosen {
			mark = "✓ "
		}
		out := []string{"  " + col.style.Render(mark+col.label)}
		switch {
		case !f.mergeable():
			return append(out, st.Muted.Render("    (binary or too large to show)"))
		case len(col.text) == 0:
			return append(out, st.Muted.Render("    (nothing)"))
		}
		for i, l := range col.text {
			if i == sideMax && len(col.text) > sideMax+1 {
				out = append(out, st.Muted.Render(fmt.Sprintf("    … %s (%s shows all)", Count(len(col.text)-sideMax, "more line", "more lines"), c.env.Keys.Binding(keymap.ConflictsEdit).Help().Key)))
				break
			}
			out = append(out, col.style.Render("    │ ")+st.Text.Render(fit(expandTabs(strings.TrimRight(l, "\r\n")), max(w-6, 1))))
		}
		return out
	}
	if width < 100 {
		for _, col := range cols {
			rows = append(rows, draw(col, width)...)
		}
		return rows
	}
	// Wide: the sides next to each other, ours on the left.
	cw := width / len(cols)
	var drawn [][]string
	n := 0
	for _, col := range cols {
		d := draw(col, cw)
		drawn = append(drawn, d)
		n = max(n, len(d))
	}
	for i := 0; i < n; i++ {
		var b strings.Builder
		for _, d := range drawn {
			l := ""
			if i < len(d) {
				l = d[i]
			}
			b.WriteString(fit(l, cw))
		}
		rows = append(rows, b.String())
	}
	return rows
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func expandTabs(s string) string { return strings.ReplaceAll(s, "\t", "    ") }
