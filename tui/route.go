package tui

import (
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/panes"
)

// pane is one of the model's five panes as the routing sees it: every
// call changes the pane in place, in the model it was taken from.
type pane interface {
	update(msg tea.Msg) tea.Cmd
	do(action string) tea.Cmd
	area() keymap.Area
	view(width, height int, focused bool) string
	setSize(width, height int)
	click(y int) tea.Cmd
	scroll(delta int) tea.Cmd
	capturing() bool
}

// slot adapts a pane value held in the model to pane.
type slot[T panes.Pane[T]] struct{ p *T }

func (s slot[T]) update(msg tea.Msg) tea.Cmd {
	v, c := (*s.p).Update(msg)
	*s.p = v
	return c
}

func (s slot[T]) do(a string) tea.Cmd {
	v, c := (*s.p).Do(a)
	*s.p = v
	return c
}

func (s slot[T]) area() keymap.Area { return (*s.p).Area() }

func (s slot[T]) view(w, h int, focused bool) string { return (*s.p).View(w, h, focused) }

func (s slot[T]) setSize(w, h int) { *s.p = (*s.p).SetSize(w, h) }

func (s slot[T]) click(y int) tea.Cmd {
	v, c := (*s.p).Click(y)
	*s.p = v
	return c
}

func (s slot[T]) scroll(d int) tea.Cmd {
	v, c := (*s.p).Scroll(d)
	*s.p = v
	return c
}

func (s slot[T]) capturing() bool { return (*s.p).Capturing() }

// panes is the model's panes indexed by pane id. The panes stay values in
// the model (a copy of the model is a copy of its panes); the array points
// into m, so a change through it is a change of m.
func (m *Model) panes() [paneCount]pane {
	return [paneCount]pane{
		paneWorlds:     slot[panes.Worlds]{&m.worlds},
		paneTranscript: slot[panes.Transcript]{&m.transcript},
		paneChanges:    slot[panes.Changes]{&m.changes},
		paneDiff:       slot[panes.Diff]{&m.diff},
		paneTimeline:   slot[panes.Timeline]{&m.timeline},
	}
}

// pane is pane p of m.
func (m *Model) pane(p paneID) pane { return m.panes()[p] }
