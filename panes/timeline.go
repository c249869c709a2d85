package panes

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
)

// SnapshotRow is one line of the timeline tree.
type SnapshotRow struct {
	Prefix   string // tree branches drawn before the node
	ID       string
	Parent   string
	Time     time.Time
	Message  string
	Auto     bool
	Files    int
	NewBytes int64
	Head     bool // the World's current state descends from it
}

// Timeline shows a World's snapshots as a tree, oldest first (as
// engine.TimelineTree orders it): up is older, down is newer.
type Timeline struct {
	env    *Env
	World  string
	rows   []SnapshotRow
	list   cursorList
	height int
	err    string
	// ForkedFrom names the World and snapshot this World was forked from.
	ForkedFrom string
	// Now is the clock ages are computed from; zero = time.Now (tests fix it).
	Now time.Time
	// want is a snapshot the cursor goes to once it is listed (one just taken).
	want string
}

// Want puts the cursor on snapshot id, now if it is listed, else when a
// reload lists it.
func (p Timeline) Want(id string) Timeline {
	p.want = id
	return p.SetRows(p.World, p.rows, p.errValue())
}

func (p Timeline) errValue() error {
	if p.err == "" {
		return nil
	}
	return errors.New(p.err)
}

// NewTimeline makes an empty Timeline pane.
func NewTimeline(env *Env) Timeline { return Timeline{env: env} }

// SetRows replaces the tree (rows in display order).
func (p Timeline) SetRows(world string, rows []SnapshotRow, err error) Timeline {
	prev := p.Selected()
	if world != p.World {
		prev = ""
		p.list = cursorList{}
	}
	p.World = world
	p.rows = rows
	p.err = ""
	if err != nil {
		p.err = err.Error()
	}
	p.list.to(p.list.Cursor, len(rows))
	for i, r := range rows {
		if r.ID == prev {
			p.list.Cursor = i
		}
	}
	for i, r := range rows {
		if p.want != "" && r.ID == p.want {
			p.list.Cursor, p.want = i, ""
		}
	}
	p.list.window(p.height-1, len(rows))
	return p
}

// SetSize tells the pane how tall it is drawn (rows are as wide as the view).
func (p Timeline) SetSize(_, h int) Timeline {
	p.height = h
	p.list.window(h-1, len(p.rows))
	return p
}

// Selected is the id of the snapshot under the cursor.
func (p Timeline) Selected() string {
	if p.list.Cursor < 0 || p.list.Cursor >= len(p.rows) {
		return ""
	}
	return p.rows[p.list.Cursor].ID
}

// Update handles keys while focused.
func (p Timeline) Update(msg tea.Msg) (Timeline, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		if a, ok := p.env.Keys.Match(keymap.Timeline, k); ok {
			return p.Do(a)
		}
	}
	return p, nil
}

// Do performs one action of the timeline area.
func (p Timeline) Do(a string) (Timeline, tea.Cmd) {
	n := len(p.rows)
	switch a {
	case keymap.TimelineUp:
		p.list.move(-1, n)
	case keymap.TimelineDown:
		p.list.move(1, n)
	case keymap.TimelineSnapshot:
		if p.World == "" {
			return p, nil
		}
		return p, action(ActionMsg{Action: a, World: p.World})
	case keymap.TimelineRollback, keymap.TimelineFork, keymap.TimelineShow:
		if p.World == "" {
			return p, nil
		}
		m := ActionMsg{Action: a, World: p.World, Snapshot: p.Selected()}
		if p.list.Cursor < len(p.rows) && p.list.Cursor >= 0 {
			m.Parent = p.rows[p.list.Cursor].Parent
		}
		if m.Snapshot == "" && a != keymap.TimelineFork {
			return p, nil
		}
		return p, action(m)
	}
	p.list.window(p.height-1, n)
	return p, nil
}

// Click puts the cursor on the row at y.
func (p Timeline) Click(y int) (Timeline, tea.Cmd) {
	i := p.list.Offset + y - 1
	if i >= 0 && i < len(p.rows) {
		p.list.Cursor = i
	}
	return p, nil
}

// Scroll moves the cursor by delta rows.
func (p Timeline) Scroll(delta int) (Timeline, tea.Cmd) {
	p.list.move(delta, len(p.rows))
	p.list.window(p.height-1, len(p.rows))
	return p, nil
}

// View draws the pane.
func (p Timeline) View(width, height int, focused bool) string {
	st := p.env.Styles
	if height <= 0 {
		return ""
	}
	head := st.Muted.Render(Count(len(p.rows), "snapshot", "snapshots"))
	if p.ForkedFrom != "" {
		head += st.Muted.Render(" · forked from " + p.ForkedFrom)
	}
	lines := []string{head}
	switch {
	case p.World == "":
		lines = append(lines, st.Muted.Render("select a World"))
	case p.err != "":
		lines = append(lines, st.Error.Render(p.err))
	case len(p.rows) == 0:
		lines = append(lines, "No snapshots yet — press "+p.env.Keys.Binding(keymap.TimelineSnapshot).Help().Key+" to take one")
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	body := height - 1
	list := p.list
	off := list.window(body, len(p.rows))
	for i := off; i < min(off+body, len(p.rows)); i++ {
		r := p.rows[i]
		node := "○"
		if r.Head {
			node = "◉"
		}
		msg := r.Message
		if msg == "" && r.Auto {
			msg = "(auto)"
		}
		if r.Auto {
			// strata's own messages name snapshots by their full id
			// ("before rollback to s-fc4df66e7c12"): shown as short as the
			// id column, they fit the 46-column pane of a 120x40 screen.
			msg = fullSnapID.ReplaceAllStringFunc(msg, shortID)
		}
		var b strings.Builder
		b.WriteString(st.Muted.Render(r.Prefix))
		if r.Auto {
			// strata took it (a fork, a rollback): it reads quieter than
			// the person's own snapshots.
			b.WriteString(st.Muted.Render(node + " " + shortID(r.ID) + " " + age(now.Sub(r.Time)) + " " + msg + " · " + Count(r.Files, "file", "files")))
		} else {
			b.WriteString(st.Accent.Render(node))
			b.WriteString(" " + st.Bold.Render(shortID(r.ID)))
			b.WriteString(st.Muted.Render(" " + age(now.Sub(r.Time))))
			b.WriteString(" " + msg)
			b.WriteString(st.Muted.Render(" · " + Count(r.Files, "file", "files")))
		}
		line := b.String()
		if i == p.list.Cursor {
			line = selectRow(st, line, width, focused)
		}
		lines = append(lines, line)
	}
	return block(lines, width, height)
}

// fullSnapID is a snapshot id as the engine makes it (world.NewID("s-")).
var fullSnapID = regexp.MustCompile(`\bs-[0-9a-f]{12}\b`)

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
