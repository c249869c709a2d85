package panes

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/themes"
)

// Env is what every pane draws and matches keys with. The root owns it and
// may swap the styles (the terminal reported its background) in place.
type Env struct {
	Keys   *keymap.KeyMap
	Styles *themes.Styles
}

// ActionMsg asks the root to do something a pane cannot do alone (engine
// work, dialogs, focus). Action is a keymap action name.
type ActionMsg struct {
	Action   string
	World    string
	Session  string
	Path     string
	Snapshot string
	Parent   string
}

func action(a ActionMsg) tea.Cmd { return func() tea.Msg { return a } }

// fit truncates an ANSI string to width cells and pads it to exactly width.
func fit(s string, width int) string {
	if width <= 0 {
		return ""
	}
	w := Width(s)
	if w > width {
		s = ansi.Truncate(s, width, "…")
		w = Width(s)
	}
	if w < width {
		s += strings.Repeat(" ", width-w)
	}
	return s
}

// block makes exactly height lines of exactly width cells.
func block(lines []string, width, height int) string {
	var b strings.Builder
	for i := 0; i < height; i++ {
		if i > 0 {
			b.WriteByte('\n')
		}
		if i < len(lines) {
			b.WriteString(fit(lines[i], width))
		} else {
			b.WriteString(strings.Repeat(" ", max(width, 0)))
		}
	}
	return b.String()
}

// cursorList is a cursor over n rows with a scroll offset that keeps it visible.
type cursorList struct {
	Cursor, Offset int
}

func (l *cursorList) move(delta, n int) {
	l.Cursor = clamp(l.Cursor+delta, 0, n-1)
}

func (l *cursorList) to(i, n int) { l.Cursor = clamp(i, 0, n-1) }

// window returns the first visible row for a view of height rows.
func (l *cursorList) window(height, n int) int {
	if height <= 0 {
		return 0
	}
	if l.Cursor < l.Offset {
		l.Offset = l.Cursor
	}
	if l.Cursor >= l.Offset+height {
		l.Offset = l.Cursor - height + 1
	}
	l.Offset = clamp(l.Offset, 0, max(n-height, 0))
	return l.Offset
}

func clamp(v, lo, hi int) int {
	if hi < lo {
		return lo
	}
	return min(max(v, lo), hi)
}

// isTextKey reports whether a key press types text into an input.
func isTextKey(k tea.KeyPressMsg) bool {
	return k.Text != "" && k.Mod&^tea.ModShift == 0
}

// Input is a one-line text field with history. It does not blink: the
// cursor is drawn reversed, so an open prompt costs nothing while idle.
type Input struct {
	Value   []rune
	Pos     int
	History []string
	hist    int // index into History while browsing; len(History) = not browsing
	draft   string
}

// NewInput makes an input holding value, with history (oldest first).
func NewInput(value string, history []string) Input {
	in := Input{Value: []rune(value), History: history, hist: len(history)}
	in.Pos = len(in.Value)
	return in
}

// String is the current text.
func (in *Input) String() string { return string(in.Value) }

// Set replaces the text.
func (in *Input) Set(s string) { in.Value = []rune(s); in.Pos = len(in.Value) }

// Update edits the text; it reports whether the key was an editing key.
func (in *Input) Update(k tea.KeyPressMsg) bool {
	switch k.String() {
	case "backspace", "ctrl+h":
		if in.Pos > 0 {
			in.Value = append(in.Value[:in.Pos-1], in.Value[in.Pos:]...)
			in.Pos--
		}
	case "delete", "ctrl+d":
		if in.Pos < len(in.Value) {
			in.Value = append(in.Value[:in.Pos], in.Value[in.Pos+1:]...)
		}
	case "left", "ctrl+b":
		in.Pos = max(in.Pos-1, 0)
	case "right", "ctrl+f":
		in.Pos = min(in.Pos+1, len(in.Value))
	case "home", "ctrl+a":
		in.Pos = 0
	case "end", "ctrl+e":
		in.Pos = len(in.Value)
	case "ctrl+u":
		in.Value = append([]rune(nil), in.Value[in.Pos:]...)
		in.Pos = 0
	case "ctrl+k":
		in.Value = in.Value[:in.Pos]
	case "ctrl+w":
		i := in.Pos
		for i > 0 && in.Value[i-1] == ' ' {
			i--
		}
		for i > 0 && in.Value[i-1] != ' ' {
			i--
		}
		in.Value = append(in.Value[:i], in.Value[in.Pos:]...)
		in.Pos = i
	default:
		if !isTextKey(k) {
			return false
		}
		r := []rune(k.Text)
		v := make([]rune, 0, len(in.Value)+len(r))
		v = append(v, in.Value[:in.Pos]...)
		v = append(v, r...)
		v = append(v, in.Value[in.Pos:]...)
		in.Value = v
		in.Pos += len(r)
	}
	return true
}

// Older and Newer browse the history.
func (in *Input) Older() {
	if in.hist == 0 || len(in.History) == 0 {
		return
	}
	if in.hist == len(in.History) {
		in.draft = in.String()
	}
	in.hist--
	in.Set(in.History[in.hist])
}

func (in *Input) Newer() {
	if in.hist >= len(in.History) {
		return
	}
	in.hist++
	if in.hist == len(in.History) {
		in.Set(in.draft)
		return
	}
	in.Set(in.History[in.hist])
}

// View draws the text with a reversed cursor cell, scrolled to keep the
// cursor visible within width.
func (in *Input) View(st *themes.Styles, width int, focused bool) string {
	if width <= 1 {
		return ""
	}
	v := in.Value
	start := 0
	if in.Pos >= width {
		start = in.Pos - width + 1
	}
	end := min(len(v), start+width)
	before := string(v[start:in.Pos])
	if !focused {
		return st.Input.Render(string(v[start:end]))
	}
	cur := " "
	after := ""
	if in.Pos < len(v) {
		cur = string(v[in.Pos])
		if in.Pos+1 < end {
			after = string(v[in.Pos+1 : end])
		}
	}
	return st.Input.Render(before) + st.InputCursor.Render(cur) + st.Input.Render(after)
}

// selectRow draws the cursor row: its own colours give way to the
// selection style so the cursor reads in every theme, NO_COLOR included.
func selectRow(st *themes.Styles, line string, width int, focused bool) string {
	s := st.SelectedBlur
	if focused {
		s = st.Selected
	}
	return s.Render(fit(ansi.Strip(line), width))
}

// Count says how many of a thing, with the right plural and thousands
// separated: Count(1, "file", "files") is "1 file", 1061 "1,061 files".
func Count(n int, one, many string) string {
	w := one
	if n != 1 {
		w = many
	}
	return Thousands(n) + " " + w
}

// Thousands writes n with a comma every three digits.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
