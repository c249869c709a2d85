package panes

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/keymap"
	tea "github.com/stratahq/strata/third_party/bubbletea"
)

// WorldRow is what the Worlds pane shows of one World.
type WorldRow struct {
	Name    string
	Source  string
	Status  string // running, waiting, failed, broken, done, idle, planned, stopped
	Backend string
	Changes int
	// Boundary is the World's isolation level and network mode in one
	// glance ("sandbox/proxy", "tree/host"); "" when not local.
	Boundary string
	Sessions int
	Running  int
	Error    string
	// Agent is the state of the World's agent session ("" = none), Reason
	// why, Since when; NeedsYou: it waits on the person (not muted).
	Agent       string
	AgentReason string
	AgentSince  time.Time
	NeedsYou    bool
}

// agentLabel is an agent state in the status column's 8 cells.
func agentLabel(state string) string {
	switch state {
	case "needs-permission":
		return "permit?"
	case "asking":
		return "asking"
	}
	return state
}

// NextNeedsYou is the World after current, in "oldest wait first" order,
// among those whose agent (or session) waits on the person; "" when none.
func NextNeedsYou(rows []WorldRow, current string) string {
	var needy []WorldRow
	for _, r := range rows {
		if r.NeedsYou || r.Agent == "" && r.Status == "waiting" {
			needy = append(needy, r)
		}
	}
	if len(needy) == 0 {
		return ""
	}
	sort.SliceStable(needy, func(i, j int) bool {
		a, b := needy[i].AgentSince, needy[j].AgentSince
		if a.IsZero() != b.IsZero() {
			return !a.IsZero()
		}
		return a.Before(b)
	})
	for i, r := range needy {
		if r.Name == current {
			return needy[(i+1)%len(needy)].Name
		}
	}
	return needy[0].Name
}

// statusOrder sorts the Worlds that need the person first.
var statusOrder = map[string]int{
	"waiting": 0, "failed": 1, "broken": 2, "running": 3, "done": 4, "idle": 5, "planned": 6, "stopped": 7,
}

// StatusGlyph is the one-cell mark of a World status.
func StatusGlyph(status string) string {
	switch status {
	case "running":
		return "●"
	case "waiting":
		return "◐"
	case "failed":
		return "✗"
	case "done":
		return "✓"
	case "idle":
		return "○"
	case "planned":
		return "◌"
	case "stopped":
		return "■"
	case "broken":
		return "!"
	}
	return "?"
}

// WorldResources is what a World costs the machine, sampled while its
// sessions run.
type WorldResources struct {
	CPU       float64 // percent of one core
	Memory    int64   // bytes
	Processes int
	// History holds the last CPU samples, oldest first, for the sparkline.
	History []float64
	// Live: the last sample found sessions running.
	Live bool
}

// SparkWidth is how many samples the CPU sparkline shows.
const SparkWidth = 8

// memWidth is the memory column: a space and fsx.HumanBytes at its widest
// ("1023.9 MiB").
const memWidth = 11

var sparkChars = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws samples (percent of one core) as one cell each; the
// scale tops at one busy core, or the highest sample when higher.
func Sparkline(samples []float64, width int) string {
	if len(samples) > width {
		samples = samples[len(samples)-width:]
	}
	top := 100.0
	for _, s := range samples {
		top = max(top, s)
	}
	out := make([]rune, 0, width)
	for i := 0; i < width-len(samples); i++ {
		out = append(out, ' ')
	}
	for _, s := range samples {
		i := int(s / top * float64(len(sparkChars)-1))
		out = append(out, sparkChars[clamp(i, 0, len(sparkChars)-1)])
	}
	return string(out)
}

// WorldsSelectedMsg says the Worlds cursor is on a World ("" = none).
type WorldsSelectedMsg struct{ Name string }

// Worlds is the list of Worlds, "needs you" first.
type Worlds struct {
	env   *Env
	rows  []WorldRow
	list  cursorList
	Scope string // the source shown, "" = all Worlds
	// Elsewhere counts the Worlds over other sources than Scope, so an
	// empty list can say where they are.
	Elsewhere int
	res       map[string]WorldResources
	loaded    bool
	height    int
}

// SetSize tells the pane how tall it is drawn, so scrolling matches the view
// (rows are as wide as the view).
func (p Worlds) SetSize(_, h int) Worlds {
	p.height = h
	p.list.window(h-1, len(p.rows))
	return p
}

// NewWorlds makes an empty Worlds pane.
func NewWorlds(env *Env) Worlds { return Worlds{env: env} }

// SortWorlds orders rows: waiting, failed, broken, running, done, idle, planned,
// stopped; then by name.
func SortWorlds(rows []WorldRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		oi, ok := statusOrder[rows[i].Status]
		if !ok {
			oi = 9
		}
		oj, ok := statusOrder[rows[j].Status]
		if !ok {
			oj = 9
		}
		if oi != oj {
			return oi < oj
		}
		return rows[i].Name < rows[j].Name
	})
}

// SetRows replaces the list, keeping the cursor on the same World. It
// returns a WorldsSelectedMsg command when the selection changed.
func (p Worlds) SetRows(rows []WorldRow) (Worlds, tea.Cmd) {
	prev := p.Selected()
	rows = append([]WorldRow(nil), rows...)
	SortWorlds(rows)
	p.rows = rows
	p.loaded = true
	p.list.to(p.list.Cursor, len(rows))
	for i, r := range rows {
		if r.Name == prev {
			p.list.Cursor = i
		}
	}
	if cur := p.Selected(); cur != prev {
		return p, func() tea.Msg { return WorldsSelectedMsg{Name: cur} }
	}
	return p, nil
}

// SetResources replaces the resource figures, by World name.
func (p Worlds) SetResources(res map[string]WorldResources) Worlds {
	p.res = res
	return p
}

// Resources are the figures shown of a World.
func (p Worlds) Resources(name string) (WorldResources, bool) {
	r, ok := p.res[name]
	return r, ok
}

// Rows are the Worlds in display order.
func (p Worlds) Rows() []WorldRow { return p.rows }

// Selected is the name of the World under the cursor ("" when empty).
func (p Worlds) Selected() string {
	if p.list.Cursor < 0 || p.list.Cursor >= len(p.rows) {
		return ""
	}
	return p.rows[p.list.Cursor].Name
}

// Select puts the cursor on a World by name.
func (p Worlds) Select(name string) (Worlds, tea.Cmd) {
	for i, r := range p.rows {
		if r.Name == name && i != p.list.Cursor {
			p.list.Cursor = i
			return p, p.selected()
		}
	}
	return p, nil
}

func (p Worlds) selected() tea.Cmd {
	name := p.Selected()
	return func() tea.Msg { return WorldsSelectedMsg{Name: name} }
}

// Update handles keys while focused.
func (p Worlds) Update(msg tea.Msg) (Worlds, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		if a, ok := p.env.Keys.Match(keymap.Worlds, k); ok {
			return p.Do(a)
		}
	}
	return p, nil
}

// Do performs one action of the worlds area.
func (p Worlds) Do(a string) (Worlds, tea.Cmd) {
	before := p.list.Cursor
	n := len(p.rows)
	switch a {
	case keymap.WorldsUp:
		p.list.move(-1, n)
	case keymap.WorldsDown:
		p.list.move(1, n)
	case keymap.WorldsTop:
		p.list.to(0, n)
	case keymap.WorldsBottom:
		p.list.to(n-1, n)
	case keymap.WorldsNew:
		return p, action(ActionMsg{Action: a})
	case keymap.WorldsRemove, keymap.WorldsRun, keymap.WorldsOpen, keymap.WorldsCompare:
		if name := p.Selected(); name != "" {
			return p, action(ActionMsg{Action: a, World: name})
		}
		return p, nil
	}
	p.list.window(p.height-1, n)
	if p.list.Cursor != before {
		return p, p.selected()
	}
	return p, nil
}

// Click selects the row at y (0 = first content line of the pane).
func (p Worlds) Click(y int) (Worlds, tea.Cmd) {
	i := p.list.Offset + y - 1 // the first line is the header
	if i < 0 || i >= len(p.rows) || i == p.list.Cursor {
		return p, nil
	}
	p.list.Cursor = i
	return p, p.selected()
}

// Scroll moves the cursor by delta rows (mouse wheel).
func (p Worlds) Scroll(delta int) (Worlds, tea.Cmd) {
	before := p.list.Cursor
	p.list.move(delta, len(p.rows))
	p.list.window(p.height-1, len(p.rows))
	if p.list.Cursor != before {
		return p, p.selected()
	}
	return p, nil
}

// View draws the pane.
func (p Worlds) View(width, height int, focused bool) string {
	st := p.env.Styles
	if height <= 0 {
		return ""
	}
	scope := "all sources"
	if p.Scope != "" {
		scope = p.Scope
	}
	waiting := 0
	for _, r := range p.rows {
		if r.Status == "waiting" || r.Status == "failed" || r.Status == "broken" {
			waiting++
		}
	}
	head := st.Muted.Render(fmt.Sprintf("%d over %s", len(p.rows), scope))
	if waiting > 0 {
		head = st.StatusStyle("waiting").Render(fmt.Sprintf("%d need you", waiting)) + st.Muted.Render(" · ") + head
	}
	lines := []string{head}
	if !p.loaded {
		lines = append(lines, st.Muted.Render("loading…"))
		return block(lines, width, height)
	}
	if len(p.rows) == 0 {
		// The heading above names the source: two short lines say how to
		// make a World even in the 46-column pane of a 120x40 screen (a
		// long path repeated here wrapped them into three or four).
		empty := "No Worlds over this source yet."
		if p.Scope == "" {
			empty = "No Worlds yet."
		}
		lines = append(lines, "")
		// What a World is for is in the README; here, how to make one.
		lines = append(lines, wrapText(empty, width)...)
		lines = append(lines, wrapText("press "+p.env.Keys.Binding(keymap.WorldsNew).Help().Key+" to create one, or run: strata new NAME", width)...)
		if p.Scope != "" && p.Elsewhere > 0 {
			msg := Count(p.Elsewhere, "World", "Worlds") + " over other sources"
			if k := p.env.Keys.Binding(keymap.AllWorlds).Help().Key; k != "" {
				msg += " — press " + k + " to show every World"
			}
			lines = append(lines, "")
			for _, l := range wrapText(msg, width) {
				lines = append(lines, st.Muted.Render(l))
			}
		}
		return block(lines, width, height)
	}
	body := height - 1
	off := p.list.window(body, len(p.rows))
	// Columns shrink away from the right on narrow panes.
	// CPU and its sparkline once anything was sampled, then memory; the
	// backend gives way first.
	showRes := len(p.res) > 0 && width >= 44
	showSpark := showRes
	showMem := showRes && width >= 58+memWidth-6
	showBackend, showSessions := width >= 46 && (!showRes || width >= 72), width >= 38
	showBoundary := width >= 96 && slices.ContainsFunc(p.rows, func(r WorldRow) bool { return r.Boundary != "" })
	nameRoom := func() int {
		w := width - 2 - 9 - 6
		for _, c := range []struct {
			on bool
			w  int
		}{{showRes, 5}, {showSpark, 1 + SparkWidth}, {showMem, memWidth}, {showBackend, 7}, {showBoundary, 15}, {showSessions, 6}} {
			if c.on {
				w -= c.w
			}
		}
		return w
	}
	// Names win: forks (refactor-1, refactor-2) must not look alike, so
	// the figures give way until the longest name fits whole.
	need := 0
	for _, r := range p.rows {
		need = max(need, Width(r.Name))
	}
	for _, drop := range []*bool{&showBoundary, &showSpark, &showMem, &showRes, &showBackend, &showSessions} {
		if nameRoom() >= need {
			break
		}
		*drop = false
	}
	nameW := max(nameRoom(), 8)
	for i := off; i < min(off+body, len(p.rows)); i++ {
		r := p.rows[i]
		ss := st.StatusStyle(r.Status)
		var b strings.Builder
		b.WriteString(ss.Render(StatusGlyph(r.Status)))
		b.WriteByte(' ')
		status := r.Status
		if r.Agent != "" && r.Agent != "exited" {
			status = agentLabel(r.Agent)
		}
		if r.AgentReason != "" && r.NeedsYou && Width(r.Name)+2 < nameW {
			b.WriteString(r.Name + st.Muted.Render(fit(" "+r.AgentReason, nameW-Width(r.Name))))
		} else {
			b.WriteString(fit(r.Name, nameW))
		}
		b.WriteString(ss.Render(fit(" "+status, 9)))
		if showBackend {
			b.WriteString(st.Muted.Render(fit(" "+r.Backend, 7)))
		}
		if showBoundary {
			bs := st.Muted
			if strings.HasPrefix(r.Boundary, "tree") {
				bs = st.Warning // tree protects only the source
			}
			b.WriteString(bs.Render(fit(" "+r.Boundary, 15)))
		}
		ch := fmt.Sprintf("%5d", r.Changes)
		if r.Error != "" {
			ch = fit("    !", 5)
			b.WriteString(st.Error.Render(ch))
		} else {
			b.WriteString(ch)
		}
		b.WriteString(st.Muted.Render("Δ"))
		if showSessions {
			s := fmt.Sprintf(" %d/%d", r.Running, r.Sessions)
			b.WriteString(st.Muted.Render(fmt.Sprintf("%6s", s)))
		}
		if showRes {
			res, ok := p.res[r.Name]
			cpu, mem := "    ·", fmt.Sprintf("%*s", memWidth, "·")
			if ok && res.Live {
				cpu, mem = fmt.Sprintf("%4.0f%%", res.CPU), fmt.Sprintf("%*s", memWidth, fsx.HumanBytes(res.Memory))
			}
			cs := st.Text
			if ok && res.Live && res.CPU >= 80 {
				cs = st.Warning
			}
			b.WriteString(cs.Render(cpu))
			if showMem {
				b.WriteString(st.Muted.Render(mem))
			}
			if showSpark {
				b.WriteString(" " + st.Accent.Render(Sparkline(res.History, SparkWidth)))
			}
		}
		line := fit(b.String(), width)
		if i == p.list.Cursor {
			line = selectRow(st, line, width, focused)
		}
		lines = append(lines, line)
	}
	return block(lines, width, height)
}
