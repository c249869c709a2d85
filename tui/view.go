package tui

import (
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/panes"
)

// rect is a pane's frame on screen, borders included.
type rect struct{ x, y, w, h int }

func (r rect) contains(x, y int) bool {
	return x >= r.x && x < r.x+r.w && y >= r.y && y < r.y+r.h
}

// Wide terminals show every pane at once; smaller ones (80x24 over SSH)
// show one pane at a time under a tab bar.
const (
	wideMinWidth  = 100
	wideMinHeight = 28
)

func (m Model) wide() bool { return m.width >= wideMinWidth && m.height >= wideMinHeight }

// layout places the panes: in wide mode the left column holds Worlds,
// Changes and Timeline, the right one Transcript and Diff.
func (m Model) layout() [paneCount]rect {
	var r [paneCount]rect
	if !m.wide() {
		for i := range r {
			r[i] = rect{0, 1, m.width, max(m.height-2, 3)}
		}
		return r
	}
	area := m.height - 1
	lw := min(max(m.width*2/5, 36), 70)
	rw := m.width - lw
	wh := max(area*3/10, 6)
	th := max(area/5, 5)
	ch := area - wh - th
	r[paneWorlds] = rect{0, 0, lw, wh}
	r[paneChanges] = rect{0, wh, lw, ch}
	r[paneTimeline] = rect{0, wh + ch, lw, th}
	trh := area * 2 / 5
	r[paneTranscript] = rect{lw, 0, rw, trh}
	r[paneDiff] = rect{lw, trh, rw, area - trh}
	return r
}

// resize tells every pane its content size.
func (m Model) resize() Model {
	r := m.layout()
	for i, p := range m.panes() {
		p.setSize(max(r[i].w-2, 1), max(r[i].h-2, 1))
	}
	return m
}

// View draws the whole screen.
func (m Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "strata"
	if m.world != "" {
		v.WindowTitle = "strata · " + m.world
	}
	return v
}

// Render is the screen's text; tests read it.
func (m Model) Render() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	r := m.layout()
	screen := make([]string, m.height)
	put := func(rc rect, lines []string) {
		for i, l := range lines {
			y := rc.y + i
			if y < 0 || y >= len(screen) || i >= rc.h {
				continue
			}
			screen[y] += l // panes are laid out left to right within a row
		}
	}
	if m.wide() {
		// Draw the left column, then the right, so each row concatenates.
		for _, p := range []paneID{paneWorlds, paneChanges, paneTimeline, paneTranscript, paneDiff} {
			put(r[p], m.framed(p, r[p]))
		}
	} else {
		screen[0] = m.tabBar()
		put(r[m.focus], m.framed(m.focus, r[m.focus]))
	}
	screen[m.height-1] = m.statusBar()
	for i := range screen {
		screen[i] = fitLine(screen[i], m.width)
	}
	out := strings.Join(screen, "\n")
	// The modals, bottom to top: the top one is drawn last.
	for _, md := range m.modals {
		out = md.draw(m, out)
	}
	return out
}

func (m Model) paneView(p paneID, w, h int) string {
	focused := p == m.focus && m.dialog() == nil
	return m.pane(p).view(w, h, focused)
}

// framed draws a pane inside its border with the title in the top edge.
func (m Model) framed(p paneID, rc rect) []string {
	iw, ih := max(rc.w-2, 0), max(rc.h-2, 0)
	title := " " + paneNames[p] + " "
	if m.wide() {
		title = " " + string(rune('1'+int(p))) + " " + paneNames[p] + " "
	}
	if p != paneWorlds && m.world != "" && iw > 30 {
		title += "· " + m.world + " "
	}
	return m.frame(title, p == m.focus, rc, m.paneView(p, iw, ih))
}

// frame draws body inside a border with title in the top edge.
func (m Model) frame(title string, focused bool, rc rect, body string) []string {
	st := m.env.Styles
	b, bs := st.FrameBorder, st.Frame
	ts := st.Title
	if focused {
		b, bs, ts = st.FocusedBorder, st.FrameFocused, st.TitleFocused
	}
	iw, ih := max(rc.w-2, 0), max(rc.h-2, 0)
	title = ansi.Truncate(title, max(iw-2, 0), "…")
	tw := panes.Width(title)
	top := bs.Render(b.TopLeft+b.Top) + ts.Render(title) + bs.Render(strings.Repeat(b.Top, max(iw-1-tw, 0))+b.TopRight)
	lines := make([]string, 0, rc.h)
	lines = append(lines, top)
	bodyLines := strings.Split(body, "\n")
	left, right := bs.Render(b.Left), bs.Render(b.Right)
	for i := 0; i < ih; i++ {
		l := ""
		if i < len(bodyLines) {
			l = bodyLines[i]
		}
		lines = append(lines, left+fitLine(l, iw)+right)
	}
	lines = append(lines, bs.Render(b.BottomLeft+strings.Repeat(b.Bottom, iw)+b.BottomRight))
	return lines
}

func (m Model) tabBar() string {
	st := m.env.Styles
	var parts []string
	for i := paneID(0); i < paneCount; i++ {
		label := " " + string(rune('1'+int(i))) + " " + paneNames[i] + " "
		if i == m.focus {
			parts = append(parts, st.TabActive.Render(label))
		} else {
			parts = append(parts, st.Tab.Render(label))
		}
	}
	bar := strings.Join(parts, "")
	if m.world != "" {
		bar += st.Muted.Render(" · " + m.world)
	}
	return bar
}

// tabAt is the tab under column x of the tab bar (-1 when none).
func (m Model) tabAt(x int) paneID {
	pos := 0
	for i := paneID(0); i < paneCount; i++ {
		w := len(paneNames[i]) + 4
		if x >= pos && x < pos+w {
			return i
		}
		pos += w
	}
	return -1
}

func (m Model) statusBar() string {
	st := m.env.Styles
	var help []string
	pinned := "" // "? help" shows at every width: the other hints give way
	hb := m.env.Keys.Binding(keymap.Help)
	top, inDialog := m.top().(dialogModal)
	nextField := m.env.Keys.Binding(keymap.DialogNextField).Help()
	for _, b := range m.env.Keys.ShortHelp(m.focusArea()) {
		if inDialog && len(top.d.Fields) < 2 && b.Help() == nextField {
			continue // a confirmation or a one-field form has no next field
		}
		item := st.StatusKey.Render(b.Help().Key) + st.StatusDesc.Render(" "+b.Help().Desc)
		if hb.Enabled() && b.Help() == hb.Help() && strings.Join(b.Keys(), " ") == strings.Join(hb.Keys(), " ") {
			pinned = item
			continue
		}
		help = append(help, item)
	}
	if inDialog && top.d.Info {
		// An info box only tells: nothing to confirm.
		km := m.env.Keys
		k := km.Binding(keymap.DialogConfirm).Help().Key + "/" + km.Binding(keymap.DialogCancel).Help().Key
		help = []string{st.StatusKey.Render(k) + st.StatusDesc.Render(" close")}
	}
	left := strings.Join(help, st.StatusDesc.Render("  "))
	right := ""
	switch {
	case m.lastErr != "":
		right = st.StatusError.Render(" " + m.lastErr + " ")
	case m.info != "":
		right = st.StatusBar.Render(" " + m.info + " ")
	}
	rw := panes.Width(right)
	if rw > m.width*2/3 {
		// Cut, and say where the whole text is.
		more := ""
		if k := m.env.Keys.Binding(keymap.Messages).Help().Key; k != "" {
			more = " " + k + " full text "
		}
		right = ansi.Truncate(right, max(m.width*2/3-panes.Width(more), 1), "…")
		if more != "" {
			right += st.StatusKey.Render(more)
		}
		rw = panes.Width(right)
	}
	lw := max(m.width-rw, 0)
	if pinned != "" {
		// As many hints as fit before "? help", in their order.
		sep := st.StatusDesc.Render("  ")
		room := lw - panes.Width(pinned)
		var kept []string
		used := 0
		for _, h := range help {
			w := panes.Width(h) + panes.Width(sep)
			if used+w > room {
				break
			}
			kept = append(kept, h)
			used += w
		}
		left = strings.Join(append(kept, pinned), sep)
	}
	left = ansi.Truncate(left, lw, "…")
	pad := max(lw-panes.Width(left), 0)
	return left + st.StatusBar.Render(strings.Repeat(" ", pad)) + right
}

// placeOverlay draws box centred over the screen, cell-accurately.
func placeOverlay(screen, box string, width, height int) string {
	lines := strings.Split(screen, "\n")
	bl := strings.Split(box, "\n")
	bw := lipgloss.Width(box)
	x := max((width-bw)/2, 0)
	y := max((height-len(bl))/2, 0)
	for i, b := range bl {
		row := y + i
		if row >= len(lines) {
			break
		}
		bg := lines[row]
		left := ansi.Truncate(bg, x, "")
		right := ansi.TruncateLeft(bg, x+panes.Width(b), "")
		lines[row] = fitLine(left+"\x1b[m"+b+"\x1b[m"+right, width)
	}
	return strings.Join(lines, "\n")
}

// fitLine truncates or pads one line to exactly width cells.
func fitLine(s string, width int) string {
	w := panes.Width(s)
	if w > width {
		return ansi.Truncate(s, width, "")
	}
	return s + strings.Repeat(" ", width-w)
}

// click focuses the pane under the pointer and lets it select the row.
func (m Model) click(msg tea.MouseClickMsg) (tea.Model, tea.Cmd) {
	if m.top() != nil {
		return m.toTop(msg) // the top modal only
	}
	mo := msg.Mouse()
	if mo.Button != tea.MouseLeft {
		return m, nil
	}
	if !m.wide() && mo.Y == 0 {
		if t := m.tabAt(mo.X); t >= 0 {
			m.focus = t
		}
		return m, nil
	}
	r := m.layout()
	for p := paneID(0); p < paneCount; p++ {
		if !m.wide() && p != m.focus {
			continue
		}
		if !r[p].contains(mo.X, mo.Y) {
			continue
		}
		m.focus = p
		y := mo.Y - r[p].y - 1 // content row; 0 is the pane's header line
		cmd := m.pane(p).click(y)
		return m, cmd
	}
	return m, nil
}

// wheel scrolls the pane under the pointer.
func (m Model) wheel(msg tea.MouseWheelMsg) (tea.Model, tea.Cmd) {
	if m.top() != nil {
		return m.toTop(msg) // the top modal only
	}
	mo := msg.Mouse()
	d := 3
	if mo.Button == tea.MouseWheelUp {
		d = -3
	} else if mo.Button != tea.MouseWheelDown {
		return m, nil
	}
	r := m.layout()
	target := m.focus
	if m.wide() {
		for p := paneID(0); p < paneCount; p++ {
			if r[p].contains(mo.X, mo.Y) {
				target = p
			}
		}
	}
	cmd := m.pane(target).scroll(d)
	return m, cmd
}

// Focus is the focused pane's area (tests and the status bar use it).
func (m Model) Focus() keymap.Area { return m.focusArea() }
