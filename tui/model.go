package tui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/panes"
	"github.com/stratahq/strata/themes"
)

// Options start the TUI.
type Options struct {
	// AllWorlds shows every World instead of those over Source.
	AllWorlds bool
	// Source is the tree whose Worlds are shown; "" = the current directory.
	Source string
	// Exe is the strata binary used to attach, and to run $EDITOR in a
	// World; "" = this executable.
	Exe string
	// NoColor forces NO_COLOR; the environment variable is honoured anyway.
	NoColor bool
}

// paneID names the five panes, in tab order.
type paneID int

const (
	paneWorlds paneID = iota
	paneTranscript
	paneChanges
	paneDiff
	paneTimeline
	paneCount
)

var paneNames = [paneCount]string{"Worlds", "Transcript", "Changes", "Diff", "Timeline"}

// pick is what is picked of one path: all of it, or a selection of its
// diff (with the two versions it was computed from, to renumber hunks, and
// their hashes, so apply refuses the pick if either moved; "" when the path
// was picked from the list without its diff on screen).
type pick struct {
	whole               bool
	sel                 *diffview.Selection
	state               panes.PickState
	old, new            string
	fd                  *diffview.FileDiff // the engine's diff of old and new (hunk numbering)
	baseHash, worldHash string
}

// loader coalesces reloads of one kind: one in flight at a time, and at
// most one more queued however many events arrive meanwhile.
type loader struct{ inflight, dirty bool }

func (l *loader) request() bool {
	if l.inflight {
		l.dirty = true
		return false
	}
	l.inflight = true
	return true
}

func (l *loader) done() bool {
	l.inflight = false
	if l.dirty {
		l.dirty = false
		l.inflight = true
		return true
	}
	return false
}

// frameInterval spaces transcript reloads: at most ~30 redraws a second.
const frameInterval = 33 * time.Millisecond

// Model is the root model: layout, focus, routing and engine I/O.
type Model struct {
	ctx  context.Context
	eng  *engine.Engine
	opts Options
	env  *panes.Env

	themeOpts themes.Options
	source    string // "" = all Worlds

	width, height int
	focus         paneID

	worlds     panes.Worlds
	transcript panes.Transcript
	changes    panes.Changes
	diff       panes.Diff
	timeline   panes.Timeline

	// modals is the stack of views over the panes (dialogs, help,
	// palette, message log, the conflict and compare views): the top one
	// gets the keys and the mouse and is drawn last.
	modals []modal
	// conflictPicks are the picks the apply whose conflicts are shown was
	// made with (applied again with the resolutions).
	conflictPicks []applyPick

	world    string
	statuses map[string]string // last seen status per World, for notifications
	// terming are the sessions K sent TERM to: K again sends KILL.
	terming  map[string]bool
	picks    map[string]*pick
	diffPath string
	// srcWatch follows the source file of diffPath (nil: not followed).
	srcWatch *sourceWatch

	tSession string
	tOffset  int64
	jump     *transcriptJump

	lWorlds, lChanges, lSessions, lTimeline, lTranscript loader
	lCompare                                             loader // the open compare view, read again on its Worlds' events
	sampling                                             bool   // a resource sample is in flight

	info, lastErr string
	// messages is every status message and error, oldest first, for the
	// message log (the status line cuts them at its width).
	messages []panes.Message
	// infoSeq numbers info messages; infoTicked is the last one whose
	// expiry is scheduled, so each gets one tick and an old tick never
	// clears a newer message.
	infoSeq, infoTicked int
	infoTTL             time.Duration // 0: info messages never expire
	now                 func() time.Time
	history             []string
	pendingSelect       string
	quitting            bool
	// denied is the last host a World's egress proxy denied, for the
	// allow action (tui/egress.go); nil: none since the TUI opened.
	denied *deniedHost
}

// New builds the root model. Key and colour configuration errors are
// returned, so a typo in config.toml is reported before the screen opens.
func New(ctx context.Context, eng *engine.Engine, o Options) (*Model, error) {
	var keys map[string][]string
	theme := ""
	var colors map[string]string
	if eng != nil && eng.Config != nil {
		keys, theme, colors = eng.Config.KeyMap(), eng.Config.Theme, eng.Config.Colors
	}
	km, err := keymap.Load(keys)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	to := themes.Options{Theme: theme, Colors: colors, Dark: true, NoColor: o.NoColor || themes.NoColorFromEnv()}
	st, err := themes.New(to)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	src := ""
	if !o.AllWorlds {
		src = o.Source
		if src == "" {
			if src, err = os.Getwd(); err != nil {
				return nil, fmt.Errorf("current directory: %w", err)
			}
		}
		if abs, err := filepath.Abs(src); err == nil {
			src = abs
		}
	}
	if o.Exe == "" {
		if o.Exe, err = os.Executable(); err != nil {
			o.Exe = "strata"
		}
	}
	env := &panes.Env{Keys: km, Styles: st}
	m := &Model{
		ctx: ctx, eng: eng, opts: o, env: env, themeOpts: to, source: src,
		worlds: panes.NewWorlds(env), transcript: panes.NewTranscript(env), changes: panes.NewChanges(env),
		diff: panes.NewDiff(env), timeline: panes.NewTimeline(env),
		picks: map[string]*pick{}, infoTTL: infoTTL, now: time.Now,
	}
	m.worlds.Scope = src
	return m, nil
}

// Init loads the Worlds and asks the terminal for its background colour.
func (m Model) Init() tea.Cmd {
	return tea.Batch(loadWorlds(m.ctx, m.eng, m.source), tea.RequestBackgroundColor)
}

// infoTTL is how long an info message stays in the status line; errors
// stay until the next key.
const infoTTL = 5 * time.Second

// infoExpiredMsg clears info message seq, unless a newer one replaced it.
type infoExpiredMsg struct{ seq int }

// Update routes one message, and schedules the expiry of a new info message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if e, ok := msg.(infoExpiredMsg); ok {
		if e.seq == m.infoSeq {
			m.info = ""
		}
		return m, nil
	}
	if _, ok := msg.(tea.KeyPressMsg); ok && len(m.modals) == 0 {
		// An error stays until the next action; a modal view it opened
		// (conflicts) keeps it while open.
		m.lastErr = ""
	}
	nm, cmd := m.update(msg)
	mm, ok := nm.(Model)
	if !ok || mm.info == "" || mm.infoSeq == mm.infoTicked || mm.infoTTL <= 0 {
		return nm, cmd
	}
	mm.infoTicked = mm.infoSeq
	seq := mm.infoSeq
	return mm, tea.Batch(cmd, tea.Tick(mm.infoTTL, func(time.Time) tea.Msg { return infoExpiredMsg{seq: seq} }))
}

func (m Model) update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if mm, cmd, ok := m.reviewUpdate(msg); ok {
		return mm, cmd
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m = m.resize()
		return m, nil
	case tea.BackgroundColorMsg:
		if m.themeOpts.Theme == "" || m.themeOpts.Theme == "auto" {
			m.themeOpts.Dark = msg.IsDark()
			if st, err := themes.New(m.themeOpts); err == nil {
				*m.env.Styles = *st
			}
		}
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	case tea.MouseClickMsg:
		return m.click(msg)
	case tea.MouseWheelMsg:
		return m.wheel(msg)
	case eventMsg:
		return m.event(engine.Event(msg))
	case eventsMsg:
		cmds := make([]tea.Cmd, 0, len(msg))
		for _, ev := range msg {
			mm, cmd := m.event(ev)
			m = mm.(Model)
			cmds = append(cmds, cmd)
		}
		return m, tea.Batch(cmds...)
	}
	return m.result(msg)
}

// focusArea is the area whose keys the status line shows: the highest
// modal's that has keys of its own, else the focused pane's.
func (m Model) focusArea() keymap.Area {
	for i := len(m.modals) - 1; i >= 0; i-- {
		if a := m.modals[i].area(); a != "" {
			return a
		}
	}
	return m.pane(m.focus).area()
}

func (m Model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if md := m.top(); md != nil {
		if a, ok := m.env.Keys.Match(keymap.Global, k); ok && md.lets(a) {
			return m.global(a)
		}
		return m.toTop(k)
	}
	// A pane taking text (search, filter) gets every key.
	if m.pane(m.focus).capturing() {
		return m.toPane(k)
	}
	if a, ok := m.env.Keys.Match(keymap.Global, k); ok {
		return m.global(a)
	}
	return m.toPane(k)
}

func (m Model) toPane(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.pane(m.focus).update(msg)
	return m, cmd
}

// do runs any action by name: the palette's way in.
func (m Model) do(a string) (tea.Model, tea.Cmd) {
	act := m.env.Keys.Action(a)
	if act == nil {
		return m, nil
	}
	if act.Area == keymap.Global {
		return m.global(a)
	}
	for i, p := range m.panes() {
		if p.area() == act.Area {
			m.focus = paneID(i)
		}
	}
	cmd := m.pane(m.focus).do(a)
	return m, cmd
}

func (m Model) global(a string) (tea.Model, tea.Cmd) {
	switch a {
	case keymap.Quit:
		m.quitting = true
		return m, tea.Quit
	case keymap.Help:
		m.push(helpModal{panes.NewHelp(m.env, m.pane(m.focus).area())})
	case keymap.Palette:
		m.push(paletteModal{panes.NewPalette(m.env)})
	case keymap.Messages:
		m.push(msgLogModal{panes.NewMessageLog(m.env, m.messages)})
	case keymap.AllowEgress:
		return m.allowDenied()
	case keymap.FocusNext:
		m.focus = (m.focus + 1) % paneCount
	case keymap.FocusPrev:
		m.focus = (m.focus + paneCount - 1) % paneCount
	case keymap.TabWorlds, keymap.TabTranscript, keymap.TabChanges, keymap.TabDiff, keymap.TabTimeline:
		m.focus = map[string]paneID{
			keymap.TabWorlds: paneWorlds, keymap.TabTranscript: paneTranscript, keymap.TabChanges: paneChanges,
			keymap.TabDiff: paneDiff, keymap.TabTimeline: paneTimeline,
		}[a]
	case keymap.AllWorlds:
		if m.source == "" {
			m.source = m.opts.Source
			if m.source == "" {
				m.source, _ = os.Getwd()
			}
		} else {
			m.source = ""
		}
		m.worlds.Scope = m.source
		return m.reloadWorlds()
	case keymap.Refresh:
		m.setResult("reloaded", nil)
		return m.reloadAll()
	case keymap.NextNeedsYou:
		next := panes.NextNeedsYou(m.worlds.Rows(), m.worlds.Selected())
		if next == "" {
			m.setResult("no World needs you", nil)
			return m, nil
		}
		m.focus = paneWorlds
		var cmd tea.Cmd
		m.worlds, cmd = m.worlds.Select(next)
		return m, cmd
	}
	return m, nil
}

func (m Model) reloadWorlds() (tea.Model, tea.Cmd) {
	if m.lWorlds.request() {
		return m, loadWorlds(m.ctx, m.eng, m.source)
	}
	return m, nil
}

// reloadAll reloads the Worlds list and, if one is selected, that World.
func (m Model) reloadAll() (Model, tea.Cmd) {
	mm, c := m.reloadWorlds()
	m = mm.(Model)
	if m.world == "" {
		return m, c
	}
	m, cw := m.reloadWorld()
	return m, tea.Batch(c, cw)
}

// reloadWorld reloads everything shown of the selected World.
func (m Model) reloadWorld() (Model, tea.Cmd) {
	var cmds []tea.Cmd
	if m.lChanges.request() {
		cmds = append(cmds, loadChanges(m.ctx, m.eng, m.world))
	}
	if m.lSessions.request() {
		cmds = append(cmds, loadSessions(m.eng, m.world))
	}
	if m.lTimeline.request() {
		cmds = append(cmds, loadTimeline(m.eng, m.world))
	}
	return m, tea.Batch(cmds...)
}

// event turns an engine event into reloads of what it affects.
func (m Model) event(ev engine.Event) (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	add := func(mm tea.Model, c tea.Cmd) {
		m = mm.(Model)
		cmds = append(cmds, c)
	}
	mine := ev.World != "" && ev.World == m.world
	if cmp := m.compare(); cmp != nil && ev.Type != engine.EventSessionOutput && slices.Contains(cmp.Worlds, ev.World) && m.lCompare.request() {
		// The compare view shows the Worlds' versions: one of them moved.
		cmds = append(cmds, reloadCompare(m))
	}
	switch ev.Type {
	case engine.EventEgressDenied:
		m = m.egressDenied(ev)
	case engine.EventSessionOutput:
		if mine && ev.Session != "" && ev.Session == m.tSession {
			m, _ = m.requestTranscript(&cmds)
		}
		return m, tea.Batch(cmds...)
	case engine.EventPathsChanged, engine.EventApplyDone, engine.EventApplyConflict:
		add(m.reloadWorlds())
		// An apply from another World over the same source moved the
		// source under this one: its diff and changes are stale too.
		other := !mine && ev.Type != engine.EventPathsChanged && m.world != "" && m.sameSource(ev.World)
		if (mine || other) && m.lChanges.request() {
			cmds = append(cmds, loadChanges(m.ctx, m.eng, m.world))
		}
	case engine.EventSessionStarted, engine.EventSessionEnded, engine.EventAttentionChanged:
		add(m.reloadWorlds())
		if mine && m.lSessions.request() {
			cmds = append(cmds, loadSessions(m.eng, m.world))
		}
		if mine && m.tSession != "" {
			m, _ = m.requestTranscript(&cmds)
		}
	case engine.EventSnapshotTaken, engine.EventRollback, engine.EventFork:
		add(m.reloadWorlds())
		if mine {
			mm, c := m.reloadWorld()
			m = mm
			cmds = append(cmds, c)
		}
	default:
		add(m.reloadWorlds())
		if mine && ev.Type == engine.EventWorldChanged {
			mm, c := m.reloadWorld()
			m = mm
			cmds = append(cmds, c)
		}
	}
	return m, tea.Batch(cmds...)
}

func (m Model) requestTranscript(cmds *[]tea.Cmd) (Model, bool) {
	if m.tSession == "" || !m.lTranscript.request() {
		return m, false
	}
	*cmds = append(*cmds, loadTranscript(m.eng, m.world, m.tSession, m.tOffset))
	return m, true
}

// result handles the messages of panes and of finished commands.
func (m Model) result(msg tea.Msg) (tea.Model, tea.Cmd) {
	if mm, cmd, ok := m.conflictResult(msg); ok {
		return mm, cmd
	}
	if mm, cmd, ok := m.compareResult(msg); ok {
		return mm, cmd
	}
	if mm, cmd, ok := m.egressResult(msg); ok {
		return mm, cmd
	}
	switch msg := msg.(type) {
	case worldsLoadedMsg:
		return m.worldsLoaded(msg)
	case panes.WorldsSelectedMsg:
		return m.selectWorld(msg.Name)
	case changesLoadedMsg:
		var cmds []tea.Cmd
		if m.lChanges.done() {
			cmds = append(cmds, loadChanges(m.ctx, m.eng, m.world))
		}
		if msg.world != m.world {
			return m, tea.Batch(cmds...)
		}
		var cmd tea.Cmd
		m.changes, cmd = m.changes.SetTrees(msg.trees).SetChanges(msg.world, msg.changes, msg.err)
		// Picks of paths that no longer changed go away.
		live := map[string]bool{}
		for _, c := range msg.changes {
			live[c.Path] = true
		}
		for p := range m.picks {
			if !live[p] {
				delete(m.picks, p)
			}
		}
		m.changes = m.changes.SetPicks(m.pickStates())
		cmds = append(cmds, cmd)
		// The file shown may have changed on disk: read it again.
		if cmd == nil && m.diffPath != "" {
			if c, ok := m.changes.SelectedChange(); ok && c.Path == m.diffPath {
				cmds = append(cmds, loadDiff(m.ctx, m.eng, m.world, c))
			}
		}
		return m, tea.Batch(cmds...)
	case panes.ChangesSelectedMsg:
		if msg.World != m.world {
			return m, nil
		}
		c, ok := m.changes.SelectedChange()
		if !ok || c.Path != msg.Path {
			m.diff = m.diff.Clear()
			m.diffPath = ""
			return m, followSource(m.srcWatch, "")
		}
		m.diffPath = c.Path
		return m, tea.Batch(loadDiff(m.ctx, m.eng, m.world, c), followSource(m.srcWatch, m.diffSource()))
	case sourceChangedMsg:
		// The source file under review changed: its diff (drift, the
		// vs-source view) and the Changes pane are read again.
		if m.world == "" || m.diffPath == "" || msg.file != m.diffSource() || !m.lChanges.request() {
			return m, nil
		}
		return m, loadChanges(m.ctx, m.eng, m.world)
	case diffLoadedMsg:
		if msg.file.World != m.world || msg.file.Path != m.diffPath {
			return m, nil
		}
		if msg.err != nil {
			m.fail(msg.err.Error())
			msg.file.Note = msg.err.Error()
		}
		cur := m.diff.File()
		if sameDiff(cur, msg.file) && m.diff.FileDiff() != nil {
			return m, nil // unchanged: keep the cursor and picks as they are
		}
		if pk := m.picks[msg.file.Path]; pk != nil {
			if pk.sel != nil && pk.old == msg.file.Old && pk.new == msg.file.New {
				msg.file.Sel = pk.sel
			} else if pk.whole || pk.state == panes.PickAll {
				// Still picked whole: of the version now on screen.
				msg.file.PickAll = true
				pk.baseHash, pk.worldHash = msg.file.BaseHash, msg.file.WorldHash
			} else {
				// The file changed under a partial pick: its hunks mean
				// other lines now, so the pick goes, and the person is told.
				delete(m.picks, msg.file.Path)
				m.setResult(msg.file.Path+" changed since its hunks were picked: the picks were dropped; review the diff and pick again", nil)
			}
		}
		m.diff = m.diff.SetFile(msg.file)
		m.changes = m.changes.SetPicks(m.pickStates())
		return m, loadComments(m.ctx, m.eng, msg.file.World, msg.file.Path, "")
	case sessionsLoadedMsg:
		var cmds []tea.Cmd
		if m.lSessions.done() {
			cmds = append(cmds, loadSessions(m.eng, m.world))
		}
		if msg.world != m.world {
			return m, tea.Batch(cmds...)
		}
		if msg.err != nil {
			m.fail(msg.err.Error())
		}
		var cmd tea.Cmd
		m.transcript, cmd = m.transcript.SetSessions(msg.world, msg.rows)
		return m, tea.Batch(append(cmds, cmd)...)
	case panes.TranscriptSessionMsg:
		if msg.World != m.world {
			return m, nil
		}
		m.tSession, m.tOffset = msg.Session, 0
		var cmds []tea.Cmd
		if m.lTranscript.inflight {
			m.lTranscript.dirty = true // the answer in flight is for another session
		} else {
			m, _ = m.requestTranscript(&cmds)
		}
		return m, tea.Batch(cmds...)
	case transcriptLoadedMsg:
		return m.transcriptLoaded(msg)
	case transcriptTickMsg:
		if m.tSession == "" {
			m.lTranscript.inflight = false
			return m, nil
		}
		return m, loadTranscript(m.eng, m.world, m.tSession, m.tOffset)
	case timelineLoadedMsg:
		var cmds []tea.Cmd
		if m.lTimeline.done() {
			cmds = append(cmds, loadTimeline(m.eng, m.world))
		}
		if msg.world == m.world {
			m.timeline = m.timeline.SetRows(msg.world, msg.rows, msg.err)
			m.timeline.ForkedFrom = msg.forkedFrom
		}
		return m, tea.Batch(cmds...)
	case panes.PickPathsMsg:
		if msg.World != m.world {
			return m, nil
		}
		var unbound []overlay.Change // picked paths whose versions are fetched
		byPath := map[string]overlay.Change{}
		for _, c := range m.changes.All() {
			byPath[c.Path] = c
		}
		for _, p := range msg.Paths {
			if msg.Pick {
				pk := &pick{whole: true, state: panes.PickAll}
				if f := m.diff.File(); f.Path == p && f.World == m.world && f.Note == "" {
					pk.baseHash, pk.worldHash = f.BaseHash, f.WorldHash // the version on screen
				} else if c, ok := byPath[p]; ok && c.Type != overlay.TypeDir {
					unbound = append(unbound, c)
				}
				m.picks[p] = pk
			} else {
				delete(m.picks, p)
			}
			if p == m.diff.File().Path && m.diff.File().World == m.world {
				f := m.diff.File()
				f.Sel, f.PickAll = nil, msg.Pick
				m.diff = m.diff.SetFile(f)
			}
		}
		m.changes = m.changes.SetPicks(m.pickStates())
		if len(unbound) > 0 {
			return m, loadPickVersions(m.ctx, m.eng, m.world, unbound)
		}
		return m, nil
	case pickVersionsMsg:
		// Bind whole picks to the versions they were picked at, unless
		// re-picked or bound meanwhile.
		if msg.world != m.world {
			return m, nil
		}
		for path, v := range msg.versions {
			if pk := m.picks[path]; pk != nil && pk.whole && pk.sel == nil && pk.baseHash == "" && pk.worldHash == "" {
				pk.baseHash, pk.worldHash = v[0], v[1]
			}
		}
		return m, nil
	case panes.DiffPicksMsg:
		if msg.World != m.world {
			return m, nil
		}
		if msg.State == panes.PickNone {
			delete(m.picks, msg.Path)
		} else {
			f := m.diff.File()
			m.picks[msg.Path] = &pick{
				sel: msg.Sel, state: msg.State, whole: msg.Sel == nil, old: f.Old, new: f.New, fd: f.Diff,
				baseHash: f.BaseHash, worldHash: f.WorldHash,
			}
		}
		m.changes = m.changes.SetPicks(m.pickStates())
		return m, nil
	case panes.ActionMsg:
		return m.paneAction(msg)
	case panes.PaletteChosenMsg:
		return m.do(msg.Action)
	case doneMsg:
		m.setResult(msg.info, msg.err)
		if msg.snap != "" {
			m.timeline = m.timeline.Want(msg.snap)
		}
		var cmds []tea.Cmd
		if msg.world != "" {
			m.pendingSelect = msg.world
		}
		mm, c := m.reloadWorlds()
		m = mm.(Model)
		cmds = append(cmds, c)
		if msg.reload && m.world != "" {
			m, c = m.reloadWorld()
			cmds = append(cmds, c)
		}
		return m, tea.Batch(cmds...)
	case removeDoneMsg:
		if errors.Is(msg.err, engine.ErrUnsavedWork) && !msg.force {
			d := panes.NewTypedConfirm(m.env, "Remove "+msg.name+" with its unapplied work?",
				[]string{msg.name + " holds changes that were never applied or snapshotted. Removing it moves it to the trash (restorable for 7 days with `strata restore-world`) and stops its sessions."},
				msg.name, removeWorldReq{name: msg.name, force: true})
			m.push(dialogModal{d})
			return m, nil
		}
		if msg.err != nil {
			m.setResult("", fmt.Errorf("remove %s: %w", msg.name, msg.err))
		} else {
			m.setResult("removed World "+msg.name, nil)
		}
		return m.reloadWorlds()
	case applyDoneMsg:
		return m.applyDone(msg)
	case applyPreviewMsg:
		return m.applyPreviewed(msg)
	case writersLoadedMsg:
		return m.writersLoaded(msg)
	case resourcesMsg:
		return m.resourcesSampled(msg)
	case infoMsg:
		if msg.err != nil {
			m.setResult("", msg.err)
			return m, nil
		}
		d := panes.NewInfo(m.env, msg.title, capLines(msg.lines, 20))
		m.push(dialogModal{d})
		return m, nil
	case createWorldReq:
		return m, createWorld(m.ctx, m.eng, msg)
	case createDoneMsg:
		x, i := topmost[dialogModal](m)
		form := i >= 0 && x.d.Hold
		if msg.err != nil {
			m.setResult("", msg.err)
			if form {
				x.d.Busy, x.d.Err = false, msg.err.Error()
				m.setModal(i, x)
			}
			return m, nil
		}
		if form {
			m.removeAt(i)
		}
		info := "created World " + msg.name
		if msg.started != "" {
			info += ", started " + msg.started
		}
		return m.update(doneMsg{info: info, world: msg.name})
	case removeWorldReq:
		return m, removeWorld(m.ctx, m.eng, msg)
	case runReq:
		if strings.TrimSpace(msg.command) == "" {
			return m, nil
		}
		m.history = appendHistory(m.history, msg.command)
		return m, runCommand(m.ctx, m.eng, msg)
	case killReq:
		if m.terming == nil {
			m.terming = map[string]bool{}
		}
		m.terming[msg.session] = true
		return m, killSession(m.ctx, m.eng, msg)
	case snapshotReq:
		return m, takeSnapshot(m.ctx, m.eng, msg)
	case rollbackReq:
		m.picks = map[string]*pick{}
		return m, rollback(m.ctx, m.eng, msg)
	case forkReq:
		return m, fork(m.ctx, m.eng, msg)
	case applyReq:
		// Exactly the picks the dialog described.
		return m, m.applyPicksCmd(msg.world, msg.picks)
	case execDoneMsg:
		if msg.err != nil {
			m.setResult("", msg.err)
		}
		mm, c := m.reloadWorlds()
		m = mm.(Model)
		if m.world != "" {
			var c2 tea.Cmd
			m, c2 = m.reloadWorld()
			return m, tea.Batch(c, c2)
		}
		return m, c
	}
	return m, nil
}

type execDoneMsg struct{ err error }

// sameDiff reports whether a reloaded diff shows what is on screen.
func sameDiff(a, b panes.DiffFile) bool {
	return a.World == b.World && a.Path == b.Path && a.Old == b.Old && a.New == b.New && a.Note == b.Note &&
		a.Drift == b.Drift && a.Source == b.Source && a.LateBase == b.LateBase &&
		a.BaseHash == b.BaseHash && a.WorldHash == b.WorldHash
}

func capLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	out := append([]string(nil), lines[:n]...)
	return append(out, fmt.Sprintf("… and %d more", len(lines)-n))
}

func appendHistory(h []string, s string) []string {
	if len(h) > 0 && h[len(h)-1] == s {
		return h
	}
	h = append(h, s)
	if len(h) > 100 {
		h = h[len(h)-100:]
	}
	return h
}

// setResult shows what an action did: its error, or else info.
func (m *Model) setResult(info string, err error) {
	if err != nil {
		m.fail(err.Error())
		return
	}
	m.note(info)
}

// note shows an info message for infoTTL and keeps it in the message log.
func (m *Model) note(info string) {
	m.info, m.lastErr = info, ""
	if info == "" {
		return
	}
	m.infoSeq++
	m.messages = appendMessage(m.messages, panes.Message{Time: m.clock(), Text: info})
	m.refreshLogs()
}

// refreshLogs shows the messages in an open message log, which would
// otherwise miss what happened while it was open.
func (m *Model) refreshLogs() {
	for i, md := range m.modals {
		if x, ok := md.(msgLogModal); ok {
			x.l.Messages = append([]panes.Message(nil), m.messages...)
			m.setModal(i, x)
		}
	}
}

// fail shows an error until the next key, keeps it in the message log
// and logs it to strata.log.
func (m *Model) fail(text string) {
	if n := len(m.messages); n == 0 || m.messages[n-1].Text != text || !m.messages[n-1].Err {
		m.log().Error("tui", "world", m.world, "error", text)
	}
	m.lastErr, m.info = text, ""
	m.messages = appendMessage(m.messages, panes.Message{Time: m.clock(), Text: text, Err: true})
	m.refreshLogs()
}

// log is strata.log: the engine's logger (the default one writes to the
// terminal, which a TUI never does).
func (m *Model) log() *slog.Logger {
	if m.eng != nil && m.eng.Log != nil {
		return m.eng.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (m *Model) clock() time.Time {
	if m.now == nil {
		return time.Now()
	}
	return m.now()
}

// maxMessages bounds the message log.
const maxMessages = 500

func appendMessage(ms []panes.Message, msg panes.Message) []panes.Message {
	if n := len(ms); n > 0 && ms[n-1].Text == msg.Text && ms[n-1].Err == msg.Err {
		// A reload failing again and again is one entry, at its last time.
		ms[n-1].Time = msg.Time
		return ms
	}
	ms = append(ms, msg)
	if len(ms) > maxMessages {
		ms = append([]panes.Message(nil), ms[len(ms)-maxMessages:]...)
	}
	return ms
}

func (m Model) worldsLoaded(msg worldsLoadedMsg) (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	if m.lWorlds.done() {
		cmds = append(cmds, loadWorlds(m.ctx, m.eng, m.source))
	}
	if msg.err != nil {
		m.fail(msg.err.Error())
		return m, tea.Batch(cmds...)
	}
	// Ring and notify when a World starts waiting or fails.
	if m.statuses != nil {
		var alerts []string
		for _, r := range msg.rows {
			prev, seen := m.statuses[r.Name]
			if (r.Status == "waiting" || r.Status == "failed" || r.NeedsYou) && seen && prev != statusKey(r) {
				alerts = append(alerts, alertText(r))
			}
		}
		if len(alerts) > 0 {
			cmds = append(cmds, tea.Raw(notification(strings.Join(alerts, ", "))))
		}
	}
	m.statuses = map[string]string{}
	for _, r := range msg.rows {
		m.statuses[r.Name] = statusKey(r)
	}
	var cmd tea.Cmd
	m.worlds.Elsewhere = msg.elsewhere
	m.worlds, cmd = m.worlds.SetRows(msg.rows)
	cmds = append(cmds, cmd)
	if m.pendingSelect != "" {
		m.worlds, cmd = m.worlds.Select(m.pendingSelect)
		m.pendingSelect = ""
		cmds = append(cmds, cmd)
	}
	if m.world == "" && m.worlds.Selected() != "" && cmd == nil {
		name := m.worlds.Selected()
		cmds = append(cmds, func() tea.Msg { return panes.WorldsSelectedMsg{Name: name} })
	}
	m, cmd = m.maybeSample()
	cmds = append(cmds, cmd)
	return m, tea.Batch(cmds...)
}

// statusKey is what a change of must ring for: the World's status and its
// agent's state and reason.
func statusKey(r panes.WorldRow) string { return r.Status + "\x00" + r.Agent + "\x00" + r.AgentReason }

// alertText says who needs the person and why.
func alertText(r panes.WorldRow) string {
	switch {
	case r.Agent != "" && r.AgentReason != "":
		return r.Name + " " + strings.ReplaceAll(r.Agent, "-", " ") + ": " + r.AgentReason
	case r.Agent != "":
		return r.Name + " is " + r.Agent
	}
	return r.Name + " is " + r.Status
}

// notification rings the bell and raises a desktop notification through
// the terminal (OSC 9 for iTerm2/Windows Terminal/kitty, OSC 777 for
// urxvt/foot/VTE); terminals ignore the ones they do not know.
func notification(text string) string {
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, text)
	return "\a\x1b]9;strata: " + text + "\x07\x1b]777;notify;strata;" + text + "\x07"
}

func (m Model) selectWorld(name string) (tea.Model, tea.Cmd) {
	if name == m.world {
		return m, nil
	}
	m.world = name
	m.picks = map[string]*pick{}
	m.diff = m.diff.Clear()
	m.diffPath = ""
	unfollow := followSource(m.srcWatch, "")
	m.tSession, m.tOffset = "", 0
	if name == "" {
		m.changes, _ = m.changes.SetChanges("", nil, nil)
		m.transcript, _ = m.transcript.SetSessions("", nil)
		m.timeline = m.timeline.SetRows("", nil, nil)
		return m, unfollow
	}
	m.transcript, _ = m.transcript.SetSessions(name, nil)
	for _, r := range m.worlds.Rows() {
		if r.Name == name && r.Status == "broken" {
			m.fail(fmt.Sprintf("world %s is broken: %s; strata rm --purge %s removes it", name, r.Error, name))
		}
	}
	m, cmd := m.reloadWorld()
	return m, tea.Batch(unfollow, cmd)
}

func (m Model) transcriptLoaded(msg transcriptLoadedMsg) (tea.Model, tea.Cmd) {
	stale := msg.world != m.world || msg.session != m.tSession || msg.from != m.tOffset
	if !stale {
		if msg.err != nil {
			m.fail(msg.err.Error())
		}
		if len(msg.chunks) > 0 {
			m.transcript = m.transcript.AppendChunks(msg.chunks)
		}
		m.tOffset = msg.next
		m = m.doJump()
	}
	m.lTranscript.inflight = false
	if m.lTranscript.dirty {
		m.lTranscript.dirty = false
		m.lTranscript.inflight = true
		if stale {
			return m, loadTranscript(m.eng, m.world, m.tSession, m.tOffset)
		}
		// More output arrived meanwhile: read it one frame later, so a
		// chatty session redraws at most ~30 times a second.
		return m, tea.Tick(frameInterval, func(time.Time) tea.Msg { return transcriptTickMsg{} })
	}
	return m, nil
}

func (m Model) pickStates() map[string]panes.PickState {
	out := make(map[string]panes.PickState, len(m.picks))
	for p, pk := range m.picks {
		out[p] = pk.state
	}
	return out
}

// paneAction does what a pane asked for.
func (m Model) paneAction(a panes.ActionMsg) (tea.Model, tea.Cmd) {
	switch a.Action {
	case keymap.WorldsNew:
		src := m.source
		if src == "" {
			src, _ = os.Getwd()
		}
		backend := "local"
		if m.eng != nil && m.eng.Config != nil && m.eng.Config.Backend != "" {
			backend = string(m.eng.Config.Backend)
		}
		d := m.newWorldForm(src, backend)
		// The form stays open until the World exists, showing why not
		// with everything typed kept.
		d.Hold = true
		m.push(dialogModal{d})
	case keymap.WorldsRemove:
		body := []string{"Its overlay layer, sessions and timeline go to the trash."}
		for _, r := range m.worlds.Rows() {
			if r.Name == a.World {
				body = append([]string{fmt.Sprintf("%s, %d of %s running.", panes.Count(r.Changes, "changed path", "changed paths"), r.Running, panes.Count(r.Sessions, "session", "sessions"))}, body...)
			}
		}
		d := panes.NewConfirm(m.env, "Remove World "+a.World+"?", body, true, removeWorldReq{name: a.World})
		m.push(dialogModal{d})
	case keymap.WorldsRun, keymap.TranscriptRun:
		w := a.World
		d := panes.NewPrompt(m.env, "Run in "+w, "command (runs on a terminal; attach with enter)", "", m.history,
			func(s string) tea.Msg { return runReq{world: w, command: s} })
		m.push(dialogModal{d})
	case keymap.WorldsOpen:
		m.focus = paneChanges
	case keymap.WorldsCompare:
		return m, loadCompare(m.ctx, m.eng, a.World, nil)
	case keymap.TranscriptAttach:
		c := exec.Command(m.opts.Exe, "attach", a.World, a.Session)
		return m, tea.ExecProcess(c, func(err error) tea.Msg {
			if err != nil {
				err = fmt.Errorf("attach %s: %w", shortRef(a.Session), err)
			}
			return execDoneMsg{err: err}
		})
	case keymap.TranscriptKill:
		if m.terming[a.Session] {
			d := panes.NewConfirm(m.env, "Force-kill session "+shortRef(a.Session)+"?", []string{"It was sent SIGTERM already: this sends SIGKILL now."}, true,
				killReq{world: a.World, session: a.Session, force: true})
			m.push(dialogModal{d})
			break
		}
		d := panes.NewConfirm(m.env, "Kill session "+shortRef(a.Session)+"?", []string{"Sends SIGTERM, then SIGKILL after the grace period (kill_grace, 5s); K again sends SIGKILL at once."}, true,
			killReq{world: a.World, session: a.Session})
		m.push(dialogModal{d})
	case keymap.ChangesOpen:
		m.focus = paneDiff
	case keymap.ChangesApply, keymap.DiffApply:
		return m.confirmApply(a.World)
	case keymap.DiffEdit:
		return m.edit(a.World, a.Path)
	case keymap.ChangesWriter:
		return m, loadWriters(m.eng, a.World, a.Path)
	case keymap.DiffNextFile, keymap.DiffPrevFile:
		act := keymap.ChangesDown
		if a.Action == keymap.DiffPrevFile {
			act = keymap.ChangesUp
		}
		var cmd tea.Cmd
		m.changes, cmd = m.changes.Do(act)
		return m, cmd
	case keymap.DiffBack:
		m.focus = paneChanges
	case keymap.TimelineSnapshot:
		w := a.World
		d := panes.NewPrompt(m.env, "Snapshot "+w, "message", "", nil, func(s string) tea.Msg { return snapshotReq{world: w, message: s} })
		m.push(dialogModal{d})
	case keymap.TimelineRollback:
		d := panes.NewConfirm(m.env, "Roll "+a.World+" back to "+shortRef(a.Snapshot)+"?",
			[]string{"Its running sessions are stopped. The current state is snapshotted first, so the rollback can be undone."}, true,
			rollbackReq{world: a.World, snap: a.Snapshot})
		m.push(dialogModal{d})
	case keymap.TimelineFork:
		w, s := a.World, a.Snapshot
		from := "the live state"
		if s != "" {
			from = "snapshot " + shortRef(s)
		}
		d := panes.NewPrompt(m.env, "Fork "+w+" from "+from, "how many Worlds", "2", nil,
			func(n string) tea.Msg { return forkReq{world: w, snap: s, n: n} })
		m.push(dialogModal{d})
	case keymap.TimelineShow:
		return m, snapshotChanges(m.ctx, m.eng, a.World, a.Parent, a.Snapshot)
	}
	return m, nil
}

// edit opens the World's version of path in $EDITOR, inside the World.
func (m Model) edit(world, path string) (tea.Model, tea.Cmd) {
	if world == "" || path == "" {
		return m, nil
	}
	src := ""
	for _, r := range m.worlds.Rows() {
		if r.Name == world {
			src = r.Source
		}
	}
	abs := filepath.Join(src, filepath.FromSlash(path))
	args := append([]string{"exec", world, "--tty", "--"}, editorArgv()...)
	c := exec.Command(m.opts.Exe, append(args, abs)...)
	return m, tea.ExecProcess(c, func(err error) tea.Msg {
		if err != nil {
			err = fmt.Errorf("edit %s: %w", path, err)
		}
		return execDoneMsg{err: err}
	})
}

// applyPicks turns the picks into what the engine publishes: hunks are
// renumbered in the diff with the default context, as the engine computes it.
func (m Model) applyPicks() []applyPick {
	paths := make([]string, 0, len(m.picks))
	for p := range m.picks {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	changed := make([]string, 0, len(m.changes.All()))
	for _, c := range m.changes.All() {
		changed = append(changed, c.Path)
	}
	sort.Strings(changed)
	var out []applyPick
	for _, p := range paths {
		pk := m.picks[p]
		if partlyPicked(p, changed, func(c string) bool { return m.picks[c] != nil }) {
			continue // the picked paths below it go on their own
		}
		if pk.whole || pk.sel == nil || pk.state == panes.PickAll {
			out = append(out, applyPick{Path: p, BaseHash: pk.baseHash, WorldHash: pk.worldHash})
			continue
		}
		fd := pk.fd // hunks are numbered in the engine's diff, as apply counts them
		if fd == nil {
			fd = diffview.Diff(pk.old, pk.new, diffview.Options{})
		}
		sel, err := pk.sel.Retarget(fd)
		if err != nil {
			continue
		}
		ap := applyPick{Path: p, Sel: sel, BaseHash: pk.baseHash, WorldHash: pk.worldHash, HunkCount: len(fd.Hunks)}
		for _, h := range sel.PickedHunks() {
			ap.Hunks = append(ap.Hunks, h+1)
		}
		if len(ap.Hunks) > 0 {
			out = append(out, ap)
		}
	}
	return out
}

// partlyPicked reports whether a change below dir (sorted lists the
// World's changed paths) is not picked. To the engine a directory's pick
// means everything below it, so the TUI sends a directory's own pick only
// when that is what the person picked, lest an unpicked file land.
func partlyPicked(dir string, sorted []string, picked func(string) bool) bool {
	for i := sort.SearchStrings(sorted, dir+"/"); i < len(sorted) && strings.HasPrefix(sorted[i], dir+"/"); i++ {
		if !picked(sorted[i]) {
			return true
		}
	}
	return false
}

func (m Model) confirmApply(world string) (tea.Model, tea.Cmd) {
	if world == "" {
		return m, nil
	}
	picks := m.applyPicks()
	if len(picks) == 0 {
		m.setResult("", errors.New("nothing picked: space picks a path or a hunk"))
		return m, nil
	}
	// The dialog says what apply will do: decided by the engine, written nowhere.
	ctx, eng := m.ctx, m.eng
	return m, func() tea.Msg {
		res, paths, err := enginePreview(ctx, eng, world, picks)
		return applyPreviewMsg{world: world, picks: picks, res: res, paths: paths, err: err}
	}
}

// applyPreviewMsg is a dry run of the picks, for the confirm dialog.
type applyPreviewMsg struct {
	world string
	picks []applyPick
	res   applyOutcome
	paths []engine.AppliedPath
	err   error
}

func (m Model) applyPreviewed(msg applyPreviewMsg) (tea.Model, tea.Cmd) {
	if len(msg.res.Conflicts) > 0 || msg.err != nil {
		// Nothing was written either way: conflicts open the conflict view,
		// a pick on versions that moved says so.
		return m.applyDone(applyDoneMsg{world: msg.world, picks: msg.picks, res: msg.res, err: msg.err})
	}
	var changed []string // to name a directory whose every change is picked
	if m.changes.World == msg.world {
		for _, c := range m.changes.All() {
			changed = append(changed, c.Path)
		}
	}
	title, lines, notes := applySummary(msg.world, msg.picks, msg.paths, changed)
	body := append([]string{title}, capLines(lines, 12)...)
	if len(notes) > 0 {
		body = append(append(body, ""), notes...)
	}
	d := panes.NewConfirm(m.env, "Apply to the source?", body, false, applyReq{world: msg.world, picks: msg.picks})
	m.push(dialogModal{d})
	return m, nil
}

// applyPicksCmd publishes picks from world in a Cmd.
func (m Model) applyPicksCmd(world string, picks []applyPick) tea.Cmd {
	ctx, eng := m.ctx, m.eng
	return func() tea.Msg {
		res, err := engineApply(ctx, eng, world, picks)
		return applyDoneMsg{world: world, picks: picks, res: res, err: err}
	}
}

func (m Model) applyDone(msg applyDoneMsg) (tea.Model, tea.Cmd) {
	if len(msg.res.Conflicts) > 0 {
		// The conflict view replaces any earlier one: a second apply that
		// conflicts again (the source moved on) starts over.
		m = m.openConflicts(msg.world, msg.picks, msg.res.Conflicts)
		m.setResult("", fmt.Errorf("apply: %s, nothing written: resolve %s and apply again", panes.Count(len(msg.res.Conflicts), "conflict", "conflicts"), map[bool]string{true: "it", false: "them"}[len(msg.res.Conflicts) == 1]))
		return m, nil
	}
	closeAll[conflictsModal](&m)
	m.conflictPicks = nil
	if msg.err != nil {
		m.setResult("", fmt.Errorf("apply %s: %w", msg.world, msg.err))
		return m, nil
	}
	info := "nothing applied from " + msg.world + ": the source already holds every picked version"
	if len(msg.res.Applied) > 0 {
		info = fmt.Sprintf("applied %s from %s", panes.Count(len(msg.res.Applied), "path", "paths"), msg.world)
	}
	if n := len(msg.res.Warnings); n > 0 {
		// What the publication changed from the picks (a stripped setuid
		// bit) must not pass unseen: the first warning stays in the status
		// line, every one goes to the log.
		info += " · warning: " + msg.res.Warnings[0]
		if n > 1 {
			info += fmt.Sprintf(" (+%d more in strata.log)", n-1)
		}
		for _, w := range msg.res.Warnings {
			m.log().Warn("apply", "world", msg.world, "warning", w)
		}
	}
	m.setResult(info, nil)
	if msg.world == m.world {
		m.picks = map[string]*pick{}
		m.changes = m.changes.SetPicks(nil)
		f := m.diff.File()
		f.Sel, f.PickAll = nil, false
		if f.Path != "" {
			m.diff = m.diff.SetFile(f)
		}
	}
	mm, c := m.reloadWorlds()
	m = mm.(Model)
	m2, c2 := m.reloadWorld()
	var c3 tea.Cmd
	if cmp := m2.compare(); cmp != nil {
		// An adoption resolved through the conflict view: compare anew.
		c3 = loadCompare(m2.ctx, m2.eng, cmp.Worlds[0], cmp.Worlds)
	}
	return m2, tea.Batch(c, c2, c3)
}

// sourceOf is the source of World name as listed ("" when unknown).
func (m Model) sourceOf(name string) string {
	for _, r := range m.worlds.Rows() {
		if r.Name == name {
			return r.Source
		}
	}
	return ""
}

// sameSource reports whether World name is over the selected World's
// source (or either is unknown: reading again is cheap, stale is not).
func (m Model) sameSource(name string) bool {
	a, b := m.sourceOf(name), m.sourceOf(m.world)
	return a == "" || b == "" || filepath.Clean(a) == filepath.Clean(b)
}

// diffSource is the source file of the path in the Diff pane ("" none).
func (m Model) diffSource() string {
	src := m.sourceOf(m.world)
	if src == "" || m.diffPath == "" {
		return ""
	}
	return filepath.Join(src, filepath.FromSlash(m.diffPath))
}

// Quitting reports whether the person asked to quit.
func (m Model) Quitting() bool { return m.quitting }

// World is the selected World.
func (m Model) World() string { return m.world }
