package panes

import (
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
)

// Pane is the one method set the root model routes through, for each of
// the five panes. T is the pane's own type: panes are values, and every
// change returns the new value (with the Cmd it asks for).
type Pane[T any] interface {
	// Update handles a key or a message sent to the focused pane.
	Update(msg tea.Msg) (T, tea.Cmd)
	// Do runs one of the pane's actions by name (the palette's way in).
	Do(action string) (T, tea.Cmd)
	// Area is the keymap area whose actions the pane has: help and the
	// palette list them, and Do takes them.
	Area() keymap.Area
	// View draws the pane's content at width x height.
	View(width, height int, focused bool) string
	// SetSize tells the pane the size it is drawn at, for paging and scrolling.
	SetSize(width, height int) T
	// Click handles a left click on content row y (0 is the header line).
	Click(y int) (T, tea.Cmd)
	// Scroll moves the view (the wheel) by delta rows.
	Scroll(delta int) (T, tea.Cmd)
	// Capturing reports whether the pane takes text (a search, a filter)
	// and so gets every key, global ones included.
	Capturing() bool
}

var (
	_ Pane[Worlds]     = Worlds{}
	_ Pane[Transcript] = Transcript{}
	_ Pane[Changes]    = Changes{}
	_ Pane[Diff]       = Diff{}
	_ Pane[Timeline]   = Timeline{}
)

// Area is the Worlds area.
func (p Worlds) Area() keymap.Area { return keymap.Worlds }

// Area is the Transcript area.
func (p Transcript) Area() keymap.Area { return keymap.Transcript }

// Area is the Changes area.
func (p Changes) Area() keymap.Area { return keymap.Changes }

// Area is the Diff area.
func (p Diff) Area() keymap.Area { return keymap.Diff }

// Area is the Timeline area.
func (p Timeline) Area() keymap.Area { return keymap.Timeline }

// Capturing is false: the Worlds pane takes no text.
func (p Worlds) Capturing() bool { return false }

// Capturing is true while a search is typed.
func (p Transcript) Capturing() bool { return p.Searching() }

// Capturing is true while a filter is typed.
func (p Changes) Capturing() bool { return p.Editing() }

// Capturing is false: the Diff pane takes no text.
func (p Diff) Capturing() bool { return false }

// Capturing is false: the Timeline pane takes no text.
func (p Timeline) Capturing() bool { return false }
