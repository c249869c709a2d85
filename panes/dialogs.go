package panes

import (
	"sort"
	"strings"
	"unicode"

	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
)

// Field is one text field of a dialog.
type Field struct {
	Label string
	Input Input
}

// Dialog is a modal question: a confirm (no fields), a prompt (one field)
// or a form (several). OnConfirm turns the field values into the message
// the root acts on.
type Dialog struct {
	env    *Env
	Title  string
	Body   []string
	Fields []Field
	// Require, when set, is text the person must type into the only field
	// before confirming: the second, explicit confirm of destructive actions.
	Require   string
	Danger    bool
	OnConfirm func(values []string) tea.Msg
	focus     int
	Err       string
	// Info makes it a box that only tells: enter or esc closes it, and
	// nothing is confirmed.
	Info bool
	// Hold keeps the dialog open once confirmed (Busy until the root says
	// how it went), so an error shows in it with the fields kept.
	Hold, Busy bool
}

// NewConfirm asks a yes/no question.
func NewConfirm(env *Env, title string, body []string, danger bool, yes tea.Msg) Dialog {
	return Dialog{env: env, Title: title, Body: body, Danger: danger, OnConfirm: func([]string) tea.Msg { return yes }}
}

// NewInfo shows information; enter or esc closes it.
func NewInfo(env *Env, title string, body []string) Dialog {
	return Dialog{env: env, Title: title, Body: body, Info: true}
}

// NewPrompt asks for one line of text, with history (oldest first).
func NewPrompt(env *Env, title, label, value string, history []string, on func(string) tea.Msg) Dialog {
	return Dialog{
		env: env, Title: title,
		Fields:    []Field{{Label: label, Input: NewInput(value, history)}},
		OnConfirm: func(v []string) tea.Msg { return on(v[0]) },
	}
}

// NewForm asks for several values; defaults fill the fields.
func NewForm(env *Env, title string, labels, defaults []string, on func([]string) tea.Msg) Dialog {
	d := Dialog{env: env, Title: title, OnConfirm: on}
	for i, l := range labels {
		v := ""
		if i < len(defaults) {
			v = defaults[i]
		}
		d.Fields = append(d.Fields, Field{Label: l, Input: NewInput(v, nil)})
	}
	return d
}

// NewTypedConfirm asks the person to type text to confirm.
func NewTypedConfirm(env *Env, title string, body []string, require string, yes tea.Msg) Dialog {
	return Dialog{
		env: env, Title: title, Body: body, Require: require, Danger: true,
		Fields:    []Field{{Label: "type " + require + " to confirm", Input: NewInput("", nil)}},
		OnConfirm: func([]string) tea.Msg { return yes },
	}
}

// Values are the fields' texts.
func (d Dialog) Values() []string {
	out := make([]string, len(d.Fields))
	for i, f := range d.Fields {
		out[i] = f.Input.String()
	}
	return out
}

// Update handles a key; done reports that the dialog closed (confirmed or
// cancelled); cmd carries the confirmed message.
func (d Dialog) Update(msg tea.Msg) (Dialog, tea.Cmd, bool) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return d, nil, false
	}
	km := d.env.Keys
	a, matched := km.Match(keymap.Dialog, k)
	if len(d.Fields) > 0 && isTextKey(k) && a != keymap.DialogConfirm && a != keymap.DialogCancel {
		d.Fields[d.focus].Input.Update(k)
		d.Err = ""
		return d, nil, false
	}
	if !matched {
		if len(d.Fields) > 0 {
			d.Fields[d.focus].Input.Update(k)
		}
		return d, nil, false
	}
	if d.Info {
		switch a {
		case keymap.DialogConfirm, keymap.DialogCancel, keymap.DialogYes, keymap.DialogNo:
			return d, nil, true
		}
		return d, nil, false
	}
	switch a {
	case keymap.DialogCancel:
		return d, nil, true
	case keymap.DialogNo:
		if len(d.Fields) == 0 {
			return d, nil, true
		}
	case keymap.DialogConfirm, keymap.DialogYes:
		if a == keymap.DialogYes && len(d.Fields) > 0 {
			return d, nil, false
		}
		if d.Require != "" && d.Values()[0] != d.Require {
			d.Err = "type " + d.Require + " exactly, or " + km.Binding(keymap.DialogCancel).Help().Key + " to cancel"
			return d, nil, false
		}
		if d.Busy {
			return d, nil, false
		}
		m := d.OnConfirm(d.Values())
		if d.Hold {
			d.Busy, d.Err = true, ""
			return d, func() tea.Msg { return m }, false
		}
		return d, func() tea.Msg { return m }, true
	case keymap.DialogNextField:
		if len(d.Fields) > 0 {
			d.focus = (d.focus + 1) % len(d.Fields)
		}
	case keymap.DialogPrevField:
		if len(d.Fields) > 0 {
			d.focus = (d.focus + len(d.Fields) - 1) % len(d.Fields)
		}
	case keymap.DialogHistoryPrev:
		if len(d.Fields) > 0 {
			d.Fields[d.focus].Input.Older()
		}
	case keymap.DialogHistoryNext:
		if len(d.Fields) > 0 {
			d.Fields[d.focus].Input.Newer()
		}
	}
	return d, nil, false
}

// View draws the dialog box, at most width wide.
func (d Dialog) View(width int) string {
	st := d.env.Styles
	inner := min(max(width-4, 20), 72)
	title := st.DialogTitle.Render(d.Title)
	if d.Danger {
		title = st.Error.Render(d.Title)
	}
	lines := []string{title, ""}
	for _, b := range d.Body {
		lines = append(lines, wrapText(b, inner)...)
	}
	if len(d.Body) > 0 && len(d.Fields) > 0 {
		lines = append(lines, "")
	}
	for i, f := range d.Fields {
		label := st.Muted.Render(f.Label)
		if i == d.focus {
			label = st.Accent.Render(f.Label)
		}
		lines = append(lines, label, "› "+f.Input.View(st, inner-2, i == d.focus))
	}
	if d.Err != "" {
		lines = append(lines, "")
		for _, l := range wrapText(d.Err, inner) {
			lines = append(lines, st.Error.Render(l))
		}
	}
	if d.Busy {
		lines = append(lines, "", st.Muted.Render("working…"))
	}
	km := d.env.Keys
	hint := km.Binding(keymap.DialogConfirm).Help().Key + " confirm · " + km.Binding(keymap.DialogCancel).Help().Key + " cancel"
	if len(d.Fields) > 1 {
		hint += " · " + km.Binding(keymap.DialogNextField).Help().Key + " next field"
	}
	if len(d.Fields) == 1 && len(d.Fields[0].Input.History) > 0 {
		hint += " · ↑↓ history"
	}
	if len(d.Fields) == 0 {
		hint = km.Binding(keymap.DialogYes).Help().Key + "/" + hint
	}
	if d.Info {
		hint = km.Binding(keymap.DialogConfirm).Help().Key + "/" + km.Binding(keymap.DialogCancel).Help().Key + " close"
	}
	lines = append(lines, "", st.Muted.Render(hint))
	for i := range lines {
		lines[i] = fit(lines[i], inner)
	}
	return st.Dialog.Render(strings.Join(lines, "\n"))
}

func wrapText(s string, width int) []string {
	return strings.Split(ansi.Wordwrap(s, width, ""), "\n")
}

// Help is the `?` overlay: every binding, the focused area first.
type Help struct {
	env    *Env
	Focus  keymap.Area
	offset int
}

// NewHelp opens the help on the focused area.
func NewHelp(env *Env, focus keymap.Area) Help { return Help{env: env, Focus: focus} }

// Update scrolls; done reports that the help closed.
func (h Help) Update(msg tea.Msg) (Help, bool) {
	switch m := msg.(type) {
	case tea.KeyPressMsg:
		// The key that opened the help closes it, as configured.
		if a, ok := h.env.Keys.Match(keymap.Global, m); ok && a == keymap.Help {
			return h, true
		}
		switch m.String() {
		case "esc", "q", "?", "enter":
			return h, true
		}
	}
	h.offset = scrollBy(msg, h.offset)
	return h, false
}

// scrollBy moves a scroll box's offset (scrollBox) for a key or wheel
// message: a line, ten lines, or three lines a wheel notch.
func scrollBy(msg tea.Msg, offset int) int {
	switch m := msg.(type) {
	case tea.KeyPressMsg:
		switch m.String() {
		case "down", "j":
			return offset + 1
		case "up", "k":
			return max(offset-1, 0)
		case "pgdown", "space":
			return offset + 10
		case "pgup":
			return max(offset-10, 0)
		}
	case tea.MouseWheelMsg:
		if m.Button == tea.MouseWheelDown {
			return offset + 3
		}
		return max(offset-3, 0)
	}
	return offset
}

// Lines are the help's lines, one group per area.
func (h Help) Lines() []string {
	st := h.env.Styles
	var lines []string
	for _, g := range h.env.Keys.FullHelp(h.Focus) {
		lines = append(lines, st.Accent.Render(strings.ToUpper(string(g.Area[:1]))+string(g.Area[1:])))
		for _, a := range g.Actions {
			keys := a.KeysLabel()
			pad := 14
			if Width(keys) >= pad {
				pad = Width(keys) + 1 // every key shows, even a long list from config.toml
			}
			lines = append(lines, "  "+st.StatusKey.UnsetBackground().Render(fit(keys, pad))+a.Desc())
		}
	}
	return lines
}

// View draws the help box within width x height.
func (h Help) View(width, height int) string {
	inner := min(max(width-4, 20), 56)
	return h.env.scrollBox("Keys", "  (config.toml [keys] overrides them)", h.Lines(), h.offset, inner, height)
}

// scrollBox draws a scrolled list of lines in a dialog box inner columns
// wide and at most height rows high: a title, the lines from offset, and
// the scroll hint.
func (e *Env) scrollBox(title, note string, lines []string, offset, inner, height int) string {
	st := e.Styles
	body := max(height-6, 3)
	off := clamp(offset, 0, max(len(lines)-body, 0))
	out := []string{st.DialogTitle.Render(title) + st.Muted.Render(note)}
	out = append(out, lines[off:min(off+body, len(lines))]...)
	out = append(out, st.Muted.Render("↑↓ scroll · esc close"))
	for i := range out {
		out[i] = fit(out[i], inner)
	}
	return st.Dialog.Render(strings.Join(out, "\n"))
}

// PaletteChosenMsg runs an action picked in the palette.
type PaletteChosenMsg struct{ Action string }

// Palette is the `:` command palette: fuzzy search over every action.
type Palette struct {
	env     *Env
	input   Input
	matches []*keymap.Action
	cursor  int
}

// NewPalette opens the palette.
func NewPalette(env *Env) Palette {
	p := Palette{env: env}
	p.matches = p.filter("")
	return p
}

// Matches are the actions matching the query, best first.
func (p Palette) Matches() []*keymap.Action { return p.matches }

func (p Palette) filter(q string) []*keymap.Action {
	type scored struct {
		a *keymap.Action
		s int
	}
	var out []scored
	for _, a := range p.env.Keys.Actions() {
		if keymap.Modal(a.Area) {
			continue // only meaningful while their view is open
		}
		if s, ok := paletteScore(q, a); ok {
			out = append(out, scored{a, s})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].s > out[j].s })
	res := make([]*keymap.Action, len(out))
	for i, o := range out {
		res[i] = o.a
	}
	return res
}

// paletteScore ranks real matches above fuzzy ones: the query starting
// the action's name or verb, then every query word starting a word of the
// name or description, then a substring, then a fuzzy match; the fuzzy
// score orders each tier.
func paletteScore(q string, a *keymap.Action) (int, bool) {
	text := a.Desc() + " " + a.Name
	// A fuzzy match stays inside the description or inside the name: one
	// threaded through both ("scroll down transcript.down" for "snap") is
	// noise, not a match.
	sd, okd := FuzzyScore(q, a.Desc())
	sn, okn := FuzzyScore(q, a.Name)
	if !okd && !okn {
		return 0, false
	}
	s := max(sd, sn)
	if !okd {
		s = sn
	} else if !okn {
		s = sd
	}
	ql := strings.ToLower(strings.TrimSpace(q))
	if ql == "" {
		return s, true
	}
	lower := strings.ToLower(text)
	_, verb, _ := strings.Cut(a.Name, ".")
	words := strings.FieldsFunc(lower, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	allStart := true
	for _, w := range strings.Fields(ql) {
		found := false
		for _, x := range words {
			if strings.HasPrefix(x, w) {
				found = true
				break
			}
		}
		allStart = allStart && found
	}
	tier := 0
	switch {
	case strings.HasPrefix(verb, ql) || strings.HasPrefix(a.Name, ql):
		tier = 3
	case allStart:
		tier = 2
	case strings.Contains(lower, ql):
		tier = 1
	}
	return tier*1_000_000 + s, true
}

// FuzzyScore matches q's characters in order within text (case-insensitive)
// and scores runs and word starts higher; ok is false when q does not match.
func FuzzyScore(q, text string) (int, bool) {
	q = strings.ToLower(strings.TrimSpace(q))
	if q == "" {
		return 0, true
	}
	t := []rune(strings.ToLower(text))
	score, ti, run := 0, 0, 0
	for _, c := range q {
		if c == ' ' {
			continue
		}
		found := false
		for ti < len(t) {
			if t[ti] == c {
				found = true
				score++
				if ti == 0 || !unicode.IsLetter(t[ti-1]) {
					score += 3
				}
				run++
				score += run
				ti++
				break
			}
			run = 0
			ti++
		}
		if !found {
			return 0, false
		}
	}
	// Shorter texts win ties: the match is a larger part of them.
	return score*100 - len(t), true
}

// Update handles a key; done reports that the palette closed.
func (p Palette) Update(msg tea.Msg) (Palette, tea.Cmd, bool) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return p, nil, false
	}
	switch k.String() {
	case "esc":
		return p, nil, true
	case "enter":
		if p.cursor < len(p.matches) {
			name := p.matches[p.cursor].Name
			return p, func() tea.Msg { return PaletteChosenMsg{Action: name} }, true
		}
		return p, nil, true
	case "up", "ctrl+p":
		p.cursor = max(p.cursor-1, 0)
	case "down", "ctrl+n":
		p.cursor = min(p.cursor+1, max(len(p.matches)-1, 0))
	default:
		if p.input.Update(k) {
			p.matches = p.filter(p.input.String())
			p.cursor = 0
		}
	}
	return p, nil, false
}

// View draws the palette within width x height.
func (p Palette) View(width, height int) string {
	st := p.env.Styles
	inner := min(max(width-4, 24), 64)
	lines := []string{st.Accent.Render(":") + p.input.View(st, inner-1, true)}
	body := max(min(height-5, 14), 3)
	off := clamp(p.cursor-body+1, 0, max(len(p.matches)-body, 0))
	keyW := 7 // room for every key shown, keys from config.toml included
	for i := off; i < min(off+body, len(p.matches)); i++ {
		keyW = max(keyW, min(Width(p.matches[i].KeysLabel()), 20))
	}
	for i := off; i < min(off+body, len(p.matches)); i++ {
		a := p.matches[i]
		line := fit(a.Desc(), inner-17-keyW) + st.Muted.Render(fit(" "+a.Name, 16)) + " " + st.Accent.Render(fit(a.KeysLabel(), keyW))
		if i == p.cursor {
			line = selectRow(st, line, inner, true)
		}
		lines = append(lines, line)
	}
	if len(p.matches) == 0 {
		lines = append(lines, st.Muted.Render("no action matches"))
	}
	for i := range lines {
		lines[i] = fit(lines[i], inner)
	}
	return st.Dialog.Render(strings.Join(lines, "\n"))
}
