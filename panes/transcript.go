package panes

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
)

// SessionRow is what the Transcript pane shows of one session.
type SessionRow struct {
	ID       string
	Command  string
	State    string // starting, running, exited, failed, killed, lost
	ExitCode int
	TTY      bool
	Started  time.Time
	// Waiting is a running session waiting for input (its terminal idle
	// at a prompt): the person is needed.
	Waiting bool
}

// TranscriptSessionMsg says the Transcript pane switched to a session; the
// root loads its output.
type TranscriptSessionMsg struct{ World, Session string }

// Transcript shows one session's output: a line index over the raw bytes,
// so only the visible rows are ever laid out however long the output is.
type Transcript struct {
	env      *Env
	World    string
	sessions []SessionRow
	cur      int

	buf    []byte
	starts []int // byte offset of each line in buf; the last line may be partial
	// term replaces buf and starts for a PTY session: its output goes
	// through a terminal emulator.
	term *terminal
	// marks map record times to the line their output starts on, to show
	// the moment something happened.
	marks []timeMark

	follow bool
	bottom int  // last visible line while not following
	atTop  bool // drawn from line 0 down (after "top")
	height int  // body height at the last draw, for paging

	searching bool
	search    Input
	searches  []string // earlier queries, oldest first (↑ in the prompt)
	query     string
	matches   []int
	matchIdx  int
}

// NewTranscript makes an empty Transcript pane that follows the tail.
func NewTranscript(env *Env) Transcript {
	return Transcript{env: env, follow: true, starts: []int{0}, height: 10}
}

// SetSessions replaces the session list of world. A new World, or a new
// session appearing while the newest was shown, moves to the newest one.
func (p Transcript) SetSessions(world string, rows []SessionRow) (Transcript, tea.Cmd) {
	prev := p.Session()
	wasNewest := p.cur == len(p.sessions)-1
	worldChanged := world != p.World
	p.World = world
	p.sessions = rows
	p.cur = len(rows) - 1
	if !worldChanged && !wasNewest {
		for i, s := range rows {
			if s.ID == prev {
				p.cur = i
			}
		}
	}
	if cur := p.Session(); cur != prev || worldChanged {
		p = p.Reset()
		if cur == "" {
			return p, nil
		}
		return p, func() tea.Msg { return TranscriptSessionMsg{World: world, Session: cur} }
	}
	return p, nil
}

// SelectSession shows the session with id; the command loads its output.
func (p Transcript) SelectSession(id string) (Transcript, tea.Cmd, bool) {
	for i, s := range p.sessions {
		if s.ID != id {
			continue
		}
		if i != p.cur || p.Lines() <= 1 {
			p.cur = i
			p = p.Reset()
			w := p.World
			return p, func() tea.Msg { return TranscriptSessionMsg{World: w, Session: id} }, true
		}
		return p, nil, true
	}
	return p, nil, false
}

// Session is the id of the session shown ("" when none).
func (p Transcript) Session() string {
	if p.cur < 0 || p.cur >= len(p.sessions) {
		return ""
	}
	return p.sessions[p.cur].ID
}

// Reset clears the output (before loading another session).
func (p Transcript) Reset() Transcript {
	p.buf = nil
	p.starts = []int{0}
	p.term.close()
	p.term = nil
	p.marks = nil
	p.follow = true
	p.bottom = 0
	p.matches = nil
	return p
}

// Append adds output bytes of the session shown.
func (p Transcript) Append(data []byte) Transcript {
	base := len(p.buf)
	p.buf = append(p.buf, data...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		p.starts = append(p.starts, base+i+1)
		base += i + 1
		data = data[i+1:]
	}
	return p
}

// AppendChunks adds transcript records of the session shown: a PTY
// session's go through a terminal emulator sized like the session, the
// others are appended as text.
func (p Transcript) AppendChunks(chunks []TranscriptChunk) Transcript {
	tty := p.cur >= 0 && p.cur < len(p.sessions) && p.sessions[p.cur].TTY
	for _, c := range chunks {
		if len(p.marks) == 0 || !c.Time.Before(p.marks[len(p.marks)-1].at) {
			line := len(p.starts) - 1
			if p.term != nil {
				line = p.term.scrollback() + p.term.emu.CursorPosition().Y
			}
			p.marks = append(p.marks, timeMark{at: c.Time, line: line})
		}
		if !tty {
			if len(c.Data) > 0 && c.Cols == 0 {
				p = p.Append(c.Data)
			}
			continue
		}
		if p.term == nil {
			cols, rows := defaultCols, defaultRows
			if c.Cols > 0 && c.Rows > 0 {
				cols, rows = c.Cols, c.Rows
			}
			p.term = newTerminal(cols, rows)
		}
		p.term.write(c)
	}
	return p
}

// Terminal reports whether the output is shown through the emulator.
func (p Transcript) Terminal() bool { return p.term != nil }

type timeMark struct {
	at   time.Time
	line int
}

// LineAt is the line the first record at or after t starts on (-1 when
// every record is older).
func (p Transcript) LineAt(t time.Time) int {
	for _, m := range p.marks {
		if !m.at.Before(t) {
			return m.line
		}
	}
	return -1
}

// ShowLine scrolls so line is in view (about a third from the top) and
// stops following the tail.
func (p Transcript) ShowLine(line int) Transcript {
	last := p.Lines() - 1
	if line < 0 || last < 0 {
		return p
	}
	p.atTop = false
	p.bottom = clamp(line+p.height*2/3, min(p.height-1, last), last)
	p.follow = p.bottom >= last
	return p
}

// Lines is the number of lines (a trailing partial line counts).
func (p Transcript) Lines() int {
	if p.term != nil {
		return p.term.lines()
	}
	n := len(p.starts)
	if n > 1 && p.starts[n-1] == len(p.buf) {
		n-- // output ends with a newline: no partial line yet
	}
	return n
}

// Following reports whether the view sticks to the tail.
func (p Transcript) Following() bool { return p.follow }

// Line returns line i as it should be displayed: carriage returns resolved
// (the text after the last one wins, as on a terminal), escape sequences
// other than colours removed, tabs expanded.
func (p Transcript) Line(i int) string {
	if p.term != nil {
		return p.term.line(i)
	}
	if i < 0 || i >= len(p.starts) {
		return ""
	}
	end := len(p.buf)
	if i+1 < len(p.starts) {
		end = p.starts[i+1] - 1
	}
	raw := p.buf[p.starts[i]:end]
	raw = bytes.TrimSuffix(raw, []byte{'\r'})
	if j := bytes.LastIndexByte(raw, '\r'); j >= 0 {
		raw = raw[j+1:]
	}
	return sanitize(raw)
}

// sanitize keeps text and SGR colour sequences and drops every other
// control: cursor movement from a PTY would otherwise wreck the layout.
func sanitize(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == 0x1b && i+1 < len(b) && b[i+1] == '[':
			j := i + 2
			for j < len(b) && (b[j] < 0x40 || b[j] > 0x7e) {
				j++
			}
			if j < len(b) && b[j] == 'm' {
				out.Write(b[i : j+1])
			}
			i = j
		case c == 0x1b && i+1 < len(b) && b[i+1] == ']':
			j := i + 2
			for j < len(b) && b[j] != 0x07 && (b[j] != 0x1b || j+1 >= len(b) || b[j+1] != '\\') {
				j++
			}
			if j < len(b) && b[j] == 0x1b {
				j++
			}
			i = j
		case c == 0x1b:
			i++
		case c == '\t':
			out.WriteString("    ")
		case c < 0x20 || c == 0x7f:
		default:
			out.WriteByte(c)
		}
	}
	return out.String()
}

// Update handles keys while focused.
func (p Transcript) Update(msg tea.Msg) (Transcript, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return p, nil
	}
	if p.searching {
		switch k.String() {
		case "enter":
			p.searching = false
			q := p.search.String()
			if q == "" {
				q = p.query // as in less and vim: enter alone repeats the last search
			}
			if q != "" && (len(p.searches) == 0 || p.searches[len(p.searches)-1] != q) {
				p.searches = append(p.searches, q)
			}
			p = p.runSearch(q)
		case "esc":
			p.searching = false
		case "up", "ctrl+p":
			p.search.Older()
		case "down", "ctrl+n":
			p.search.Newer()
		default:
			p.search.Update(k)
		}
		return p, nil
	}
	if a, ok := p.env.Keys.Match(keymap.Transcript, k); ok {
		return p.Do(a)
	}
	if k.String() == "esc" && p.query != "" {
		p.query, p.matches = "", nil
	}
	return p, nil
}

// Searching reports whether the search prompt has the keys.
func (p Transcript) Searching() bool { return p.searching }

// Do performs one action of the transcript area.
func (p Transcript) Do(a string) (Transcript, tea.Cmd) {
	page := max(p.height-1, 1)
	switch a {
	case keymap.TranscriptUp:
		p = p.scroll(-1)
	case keymap.TranscriptDown:
		p = p.scroll(1)
	case keymap.TranscriptPageUp:
		p = p.scroll(-page)
	case keymap.TranscriptPageDown:
		p = p.scroll(page)
	case keymap.TranscriptTop:
		p.follow = false
		p.atTop = true
		p.bottom = min(p.height-1, p.Lines()-1)
	case keymap.TranscriptFollow:
		p.follow, p.atTop = true, false
	case keymap.TranscriptSearch:
		// A new search starts empty (typing must not extend the last
		// query); ↑ brings back earlier ones.
		p.searching = true
		p.search = NewInput("", p.searches)
	case keymap.TranscriptNextMatch:
		p = p.jumpMatch(1)
	case keymap.TranscriptPrevMatch:
		p = p.jumpMatch(-1)
	case keymap.TranscriptNextSession, keymap.TranscriptPrevSession:
		d := 1
		if a == keymap.TranscriptPrevSession {
			d = -1
		}
		next := clamp(p.cur+d, 0, len(p.sessions)-1)
		if next == p.cur || len(p.sessions) == 0 {
			return p, nil
		}
		p.cur = next
		p = p.Reset()
		w, s := p.World, p.Session()
		return p, func() tea.Msg { return TranscriptSessionMsg{World: w, Session: s} }
	case keymap.TranscriptAttach, keymap.TranscriptKill:
		if p.Session() == "" {
			return p, nil
		}
		return p, action(ActionMsg{Action: a, World: p.World, Session: p.Session()})
	case keymap.TranscriptRun:
		if p.World == "" {
			return p, nil
		}
		return p, action(ActionMsg{Action: a, World: p.World})
	}
	return p, nil
}

// Scroll moves the view by delta lines (mouse wheel); scrolling to the end
// follows the tail again.
func (p Transcript) Scroll(delta int) (Transcript, tea.Cmd) { return p.scroll(delta), nil }

func (p Transcript) scroll(delta int) Transcript {
	last := p.Lines() - 1
	if p.follow {
		p.bottom = last
	}
	p.atTop = false
	p.bottom = clamp(p.bottom+delta, min(p.height-1, last), last)
	p.follow = p.bottom >= last
	return p
}

// runSearch finds the lines holding q (case-insensitive unless q has an
// upper-case letter) and jumps to the last match before the view's end.
func (p Transcript) runSearch(q string) Transcript {
	p.query = q
	p.matches = p.matches[:0]
	if q == "" {
		return p
	}
	fold := strings.ToLower(q) == q
	for i := 0; i < p.Lines(); i++ {
		line := ansi.Strip(p.Line(i))
		if fold {
			line = strings.ToLower(line)
		}
		if strings.Contains(line, q) {
			p.matches = append(p.matches, i)
		}
	}
	if len(p.matches) == 0 {
		return p
	}
	p.matchIdx = len(p.matches) - 1
	return p.showMatch()
}

// Matches is the number of lines matching the search.
func (p Transcript) Matches() int { return len(p.matches) }

// Query is the active search.
func (p Transcript) Query() string { return p.query }

func (p Transcript) jumpMatch(d int) Transcript {
	if len(p.matches) == 0 {
		return p
	}
	p.matchIdx = (p.matchIdx + d + len(p.matches)) % len(p.matches)
	p.atTop = false
	return p.showMatch()
}

func (p Transcript) showMatch() Transcript {
	line := p.matches[p.matchIdx]
	p.follow = false
	p.bottom = clamp(line+p.height/2, min(p.height-1, p.Lines()-1), p.Lines()-1)
	if p.bottom >= p.Lines()-1 {
		p.follow = true
	}
	return p
}

// SetSize tells the pane how tall it is drawn, for paging and scrolling
// (lines are cut at the view's width).
func (p Transcript) SetSize(_, h int) Transcript {
	p.height = max(h-1, 1)
	return p
}

// Click does nothing more than the focus the root model gives the pane on
// a click: the output has no cursor or rows to select, as in lazygit's main
// view (the wheel scrolls it, and the keys search and follow).
func (p Transcript) Click(int) (Transcript, tea.Cmd) { return p, nil }

func sessionGlyph(s SessionRow) string {
	switch s.State {
	case "starting", "running":
		return "●"
	case "exited":
		if s.ExitCode == 0 {
			return "✓"
		}
		return "✗"
	case "failed", "killed":
		return "✗"
	}
	return "?"
}

// View draws the header and the visible window of lines.
func (p Transcript) View(width, height int, focused bool) string {
	st := p.env.Styles
	if height <= 0 {
		return ""
	}
	var head string
	if len(p.sessions) == 0 {
		head = st.Muted.Render("no sessions")
		msg := "Nothing has run in this World yet — press " + p.env.Keys.Binding(keymap.TranscriptRun).Help().Key + " to run a command"
		if p.World == "" {
			msg = "Select a World to see its sessions"
		}
		return block([]string{head, "", msg}, width, height)
	}
	s := p.sessions[p.cur]
	state := st.Muted.Render(" · " + s.State)
	if s.State == "exited" {
		state = st.Muted.Render(fmt.Sprintf(" · exit %d", s.ExitCode))
	}
	glyph := sessionGlyph(s)
	stStyle := st.StatusStyle("running")
	switch glyph {
	case "✓":
		stStyle = st.StatusStyle("done")
	case "✗":
		stStyle = st.StatusStyle("failed")
	}
	if s.Waiting && s.State == "running" {
		stStyle, glyph = st.StatusStyle("waiting"), StatusGlyph("waiting")
		attach := p.env.Keys.Binding(keymap.TranscriptAttach).Help().Key
		state = stStyle.Render(" · waiting for input — " + attach + " to attach")
	}
	lead := stStyle.Render(glyph) + st.Muted.Render(fmt.Sprintf(" %d/%d ", p.cur+1, len(p.sessions)))
	tail := state + st.Muted.Render(" · "+shortID(s.ID))
	if p.term != nil {
		tail += st.Muted.Render(fmt.Sprintf(" · %dx%d", p.term.cols, p.term.rows))
	}
	last := p.Lines() - 1
	bottom := last
	if !p.follow {
		bottom = clamp(p.bottom, 0, last)
	}
	more := last - bottom
	if more > 0 {
		tail += st.Warning.Render(fmt.Sprintf(" · ↓%d more (%s)", more, p.env.Keys.Binding(keymap.TranscriptFollow).Help().Key))
	}
	// The command gives way to the session's state (waiting for input, its
	// exit) and to the scroll note: a long command line must not hide them.
	// A script's newlines are shown as ⏎ so the header stays one line.
	cmdText := strings.NewReplacer("\r\n", " ⏎ ", "\n", " ⏎ ", "\r", " ", "\t", " ").Replace(s.Command)
	if room := width - Width(lead) - Width(tail); Width(cmdText) > room {
		cmdText = ansi.Truncate(cmdText, max(room, 12), "…")
	}
	head = lead + st.Bold.Render(cmdText) + tail
	body := height - 1
	footer := ""
	switch {
	case p.searching:
		footer = st.Accent.Render("/") + p.search.View(st, width-1, true)
	case p.query != "" || more > 0:
		// Where the view is, and what the search found.
		var parts []string
		if p.query != "" {
			if len(p.matches) == 0 {
				parts = append(parts, st.Warning.Render("no match for "+p.query))
			} else {
				parts = append(parts, st.Accent.Render(fmt.Sprintf("match %d/%d", p.matchIdx+1, len(p.matches)))+st.Muted.Render(" /"+p.query))
			}
		}
		if more > 0 {
			parts = append(parts, st.Muted.Render(fmt.Sprintf("line %s/%s (%d%%)", Thousands(bottom+1), Thousands(last+1), (bottom+1)*100/(last+1))))
		}
		footer = strings.Join(parts, st.Muted.Render(" · "))
	}
	if footer != "" && body > 1 {
		body--
	} else {
		footer = ""
	}
	// Lay out backwards from the bottom line, wrapping only what is shown.
	rows := make([]string, 0, body)
	cur := -1
	if len(p.matches) > 0 {
		cur = p.matches[p.matchIdx]
	}
	wrap := func(i int) []string {
		line := p.Line(i)
		if p.query != "" {
			line = p.highlight(line, i == cur)
		}
		if p.term != nil {
			// A terminal's rows are laid out already: cut, never wrap.
			return []string{ansi.Truncate(line, max(width, 1), "")}
		}
		return strings.Split(ansi.Hardwrap(line, max(width, 1), true), "\n")
	}
	lines := make([]string, 0, height)
	lines = append(lines, head)
	if p.atTop && !p.follow {
		for i := 0; i <= last && len(rows) < body; i++ {
			for _, r := range wrap(i) {
				if len(rows) < body {
					rows = append(rows, r)
				}
			}
		}
		lines = append(lines, rows...)
	} else {
		for i := bottom; i >= 0 && len(rows) < body; i-- {
			wrapped := wrap(i)
			for j := len(wrapped) - 1; j >= 0 && len(rows) < body; j-- {
				rows = append(rows, wrapped[j])
			}
		}
		for i := len(rows) - 1; i >= 0; i-- {
			lines = append(lines, rows[i])
		}
	}
	for len(lines) < body+1 {
		lines = append(lines, "")
	}
	if footer != "" {
		lines = append(lines, footer)
	}
	return block(lines, width, height)
}

// highlight marks every occurrence of the query. The line keeps its own
// colours outside the matches: after each match the colours in effect
// there are set again.
func (p Transcript) highlight(line string, current bool) string {
	plain := ansi.Strip(line)
	hay := plain
	q := p.query
	if low := strings.ToLower(plain); strings.ToLower(q) == q && len(low) == len(plain) {
		hay = low
	}
	if !strings.Contains(hay, q) {
		return line
	}
	var ranges [][2]int
	for off := 0; ; {
		i := strings.Index(hay[off:], q)
		if i < 0 {
			break
		}
		ranges = append(ranges, [2]int{off + i, off + i + len(q)})
		off += i + len(q)
	}
	st := p.env.Styles
	m := st.Match
	if current {
		m = st.MatchCurrent
	}
	var b, seg strings.Builder
	active := "" // the SGR sequences in effect since the last reset
	pos, ri, in := 0, 0, false
	for i := 0; i < len(line); {
		if line[i] == 0x1b && i+1 < len(line) && line[i+1] == '[' {
			j := i + 2
			for j < len(line) && (line[j] < 0x40 || line[j] > 0x7e) {
				j++
			}
			j = min(j+1, len(line))
			sgr := line[i:j]
			if sgr == "\x1b[m" || sgr == "\x1b[0m" {
				active = ""
			} else {
				active += sgr
			}
			if !in {
				b.WriteString(sgr)
			}
			i = j
			continue
		}
		if !in && ri < len(ranges) && pos == ranges[ri][0] {
			in = true
			seg.Reset()
		}
		if in {
			seg.WriteByte(line[i])
		} else {
			b.WriteByte(line[i])
		}
		i++
		pos++
		if in && pos == ranges[ri][1] {
			b.WriteString(m.Render(seg.String()) + "\x1b[m" + active)
			in = false
			ri++
		}
	}
	if in {
		b.WriteString(m.Render(seg.String()))
	}
	return b.String()
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
