package tui

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/panes"
)

// The conflict flow: an apply that conflicts opens the conflict view with
// the picks it was made with; the person resolves each path (per region,
// or in $EDITOR) and applies again with the resolutions in place of those
// paths' picks.

type (
	// conflictEditReadyMsg: the text to edit is in a temporary file.
	conflictEditReadyMsg struct {
		world, path, file string
		err               error
	}
	// conflictEditorDoneMsg: $EDITOR exited.
	conflictEditorDoneMsg struct {
		world, path, file string
		err               error
	}
	// conflictEditReadMsg: the edited text, read back.
	conflictEditReadMsg struct {
		world, path, text string
		err               error
	}
)

// openConflicts shows the conflicts of an apply of picks from world.
func (m Model) openConflicts(world string, picks []applyPick, files []panes.ConflictFile) Model {
	// The new view replaces any earlier one, on top of the stack.
	closeAll[conflictsModal](&m)
	m.push(conflictsModal{panes.NewConflicts(m.env, world, files)})
	m.conflictPicks = picks
	return m
}

// conflictResult handles the conflict view's messages; ok is false for
// any other message.
func (m Model) conflictResult(msg tea.Msg) (Model, tea.Cmd, bool) {
	switch msg := msg.(type) {
	case panes.ConflictsClosedMsg:
		closeAll[conflictsModal](&m)
		m.conflictPicks = nil
		m.setResult("conflicts left unresolved: nothing was written", nil)
		return m, nil, true
	case panes.ConflictsApplyMsg:
		if c := m.conflicts(); c == nil || msg.World != c.World {
			return m, nil, true
		}
		picks := resolvedPicks(m.conflictPicks, msg.Resolutions)
		if len(picks) == 0 {
			closeAll[conflictsModal](&m)
			m.conflictPicks = nil
			m.setResult("nothing left to apply: every conflicting path keeps the source's version", nil)
			return m, nil, true
		}
		m.setResult("applying again…", nil)
		return m, m.applyPicksCmd(msg.World, picks), true
	case panes.ConflictsEditMsg:
		return m, writeConflictFile(msg.World, msg.Path, msg.Text), true
	case conflictEditReadyMsg:
		if msg.err != nil {
			m.setResult("", msg.err)
			return m, nil, true
		}
		argv := append(editorArgv(), msg.file)
		c := exec.Command(argv[0], argv[1:]...)
		return m, tea.ExecProcess(c, func(err error) tea.Msg {
			return conflictEditorDoneMsg{world: msg.world, path: msg.path, file: msg.file, err: err}
		}), true
	case conflictEditorDoneMsg:
		return m, readConflictFile(msg), true
	case conflictEditReadMsg:
		if msg.err != nil {
			m.setResult("", msg.err)
			return m, nil, true
		}
		if x, i := topmost[conflictsModal](m); i >= 0 && x.c.World == msg.world {
			c := x.c.SetEdited(msg.path, msg.text)
			m.setModal(i, conflictsModal{c})
			if c.Err != "" {
				m.setResult("", errors.New(c.Err))
			} else {
				m.setResult("edited "+msg.path+": resolved", nil)
			}
		}
		return m, nil, true
	}
	return m, nil, false
}

// resolvedPicks replaces the picks of resolved paths with their
// resolutions; a path that keeps the source's version leaves the apply.
func resolvedPicks(picks []applyPick, res []panes.Resolution) []applyPick {
	byPath := map[string]panes.Resolution{}
	for _, r := range res {
		byPath[r.Path] = r
	}
	var out []applyPick
	seen := map[string]bool{}
	for _, p := range picks {
		r, ok := byPath[p.Path]
		if !ok {
			out = append(out, p)
			continue
		}
		seen[p.Path] = true
		if !r.Keep {
			out = append(out, applyPick{Path: p.Path, Resolved: r.Content, TheirsHash: r.TheirsHash})
		}
	}
	// A conflict below a picked directory has no pick of its own.
	for _, r := range res {
		if !seen[r.Path] && !r.Keep {
			out = append(out, applyPick{Path: r.Path, Resolved: r.Content, TheirsHash: r.TheirsHash})
		}
	}
	return out
}

// editorArgv is the person's editor command ($VISUAL, $EDITOR, vi).
func editorArgv() []string {
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if strings.TrimSpace(editor) == "" {
		editor = "vi"
	}
	return strings.Fields(editor)
}

func writeConflictFile(world, path, text string) tea.Cmd {
	return func() tea.Msg {
		// Keep the file's extension so the editor highlights it.
		f, err := os.CreateTemp("", "strata-conflict-*-"+filepath.Base(path))
		if err != nil {
			return conflictEditReadyMsg{err: fmt.Errorf("resolve %s in an editor: %w", path, err)}
		}
		_, werr := f.WriteString(text)
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			_ = os.Remove(f.Name())
			return conflictEditReadyMsg{err: fmt.Errorf("write %s for the editor: %w", f.Name(), err)}
		}
		return conflictEditReadyMsg{world: world, path: path, file: f.Name()}
	}
}

func readConflictFile(d conflictEditorDoneMsg) tea.Cmd {
	return func() tea.Msg {
		defer func() { _ = os.Remove(d.file) }() // a scratch copy: nothing else refers to it
		if d.err != nil {
			return conflictEditReadMsg{err: fmt.Errorf("editor on %s: %w", d.path, d.err)}
		}
		b, err := os.ReadFile(d.file)
		if err != nil {
			return conflictEditReadMsg{err: fmt.Errorf("read back the edit of %s: %w", d.path, err)}
		}
		return conflictEditReadMsg{world: d.world, path: d.path, text: string(b)}
	}
}
