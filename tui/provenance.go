package tui

import (
	"fmt"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
)

// Provenance: from a changed path to the transcript of the session that
// wrote it, scrolled to the moment of the write.

type (
	writersLoadedMsg struct {
		world, path string
		writes      []engine.PathWrite
		err         error
	}
	// transcriptJump is a pending scroll of the transcript to the output
	// of session at the moment at, done once its output is loaded.
	transcriptJump struct {
		world, session string
		at             time.Time
	}
)

func loadWriters(eng *engine.Engine, world, path string) tea.Cmd {
	return func() tea.Msg {
		_, ws, err := eng.Blame(world, path)
		if err != nil {
			err = fmt.Errorf("who wrote %s: %w", path, err)
		}
		return writersLoadedMsg{world: world, path: path, writes: ws, err: err}
	}
}

// writersLoaded opens the transcript of the last session that wrote the
// path (its version is the one in the World) at its last write.
func (m Model) writersLoaded(msg writersLoadedMsg) (tea.Model, tea.Cmd) {
	if msg.err != nil {
		m.setResult("", msg.err)
		return m, nil
	}
	if msg.world != m.world {
		return m, nil
	}
	if len(msg.writes) == 0 {
		m.setResult("", fmt.Errorf("no session is recorded writing %s (changed outside strata's sessions?)", msg.path))
		return m, nil
	}
	w := msg.writes[len(msg.writes)-1]
	info := fmt.Sprintf("%s: %s by %s (%s) at %s", msg.path, w.Op, engine.ShellQuote(w.Command), shortRef(w.Session), w.Last.Local().Format("15:04:05"))
	if n := len(msg.writes); n > 1 {
		info += fmt.Sprintf("; %d sessions wrote it", n)
	}
	if w.World != "" && w.World != msg.world {
		// Inherited through a fork: the transcript is the other World's.
		m.setResult(info+fmt.Sprintf(" in world %s, before this World was forked from it", w.World), nil)
		return m, nil
	}
	var cmd tea.Cmd
	var ok bool
	m.transcript, cmd, ok = m.transcript.SelectSession(w.Session)
	if !ok {
		m.setResult("", fmt.Errorf("%s was written by session %s, which is gone", msg.path, shortRef(w.Session)))
		return m, nil
	}
	m.setResult(info, nil)
	m.focus = paneTranscript
	m.jump = &transcriptJump{world: msg.world, session: w.Session, at: w.Last}
	if cmd == nil {
		// The session is shown and loaded already: scroll now.
		m = m.doJump()
	}
	return m, cmd
}

// doJump scrolls the transcript to the pending moment.
func (m Model) doJump() Model {
	j := m.jump
	if j == nil || j.world != m.world || j.session != m.tSession {
		return m
	}
	m.jump = nil
	line := m.transcript.LineAt(j.at)
	if line < 0 {
		line = m.transcript.Lines() - 1 // written after the last output
	}
	m.transcript = m.transcript.ShowLine(line)
	return m
}
