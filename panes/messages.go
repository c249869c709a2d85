package panes

import (
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
)

// Message is one status-line message, kept whole for the message log: the
// status line cuts it at its width.
type Message struct {
	Time time.Time
	Text string
	Err  bool
}

// MessageLog is the modal listing every status message and error of the
// session, newest first, wrapped to the box so nothing is cut.
type MessageLog struct {
	env      *Env
	Messages []Message // oldest first, as the root keeps them
	offset   int
}

// NewMessageLog opens the log over msgs (oldest first).
func NewMessageLog(env *Env, msgs []Message) MessageLog {
	return MessageLog{env: env, Messages: append([]Message(nil), msgs...)}
}

// Update scrolls; done reports that the log closed.
func (l MessageLog) Update(msg tea.Msg) (MessageLog, bool) {
	switch m := msg.(type) {
	case tea.KeyPressMsg:
		if a, ok := l.env.Keys.Match(keymap.Global, m); ok && a == keymap.Messages {
			return l, true
		}
		switch m.String() {
		case "esc", "q", "enter":
			return l, true
		case "g", "home":
			l.offset = 0
			return l, false
		}
	}
	l.offset = scrollBy(msg, l.offset)
	return l, false
}

// Lines are the log's lines at width inner: each message wrapped under
// its time, newest first.
func (l MessageLog) Lines(inner int) []string {
	st := l.env.Styles
	var lines []string
	for i := len(l.Messages) - 1; i >= 0; i-- {
		m := l.Messages[i]
		stamp := st.Muted.Render(m.Time.Format("15:04:05") + " ")
		body := wrapText(m.Text, max(inner-9, 10))
		for j, b := range body {
			if m.Err {
				b = st.Error.Render(b)
			}
			if j == 0 {
				lines = append(lines, stamp+b)
			} else {
				lines = append(lines, "         "+b)
			}
		}
	}
	if len(lines) == 0 {
		lines = append(lines, st.Muted.Render("no messages yet"))
	}
	return lines
}

// View draws the log box within width x height.
func (l MessageLog) View(width, height int) string {
	inner := min(max(width-4, 20), 100)
	return l.env.scrollBox("Messages", "  (newest first; errors also go to strata.log)", l.Lines(inner), l.offset, inner, height)
}
