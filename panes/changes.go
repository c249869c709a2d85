package panes

import (
	"fmt"
	"sort"
	"strings"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/overlay"
)

// PickState says how much of a path is picked for apply.
type PickState uint8

const (
	PickNone PickState = iota
	PickPartial
	PickAll
)

// Mark is the one-cell pick column.
func (s PickState) Mark() string {
	switch s {
	case PickAll:
		return "✓"
	case PickPartial:
		return "~"
	}
	return " "
}

// ChangesSelectedMsg says the Changes cursor is on a path ("" for a
// directory heading or nothing).
type ChangesSelectedMsg struct{ World, Path string }

// PickPathsMsg asks to pick or unpick whole paths.
type PickPathsMsg struct {
	World string
	Paths []string
	Pick  bool
}

// kindFilters is the cycle of the kind filter.
var kindFilters = []string{"", "A", "M", "D", "T"}

type changeRow struct {
	change int    // index into all; -1 for a directory heading
	dir    string // the heading's path, with a trailing slash
	depth  int
	hidden int // rows folded away under it
}

// dirOf is the directory a row opens in the tree ("" for a file), with a
// trailing slash.
func (p Changes) dirOf(r changeRow) string {
	if r.change < 0 {
		return r.dir
	}
	if c := p.all[r.change]; c.Type == overlay.TypeDir {
		return c.Path + "/"
	}
	return ""
}

func (p Changes) rowPath(r changeRow) string {
	if r.change < 0 {
		return r.dir
	}
	return p.all[r.change].Path
}

// Changes lists a World's changed paths.
type Changes struct {
	env     *Env
	World   string
	all     []overlay.Change
	picks   map[string]PickState
	rows    []changeRow
	list    cursorList
	height  int
	loaded  bool
	err     string
	tree    bool
	kind    string
	filter  string
	editing bool
	input   Input
	// folded are the tree's collapsed directories, with a trailing slash.
	folded map[string]bool
	// trees are the World's extra trees, whose paths read NAME:path;
	// grouped is set while the tree view gives each tree a heading.
	trees   []string
	grouped bool
}

// mainHeading is the tree view's heading of the source's own paths when
// other trees have changes too (no change's directory is ":").
const mainHeading = ":"

// SetTrees names the World's extra trees (a path NAME:rel is in tree
// NAME), so the tree view lists each under its own heading. It takes
// effect with the next SetChanges (which the trees come with).
func (p Changes) SetTrees(names []string) Changes {
	p.trees = names
	return p
}

// treeOf splits path into its extra tree and the path in it ("" and path
// for the source's own paths); only a known tree's name counts.
func (p Changes) treeOf(path string) (tree, rel string) {
	if name, rest, ok := strings.Cut(path, ":"); ok && name != "" && !strings.Contains(name, "/") {
		for _, t := range p.trees {
			if t == name {
				return name, rest
			}
		}
	}
	return "", path
}

// headingOf is the tree heading path lies under.
func (p Changes) headingOf(path string) string {
	if t, _ := p.treeOf(path); t != "" {
		return t + ":"
	}
	return mainHeading
}

// under reports whether path lies below the heading dir.
func (p Changes) under(path, dir string) bool {
	if dir == mainHeading {
		t, _ := p.treeOf(path)
		return t == "" && path != mainHeading
	}
	return strings.HasPrefix(path, dir)
}

// NewChanges makes an empty Changes pane.
func NewChanges(env *Env) Changes { return Changes{env: env, picks: map[string]PickState{}} }

// SetChanges replaces the list for world; the cursor stays on its path.
func (p Changes) SetChanges(world string, cs []overlay.Change, err error) (Changes, tea.Cmd) {
	prev := p.Selected()
	if world != p.World {
		prev = ""
		p.list = cursorList{}
		p.picks = map[string]PickState{}
	}
	p.World = world
	p.all = cs
	p.loaded = true
	p.err = ""
	if err != nil {
		p.err = err.Error()
	}
	p = p.rebuild(prev)
	if cur := p.Selected(); cur != prev || prev == "" {
		return p, p.selected()
	}
	return p, nil
}

// SetPicks replaces the pick marks.
func (p Changes) SetPicks(picks map[string]PickState) Changes {
	p.picks = picks
	return p
}

// SetSize tells the pane how tall it is drawn (rows are as wide as the view).
func (p Changes) SetSize(_, h int) Changes {
	p.height = h
	p.list.window(p.body(), len(p.rows))
	return p
}

func (p Changes) body() int {
	b := p.height - 1
	if p.editing || p.filter != "" || p.kind != "" {
		b--
	}
	return b
}

// All returns every change of the World (unfiltered).
func (p Changes) All() []overlay.Change { return p.all }

// Visible returns the paths shown (filtered), in display order.
func (p Changes) Visible() []string {
	var out []string
	for _, r := range p.rows {
		if r.change >= 0 {
			out = append(out, p.all[r.change].Path)
		}
	}
	return out
}

// Tree reports whether the tree view is on.
func (p Changes) Tree() bool { return p.tree }

// Filter returns the text and kind filters.
func (p Changes) Filter() (text, kind string) { return p.filter, p.kind }

// Editing reports whether the filter prompt has the keys.
func (p Changes) Editing() bool { return p.editing }

// Selected is the path under the cursor ("" on a heading or when empty).
func (p Changes) Selected() string {
	if p.list.Cursor < 0 || p.list.Cursor >= len(p.rows) {
		return ""
	}
	r := p.rows[p.list.Cursor]
	if r.change < 0 {
		return ""
	}
	return p.all[r.change].Path
}

// SelectedChange is the change under the cursor.
func (p Changes) SelectedChange() (overlay.Change, bool) {
	if p.list.Cursor < 0 || p.list.Cursor >= len(p.rows) || p.rows[p.list.Cursor].change < 0 {
		return overlay.Change{}, false
	}
	return p.all[p.rows[p.list.Cursor].change], true
}

func (p Changes) selected() tea.Cmd {
	w, path := p.World, p.Selected()
	return func() tea.Msg { return ChangesSelectedMsg{World: w, Path: path} }
}

func (p Changes) matches(c overlay.Change) bool {
	if p.kind != "" && c.Kind.Letter() != p.kind {
		return false
	}
	if p.filter == "" {
		return true
	}
	return strings.Contains(strings.ToLower(c.Path), strings.ToLower(p.filter))
}

// rebuild derives the rows from the changes, filters and view mode, and
// puts the cursor back on path when it is still shown.
func (p Changes) rebuild(path string) Changes {
	rows := make([]changeRow, 0, len(p.all))
	var stack []string // open directory headings, each with a trailing slash
	// With changes in other trees, the tree view lists the source's paths
	// under a heading of their own, then each tree's under its NAME:.
	p.grouped = false
	if p.tree {
		for _, c := range p.all {
			if t, _ := p.treeOf(c.Path); t != "" {
				p.grouped = true
				break
			}
		}
	}
	base, head := 0, ""
	if p.grouped {
		base = 1
	}
	for _, i := range p.order() {
		c := p.all[i]
		if !p.matches(c) {
			continue
		}
		if !p.tree {
			rows = append(rows, changeRow{change: i})
			continue
		}
		tree, rel := p.treeOf(c.Path)
		prefix := ""
		if tree != "" {
			prefix = tree + ":"
		}
		if p.grouped && p.headingOf(c.Path) != head {
			head = p.headingOf(c.Path)
			rows = append(rows, changeRow{change: -1, dir: head})
			stack = append(stack[:0], head)
		}
		for len(stack) > base && !strings.HasPrefix(c.Path, stack[len(stack)-1]) {
			stack = stack[:len(stack)-1]
		}
		// The stack holds the open headings, one per path component, so
		// only the components below it need a heading.
		parts := strings.Split(rel, "/")
		for j := len(stack) - base; j < len(parts)-1; j++ {
			dir := prefix + strings.Join(parts[:j+1], "/") + "/"
			rows = append(rows, changeRow{change: -1, dir: dir, depth: j + base})
			stack = append(stack, dir)
		}
		rows = append(rows, changeRow{change: i, depth: len(stack)})
		if c.Type == overlay.TypeDir {
			// A deleted directory lists its lower paths below it: they
			// go under its row, not under a second heading of its own.
			stack = append(stack, c.Path+"/")
		}
	}
	if len(p.folded) > 0 {
		// A folded directory's row stays and counts the rows under it,
		// in the tree and in the flat list alike. Its row comes before
		// theirs ("a" and "a/" sort before "a/x"), though not always right
		// before ("a-b" sorts between "a" and "a/x"), so each row looks
		// for a folded ancestor rather than for a run.
		kept := make([]changeRow, 0, len(rows))
		at := map[string]int{} // folded directory -> its row in kept
		for _, r := range rows {
			if i, ok := p.foldedUnder(p.rowPath(r), at); ok {
				kept[i].hidden++
				continue
			}
			kept = append(kept, r)
			if d := p.dirOf(r); d != "" && p.folded[d] {
				at[d] = len(kept) - 1
			}
		}
		rows = kept
	}
	p.rows = rows
	p.list.to(p.list.Cursor, len(rows))
	if path != "" {
		for i, r := range rows {
			if r.change >= 0 && p.all[r.change].Path == path {
				p.list.Cursor = i
				break
			}
		}
	}
	p.list.window(p.body(), len(rows))
	return p
}

// order is the order rows are built in: the changes' own (sorted by path)
// in the flat list; in the tree, each directory's paths right after it,
// which byte order breaks when a name sorts between a directory and its
// paths ("vendor", "vendor-notes.txt", "vendor/a.go": '-' < '/'), and
// gave the directory a second heading.
func (p Changes) order() []int {
	idx := make([]int, len(p.all))
	for i := range idx {
		idx[i] = i
	}
	if !p.tree {
		return idx
	}
	rank := map[string]int{"": 0}
	for i, t := range p.trees {
		rank[t] = i + 1
	}
	less := func(a, b int) bool {
		ta, ra := p.treeOf(p.all[idx[a]].Path)
		tb, rb := p.treeOf(p.all[idx[b]].Path)
		if ta != tb {
			return rank[ta] < rank[tb]
		}
		return treeLess(ra, rb)
	}
	if !sort.SliceIsSorted(idx, less) {
		sort.SliceStable(idx, less)
	}
	return idx
}

// treeLess orders paths component by component: "a/x" before "a-b".
func treeLess(a, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if ca == '/' {
			return true
		}
		if cb == '/' {
			return false
		}
		return ca < cb
	}
	return len(a) < len(b)
}

// foldedUnder finds the outermost folded directory listed above path (in
// at) that holds it; path itself is not its own ancestor.
func (p Changes) foldedUnder(path string, at map[string]int) (int, bool) {
	if p.grouped {
		// A folded tree heading holds every path of its tree.
		if h := p.headingOf(path); h != path {
			if row, ok := at[h]; ok {
				return row, true
			}
		}
	}
	path = strings.TrimSuffix(path, "/")
	for i := 0; i < len(path); i++ {
		if path[i] != '/' {
			continue
		}
		if row, ok := at[path[:i+1]]; ok {
			return row, true
		}
	}
	return 0, false
}

// Update handles keys while focused.
func (p Changes) Update(msg tea.Msg) (Changes, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return p, nil
	}
	if p.editing {
		prev := p.Selected()
		switch k.String() {
		case "enter":
			p.editing = false
		case "esc":
			p.editing = false
			p.filter = ""
		default:
			p.input.Update(k)
			p.filter = p.input.String()
		}
		p = p.rebuild(prev)
		if p.Selected() != prev {
			return p, p.selected()
		}
		return p, nil
	}
	if a, ok := p.env.Keys.Match(keymap.Changes, k); ok {
		return p.Do(a)
	}
	return p, nil
}

// Do performs one action of the changes area.
func (p Changes) Do(a string) (Changes, tea.Cmd) {
	before := p.Selected()
	n := len(p.rows)
	page := max(p.body()-1, 1)
	switch a {
	case keymap.ChangesUp:
		p.list.move(-1, n)
	case keymap.ChangesDown:
		p.list.move(1, n)
	case keymap.ChangesPageUp:
		p.list.move(-page, n)
	case keymap.ChangesPageDown:
		p.list.move(page, n)
	case keymap.ChangesTop:
		p.list.to(0, n)
	case keymap.ChangesBottom:
		p.list.to(n-1, n)
	case keymap.ChangesTree:
		p.tree = !p.tree
		p = p.rebuild(before)
	case keymap.ChangesFilter:
		p.editing = true
		p.input = NewInput(p.filter, nil)
	case keymap.ChangesKind:
		for i, k := range kindFilters {
			if k == p.kind {
				p.kind = kindFilters[(i+1)%len(kindFilters)]
				break
			}
		}
		p = p.rebuild(before)
	case keymap.ChangesClearFilter:
		p.filter, p.kind = "", ""
		p = p.rebuild(before)
	case keymap.ChangesFold:
		if p.list.Cursor < 0 || p.list.Cursor >= len(p.rows) {
			return p, nil
		}
		d := p.dirOf(p.rows[p.list.Cursor])
		if d == "" {
			return p, nil
		}
		if p.folded == nil {
			p.folded = map[string]bool{}
		}
		if p.folded[d] {
			delete(p.folded, d)
		} else {
			p.folded[d] = true
		}
		cur := p.list.Cursor
		p = p.rebuild(before)
		p.list.to(cur, len(p.rows)) // the cursor stays on the directory's row
		p.list.window(p.body(), len(p.rows))
	case keymap.ChangesPick, keymap.ChangesPickAll:
		paths := p.underCursor()
		if a == keymap.ChangesPickAll {
			paths = p.shownPaths()
		}
		if len(paths) == 0 {
			return p, nil
		}
		pick := false
		for _, path := range paths {
			if p.picks[path] != PickAll {
				pick = true
			}
		}
		w := p.World
		return p, func() tea.Msg { return PickPathsMsg{World: w, Paths: paths, Pick: pick} }
	case keymap.ChangesOpen:
		if path := p.Selected(); path != "" {
			return p, action(ActionMsg{Action: a, World: p.World, Path: path})
		}
		return p, nil
	case keymap.ChangesApply:
		return p, action(ActionMsg{Action: a, World: p.World})
	case keymap.ChangesWriter:
		if path := p.Selected(); path != "" {
			return p, action(ActionMsg{Action: a, World: p.World, Path: path})
		}
		return p, nil
	}
	p.list.window(p.body(), len(p.rows))
	if p.Selected() != before {
		return p, p.selected()
	}
	return p, nil
}

// shownPaths are the paths the filters show, folded ones included.
func (p Changes) shownPaths() []string {
	var out []string
	for _, c := range p.all {
		if p.matches(c) {
			out = append(out, c.Path)
		}
	}
	return out
}

// underCursor is the path under the cursor with, for a directory, every
// change below it (to the engine a directory's pick means all of them),
// or every shown path under the directory heading under it.
func (p Changes) underCursor() []string {
	if p.list.Cursor < 0 || p.list.Cursor >= len(p.rows) {
		return nil
	}
	r := p.rows[p.list.Cursor]
	if r.change >= 0 {
		c := p.all[r.change]
		out := []string{c.Path}
		if c.Type == overlay.TypeDir {
			for _, x := range p.all {
				if strings.HasPrefix(x.Path, c.Path+"/") {
					out = append(out, x.Path)
				}
			}
		}
		return out
	}
	if r.hidden > 0 || p.folded[r.dir] {
		var out []string
		for _, path := range p.shownPaths() {
			if p.under(path, r.dir) {
				out = append(out, path)
			}
		}
		return out
	}
	var out []string
	for _, x := range p.rows[p.list.Cursor+1:] {
		if x.change < 0 {
			if !p.under(x.dir, r.dir) {
				break
			}
			continue
		}
		path := p.all[x.change].Path
		if !p.under(path, r.dir) {
			break
		}
		out = append(out, path)
	}
	return out
}

// Click puts the cursor on the row at y.
func (p Changes) Click(y int) (Changes, tea.Cmd) {
	i := p.list.Offset + y - 1
	if i < 0 || i >= len(p.rows) {
		return p, nil
	}
	before := p.Selected()
	p.list.Cursor = i
	if p.Selected() != before {
		return p, p.selected()
	}
	return p, nil
}

// Scroll moves the cursor by delta rows.
func (p Changes) Scroll(delta int) (Changes, tea.Cmd) {
	if delta < 0 {
		p.list.move(delta+1, len(p.rows))
		return p.Do(keymap.ChangesUp)
	}
	p.list.move(delta-1, len(p.rows))
	return p.Do(keymap.ChangesDown)
}

// View draws the pane.
func (p Changes) View(width, height int, focused bool) string {
	st := p.env.Styles
	if height <= 0 {
		return ""
	}
	counts := map[string]int{}
	picked := 0
	hasBelow := map[string]bool{} // directories with changes below them
	for _, c := range p.all {
		if i := strings.LastIndexByte(c.Path, '/'); i > 0 {
			hasBelow[c.Path[:i]] = true
		}
	}
	for _, c := range p.all {
		counts[c.Kind.Letter()]++
		// A directory with changes below counts through them: picking a
		// 1,000-file deletion says 1,000 picked, not 1.
		if p.picks[c.Path] != PickNone && (c.Type != overlay.TypeDir || !hasBelow[c.Path]) {
			picked++
		}
	}
	var hb strings.Builder
	hb.WriteString(st.Bold.Render(Thousands(len(p.all))))
	hb.WriteString(st.Muted.Render(strings.TrimPrefix(Count(len(p.all), "path", "paths"), Thousands(len(p.all)))))
	for _, k := range []string{"A", "M", "D", "T"} {
		if counts[k] > 0 {
			hb.WriteString(" " + st.KindStyle(k).Render(fmt.Sprintf("%s%d", k, counts[k])))
		}
	}
	if picked > 0 {
		hb.WriteString(st.Picked.Render(" · " + Thousands(picked) + " picked"))
	}
	if p.tree {
		hb.WriteString(st.Muted.Render(" · tree"))
	}
	lines := []string{hb.String()}
	if p.editing || p.filter != "" || p.kind != "" {
		f := st.Accent.Render("filter ")
		if p.editing {
			f += p.input.View(st, max(width-20, 4), true)
		} else {
			f += p.filter
		}
		if p.kind != "" {
			f += st.Muted.Render("  kind ") + st.KindStyle(p.kind).Render(p.kind)
		}
		f += st.Muted.Render(fmt.Sprintf("  %d shown", len(p.Visible())))
		lines = append(lines, f)
	}
	body := height - len(lines)
	switch {
	case !p.loaded:
		lines = append(lines, st.Muted.Render("select a World"))
	case p.err != "":
		lines = append(lines, st.Error.Render("cannot read changes: "+p.err))
	case len(p.all) == 0:
		lines = append(lines, st.Muted.Render("no changes yet"))
	case len(p.rows) == 0:
		lines = append(lines, st.Muted.Render("nothing matches the filter"))
	}
	list := p.list
	off := list.window(body, len(p.rows))
	for i := off; i < min(off+body, len(p.rows)); i++ {
		line := p.row(p.rows[i], width)
		if i == p.list.Cursor {
			line = selectRow(st, line, width, focused)
		}
		lines = append(lines, line)
	}
	return block(lines, width, height)
}

func (p Changes) row(r changeRow, width int) string {
	st := p.env.Styles
	indent := strings.Repeat("  ", r.depth)
	folded := ""
	if r.hidden > 0 {
		folded = st.Muted.Render("  ▸ " + Count(r.hidden, "row", "rows") + " folded (" + p.env.Keys.Binding(keymap.ChangesFold).Help().Key + ")")
	}
	if r.change < 0 {
		arrow := "▾ "
		if r.hidden > 0 {
			arrow = "▸ "
		}
		if p.grouped && r.depth == 0 && !strings.HasSuffix(r.dir, "/") {
			// A tree's heading: the source's, or another tree's NAME:.
			label := st.Accent.Render(r.dir)
			if r.dir == mainHeading {
				label = st.Accent.Render("source") + st.Muted.Render(" (main)")
			}
			return "  " + st.Muted.Render(arrow) + label + folded
		}
		_, rel := p.treeOf(r.dir)
		parts := strings.Split(strings.TrimSuffix(rel, "/"), "/")
		return "  " + indent + st.Muted.Render(arrow) + st.Accent.Render(parts[len(parts)-1]+"/") + folded
	}
	c := p.all[r.change]
	name := c.Path
	if p.tree {
		_, name = p.treeOf(name)
		name = name[strings.LastIndexByte(name, '/')+1:]
	}
	if c.Type == overlay.TypeDir {
		name += "/"
	}
	var b strings.Builder
	b.WriteString(st.Picked.Render(p.picks[c.Path].Mark()))
	b.WriteByte(' ')
	b.WriteString(indent)
	b.WriteString(st.KindStyle(c.Kind.Letter()).Render(c.Kind.Letter()))
	b.WriteByte(' ')
	b.WriteString(name)
	var tags []string
	if c.Type == overlay.TypeSymlink && c.Target != "" {
		tags = append(tags, "→ "+c.Target)
	}
	if c.Whiteout {
		tags = append(tags, "⊘ whiteout")
	}
	if c.Opaque {
		tags = append(tags, "▣ opaque")
	}
	if c.Note != "" {
		tags = append(tags, c.Note)
	}
	if len(tags) > 0 {
		b.WriteString(st.Muted.Render("  " + strings.Join(tags, " · ")))
	}
	b.WriteString(folded)
	return b.String()
}
