package tui

import (
	"slices"
	"strings"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/panes"
)

// modal is a view over the panes: a dialog, the help, the palette, the
// message log, or one of the full-screen views (conflicts, compare). The
// model holds them in a stack; one rule decides everything: the top one
// gets the keys and the mouse and is drawn last, opening one pushes it,
// closing it pops it (and shows the one under it again).
type modal interface {
	// update handles a key or mouse message; closed pops the modal.
	update(msg tea.Msg) (next modal, cmd tea.Cmd, closed bool)
	// area is the keymap area of its keys, for the status line; "" keeps
	// the hints of what is under it.
	area() keymap.Area
	// lets reports a global action that still works over the modal (the
	// palette over the help): it opens a modal on top.
	lets(action string) bool
	// draw puts the modal on top of screen (the whole screen, drawn so far).
	draw(m Model, screen string) string
}

type dialogModal struct{ d panes.Dialog }

func (x dialogModal) update(msg tea.Msg) (modal, tea.Cmd, bool) {
	d, cmd, done := x.d.Update(msg)
	return dialogModal{d}, cmd, done
}
func (dialogModal) area() keymap.Area { return keymap.Dialog }
func (dialogModal) lets(string) bool  { return false }
func (x dialogModal) draw(m Model, screen string) string {
	return placeOverlay(screen, x.d.View(m.width), m.width, m.height)
}

type helpModal struct{ h panes.Help }

func (x helpModal) update(msg tea.Msg) (modal, tea.Cmd, bool) {
	h, done := x.h.Update(msg)
	return helpModal{h}, nil, done
}
func (helpModal) area() keymap.Area { return "" }

// lets opens the palette or the message log over the help: what the help
// lists can be run from there, and esc comes back to the help.
func (helpModal) lets(a string) bool { return a == keymap.Palette || a == keymap.Messages }

func (x helpModal) draw(m Model, screen string) string {
	return placeOverlay(screen, x.h.View(m.width, m.height), m.width, m.height)
}

type paletteModal struct{ p panes.Palette }

func (x paletteModal) update(msg tea.Msg) (modal, tea.Cmd, bool) {
	p, cmd, done := x.p.Update(msg)
	return paletteModal{p}, cmd, done
}
func (paletteModal) area() keymap.Area { return "" }
func (paletteModal) lets(string) bool  { return false }
func (x paletteModal) draw(m Model, screen string) string {
	return placeOverlay(screen, x.p.View(m.width, m.height), m.width, m.height)
}

type msgLogModal struct{ l panes.MessageLog }

func (x msgLogModal) update(msg tea.Msg) (modal, tea.Cmd, bool) {
	l, done := x.l.Update(msg)
	return msgLogModal{l}, nil, done
}
func (msgLogModal) area() keymap.Area { return "" }
func (msgLogModal) lets(string) bool  { return false }
func (x msgLogModal) draw(m Model, screen string) string {
	return placeOverlay(screen, x.l.View(m.width, m.height), m.width, m.height)
}

// conflictsModal and compareModal take the whole screen but the status
// line; they close through their own messages (ConflictsClosedMsg,
// CompareClosedMsg).
type conflictsModal struct{ c panes.Conflicts }

func (x conflictsModal) update(msg tea.Msg) (modal, tea.Cmd, bool) {
	c, cmd := x.c.Update(msg)
	return conflictsModal{c}, cmd, false
}
func (conflictsModal) area() keymap.Area { return keymap.Conflicts }
func (conflictsModal) lets(string) bool  { return false }
func (x conflictsModal) draw(m Model, screen string) string {
	rc := fullScreen(m)
	title := " Conflicts · apply from " + x.c.World + " "
	return putFull(m, screen, m.frame(title, true, rc, x.c.View(max(rc.w-2, 1), max(rc.h-2, 1))))
}

type compareModal struct{ c panes.Compare }

func (x compareModal) update(msg tea.Msg) (modal, tea.Cmd, bool) {
	c, cmd := x.c.Update(msg)
	return compareModal{c}, cmd, false
}
func (compareModal) area() keymap.Area { return keymap.Compare }
func (compareModal) lets(string) bool  { return false }
func (x compareModal) draw(m Model, screen string) string {
	rc := fullScreen(m)
	return putFull(m, screen, m.frame(" Compare Worlds ", true, rc, x.c.View(max(rc.w-2, 1), max(rc.h-2, 1))))
}

// fullScreen is the frame of a full-screen view: all but the status line.
func fullScreen(m Model) rect { return rect{0, 0, m.width, max(m.height-1, 3)} }

// putFull replaces the screen's rows above the status line with lines.
func putFull(m Model, screen string, lines []string) string {
	rows := strings.Split(screen, "\n")
	for i := range rows {
		if i >= m.height-1 {
			break
		}
		l := ""
		if i < len(lines) {
			l = lines[i]
		}
		rows[i] = fitLine(l, m.width)
	}
	return strings.Join(rows, "\n")
}

// push opens md on top of the stack. The stack is copied, never shared
// with an earlier copy of the model.
func (m *Model) push(md modal) {
	m.modals = append(slices.Clip(m.modals), md)
}

// top is the modal on top, nil when none is open.
func (m Model) top() modal {
	if len(m.modals) == 0 {
		return nil
	}
	return m.modals[len(m.modals)-1]
}

// replaceTop puts md in the top's place (nil pops it).
func (m *Model) replaceTop(md modal) {
	s := slices.Clone(m.modals[:len(m.modals)-1])
	if md != nil {
		s = append(s, md)
	}
	m.modals = s
}

// topmost is the highest modal of type T in the stack, and its index (-1: none).
func topmost[T modal](m Model) (T, int) {
	for i := len(m.modals) - 1; i >= 0; i-- {
		if x, ok := m.modals[i].(T); ok {
			return x, i
		}
	}
	var zero T
	return zero, -1
}

// removeAt pops the modal at i, wherever it is in the stack.
func (m *Model) removeAt(i int) {
	m.modals = slices.Delete(slices.Clone(m.modals), i, i+1)
}

// toTop gives msg (a key or the mouse) to the top modal, and pops it
// when it closes.
func (m Model) toTop(msg tea.Msg) (Model, tea.Cmd) {
	next, cmd, closed := m.top().update(msg)
	if closed {
		next = nil
	}
	m.replaceTop(next)
	return m, cmd
}

// setModal replaces the modal at i.
func (m *Model) setModal(i int, md modal) {
	s := slices.Clone(m.modals)
	s[i] = md
	m.modals = s
}

// closeAll pops every modal of type T, wherever it is in the stack.
func closeAll[T modal](m *Model) {
	m.modals = slices.DeleteFunc(slices.Clone(m.modals), func(md modal) bool {
		_, ok := md.(T)
		return ok
	})
}

// The open modals of each kind, for the code that reads them (nil when
// none is open): the topmost of its kind.

func (m Model) dialog() *panes.Dialog {
	if x, i := topmost[dialogModal](m); i >= 0 {
		return &x.d
	}
	return nil
}

func (m Model) help() *panes.Help {
	if x, i := topmost[helpModal](m); i >= 0 {
		return &x.h
	}
	return nil
}

func (m Model) palette() *panes.Palette {
	if x, i := topmost[paletteModal](m); i >= 0 {
		return &x.p
	}
	return nil
}

func (m Model) msgLog() *panes.MessageLog {
	if x, i := topmost[msgLogModal](m); i >= 0 {
		return &x.l
	}
	return nil
}

func (m Model) conflicts() *panes.Conflicts {
	if x, i := topmost[conflictsModal](m); i >= 0 {
		return &x.c
	}
	return nil
}

func (m Model) compare() *panes.Compare {
	if x, i := topmost[compareModal](m); i >= 0 {
		return &x.c
	}
	return nil
}
