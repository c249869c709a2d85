package tui

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/panes"
)

// Results of engine work, each carried back to Update as a message.
type (
	worldsLoadedMsg struct {
		rows []panes.WorldRow
		// elsewhere counts the Worlds over other sources (0 when all are listed).
		elsewhere int
		err       error
	}
	changesLoadedMsg struct {
		world   string
		changes []overlay.Change
		err     error
		// trees are the World's extra trees (their paths read NAME:path).
		trees []string
	}
	sessionsLoadedMsg struct {
		world string
		rows  []panes.SessionRow
		err   error
	}
	transcriptLoadedMsg struct {
		world, session string
		from, next     int64
		chunks         []panes.TranscriptChunk
		err            error
	}
	transcriptTickMsg struct{}
	diffLoadedMsg     struct {
		file panes.DiffFile
		err  error
	}
	timelineLoadedMsg struct {
		world      string
		rows       []panes.SnapshotRow
		forkedFrom string
		err        error
	}
	// doneMsg reports an action's end: info for the status bar, or err.
	doneMsg struct {
		info   string
		err    error
		world  string // a World to select afterwards
		reload bool   // reload the selected World's changes and timeline
		snap   string // a snapshot just taken: the timeline's cursor goes to it
	}
	removeDoneMsg struct {
		name  string
		force bool
		err   error
	}
	applyDoneMsg struct {
		world string
		picks []applyPick // what was applied, to apply again after conflicts
		res   applyOutcome
		err   error
	}
	infoMsg struct {
		title string
		lines []string
		err   error
	}
	eventMsg      engine.Event
	eventsMsg     []engine.Event // session output gathered over a frame (forward)
	createDoneMsg struct {
		name    string
		err     error
		started string // what was started in it, if anything
	}
)

// Requests made by dialogs once the person confirms.
type (
	createWorldReq struct {
		name, source, backend string
		// agent (a preset), prompt and command: what to start in it.
		agent, prompt, command string
	}
	removeWorldReq struct {
		name  string
		force bool
	}
	runReq  struct{ world, command string }
	killReq struct {
		world, session string
		force          bool // SIGKILL at once
	}
	snapshotReq struct{ world, message string }
	rollbackReq struct{ world, snap string }
	forkReq     struct {
		world, snap string
		n           string
	}
	applyReq struct {
		world string
		picks []applyPick
	}
)

func loadWorlds(ctx context.Context, eng *engine.Engine, source string) tea.Cmd {
	return func() tea.Msg {
		all, err := eng.Worlds()
		ws := all
		if err == nil && source != "" {
			ws, err = eng.WorldsOfSource(source)
		}
		if err != nil {
			return worldsLoadedMsg{err: fmt.Errorf("list worlds: %w", err)}
		}
		// Broken Worlds show under every source: theirs is unknown.
		broken, err := eng.BrokenWorlds()
		if err != nil {
			return worldsLoadedMsg{err: fmt.Errorf("list worlds: %w", err)}
		}
		infos := eng.Infos(ctx, ws, broken)
		rows := make([]panes.WorldRow, 0, len(ws))
		for i, w := range ws {
			info := infos[i]
			row := panes.WorldRow{
				Name: w.Name, Source: w.Source, Status: info.Status, Backend: string(w.Backend),
				Changes: info.Changes, Sessions: info.Sessions, Running: info.Running, Error: info.Error,
				Boundary: boundaryGlance(eng, w.Name),
			}
			if a := info.Agent; a != nil {
				row.Agent, row.AgentReason, row.AgentSince, row.NeedsYou = string(a.Status.State), a.Status.Reason, a.Status.Since, a.NeedsYou()
			}
			rows = append(rows, row)
		}
		for i, b := range broken {
			info := infos[len(ws)+i]
			rows = append(rows, panes.WorldRow{
				Name: b.Name, Status: info.Status, Sessions: info.Sessions, Running: info.Running, Error: info.Error,
			})
		}
		return worldsLoadedMsg{rows: rows, elsewhere: len(all) - len(ws)}
	}
}

func loadChanges(ctx context.Context, eng *engine.Engine, world string) tea.Cmd {
	return func() tea.Msg {
		w, err := eng.World(world)
		if err != nil {
			return changesLoadedMsg{world: world, err: err}
		}
		// Every tree's changes; another tree's paths read NAME:path.
		cs, err := eng.FlatChanges(ctx, w, false)
		if err != nil {
			return changesLoadedMsg{world: world, err: fmt.Errorf("changes of %s: %w", world, err)}
		}
		var trees []string
		for _, t := range w.Trees {
			trees = append(trees, t.Name)
		}
		return changesLoadedMsg{world: world, changes: noteRenames(ctx, eng, world, cs), trees: trees}
	}
}

// noteRenames marks both sides of each rename in the Changes pane, as
// strata status shows it (R old -> new): picking only the deleted side
// deletes the file from the source without publishing where it went. The
// paths stay two rows, picked one by one as apply takes them. Rename
// detection failing leaves the rows as they are (the changes still load).
func noteRenames(ctx context.Context, eng *engine.Engine, world string, changes []overlay.Change) []overlay.Change {
	// The pane reloads on every write in the World: past renameLimit
	// candidate pairs (git stops detecting renames too, past its
	// diff.renameLimit) the rows stay plain instead of reading every
	// deleted and added file on each reload.
	const renameLimit = 100 * 100
	dels, adds := 0, 0
	for _, c := range changes {
		if c.Type == overlay.TypeFile && c.Kind == overlay.Deleted {
			dels++
		} else if c.Type == overlay.TypeFile && c.Kind == overlay.Added {
			adds++
		}
	}
	if dels == 0 || adds == 0 || dels*adds > renameLimit {
		return changes
	}
	rs, err := eng.Renames(ctx, world, changes)
	if err != nil || len(rs) == 0 {
		return changes
	}
	out := make([]overlay.Change, len(changes))
	copy(out, changes)
	for i, c := range out {
		r, ok := rs[c.Path]
		if !ok {
			continue
		}
		note := "renamed to " + overlay.QuotePath(r.To)
		if r.To == c.Path {
			note = "renamed from " + overlay.QuotePath(r.From)
		}
		if r.Similarity < 100 {
			note += fmt.Sprintf(" (%d%%)", r.Similarity)
		}
		if c.Note != "" {
			note = c.Note + " · " + note
		}
		out[i].Note = note
	}
	return out
}

func loadSessions(eng *engine.Engine, world string) tea.Cmd {
	return func() tea.Msg {
		ss, err := eng.Sessions(world)
		if err != nil {
			return sessionsLoadedMsg{world: world, err: fmt.Errorf("sessions of %s: %w", world, err)}
		}
		rows := make([]panes.SessionRow, 0, len(ss))
		const typed = "\x00typed" // no command holds a NUL byte
		shell, _ := eng.ShellArgv(world, typed)
		for _, s := range ss {
			cmd := sessionCommand(s.Argv, shell, typed)
			if s.State == engine.SessionBroken {
				cmd = "(meta.json unreadable; transcript below)"
			}
			rows = append(rows, panes.SessionRow{
				ID: s.ID, Command: cmd, State: string(s.State),
				ExitCode: s.ExitCode, TTY: s.TTY, Started: s.StartedAt,
				Waiting: s.Attention == engine.AttentionWaiting,
			})
		}
		return sessionsLoadedMsg{world: world, rows: rows}
	}
}

func loadTranscript(eng *engine.Engine, world, session string, from int64) tea.Cmd {
	return func() tea.Msg {
		path := filepath.Join(eng.SessionDir(world, session), engine.TranscriptFile)
		recs, next, err := engine.ReadTranscript(path, from)
		m := transcriptLoadedMsg{world: world, session: session, from: from, next: next, err: err}
		for _, r := range recs {
			c := panes.TranscriptChunk{Time: r.Time}
			if ws, ok := r.WinSize(); ok {
				c.Cols, c.Rows = int(ws.Cols), int(ws.Rows)
			} else if r.Stream == engine.StreamResize {
				continue // malformed: no size to apply
			} else {
				c.Data = r.Data
			}
			m.chunks = append(m.chunks, c)
		}
		return m
	}
}

func loadTimeline(eng *engine.Engine, world string) tea.Cmd {
	return func() tea.Msg {
		tl, err := eng.Timeline(world)
		if err != nil {
			return timelineLoadedMsg{world: world, err: fmt.Errorf("timeline of %s: %w", world, err)}
		}
		m := timelineLoadedMsg{world: world}
		if tl.ForkedFrom != nil {
			m.forkedFrom = tl.ForkedFrom.World + "@" + shortRef(tl.ForkedFrom.Snapshot)
		}
		for _, l := range engine.TimelineTree(tl) {
			s := l.Snapshot
			m.rows = append(m.rows, panes.SnapshotRow{
				Prefix: l.Prefix, ID: s.ID, Parent: s.Parent, Time: s.Time, Message: s.Message,
				Auto: s.Auto, Files: s.Files, NewBytes: s.NewBytes, Head: s.ID == tl.Head,
			})
		}
		return m
	}
}

func shortRef(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// loadDiff asks the engine for one path's diff: base vs World, as
// `strata diff` prints it and apply counts its hunks, with the drift of the
// source and, when it drifted, the World against the source now.
func loadDiff(ctx context.Context, eng *engine.Engine, world string, c overlay.Change) tea.Cmd {
	return func() tea.Msg {
		f := panes.DiffFile{World: world, Path: c.Path}
		switch {
		case c.Type == overlay.TypeDir || (c.Kind == overlay.Deleted && c.LowerType == overlay.TypeDir):
			f.Note = fmt.Sprintf("directory %s (%s)", c.Kind, describeMarks(c))
			return diffLoadedMsg{file: f}
		case c.Type == overlay.TypeOther:
			f.Note = "special file: nothing to diff"
			return diffLoadedMsg{file: f}
		}
		fcs, err := eng.Diff(ctx, world, engine.DiffOptions{Changes: []overlay.Change{c}})
		if err != nil {
			return diffLoadedMsg{file: f, err: fmt.Errorf("diff %s in world %s: %w", c.Path, world, err)}
		}
		fc, ok := diffOf(fcs, c.Path)
		if !ok {
			f.Note = "the World's version is the same as its base: nothing to apply"
			// The source may have moved off that base (a teammate reverted
			// an applied change): say so, or the path looks in sync.
			if sfcs, err := eng.Diff(ctx, world, engine.DiffOptions{Changes: []overlay.Change{c}, Against: "source"}); err == nil {
				if sfc, ok := diffOf(sfcs, c.Path); ok && sfc.Drift {
					f.Note += "; the source changed since (strata diff " + world + " --against source shows how)"
				}
			}
			return diffLoadedMsg{file: f}
		}
		f.Old, f.New, f.Diff = fc.OldText(), fc.NewText(), fc.Diff
		f.BaseHash, f.WorldHash, f.Drift, f.LateBase = fc.BaseHash, fc.WorldHash, fc.Drift, fc.LateBase
		if fc.Drift {
			sfcs, err := eng.Diff(ctx, world, engine.DiffOptions{Changes: []overlay.Change{c}, Against: "source"})
			if err != nil {
				return diffLoadedMsg{file: f, err: fmt.Errorf("diff %s in world %s against the source: %w", c.Path, world, err)}
			}
			f.Source = f.New // no entry: the source holds the World's version
			if sfc, ok := diffOf(sfcs, c.Path); ok {
				f.Source, f.SourceDiff = sfc.OldText(), sfc.Diff
			}
		}
		return diffLoadedMsg{file: f}
	}
}

// pickVersionsMsg carries the base and World hashes of paths picked whole
// from the list, so apply refuses them if the World writes them after.
type pickVersionsMsg struct {
	world    string
	versions map[string][2]string
}

func loadPickVersions(ctx context.Context, eng *engine.Engine, world string, cs []overlay.Change) tea.Cmd {
	return func() tea.Msg {
		fcs, err := eng.Diff(ctx, world, engine.DiffOptions{Changes: cs})
		if err != nil {
			// Unbound picks are still applied, just not checked.
			if eng.Log != nil {
				eng.Log.Warn("versions of picked paths", "world", world, "err", err)
			}
			return nil
		}
		m := pickVersionsMsg{world: world, versions: map[string][2]string{}}
		for _, fc := range fcs {
			m.versions[fc.Path] = [2]string{fc.BaseHash, fc.WorldHash}
		}
		return m
	}
}

func diffOf(fcs []engine.FileChange, path string) (engine.FileChange, bool) {
	for _, fc := range fcs {
		if fc.Path == path {
			return fc, true
		}
	}
	return engine.FileChange{}, false
}

func describeMarks(c overlay.Change) string {
	switch {
	case c.Whiteout:
		return "whiteout"
	case c.Opaque:
		return "opaque: replaced"
	}
	return c.Kind.String()
}

func createWorld(ctx context.Context, eng *engine.Engine, r createWorldReq) tea.Cmd {
	return func() tea.Msg {
		if err := checkAgentReq(eng, r); err != nil {
			return createDoneMsg{name: r.name, err: fmt.Errorf("new world %q: %w", r.name, err)}
		}
		w, err := eng.Create(ctx, engine.CreateOptions{Name: r.name, Source: r.source, Backend: engine.Runtime(r.backend)})
		if err != nil {
			return createDoneMsg{name: r.name, err: fmt.Errorf("new world %q: %w", r.name, err)}
		}
		return startAgentIn(ctx, eng, w.Name, r)
	}
}

func removeWorld(ctx context.Context, eng *engine.Engine, r removeWorldReq) tea.Cmd {
	return func() tea.Msg {
		_, err := eng.Remove(ctx, r.name, engine.RemoveOptions{Force: r.force, Kill: r.force})
		return removeDoneMsg{name: r.name, force: r.force, err: err}
	}
}

// sessionCommand is a session's command as the person typed it: the x key
// runs what was typed under the World's shell (shell is the World's
// ShellArgv of a command, with typed standing for the text), and showing
// that wrapper, quoted twice, hides the command behind it. Any other argv
// is shown quoted, as strata sessions prints it.
func sessionCommand(argv, shell []string, typed string) string {
	at := slices.Index(shell, typed)
	if at >= 0 && len(argv) == len(shell) && slices.Equal(argv[:at], shell[:at]) && slices.Equal(argv[at+1:], shell[at+1:]) {
		return argv[at]
	}
	return engine.ShellQuote(argv)
}

func runCommand(ctx context.Context, eng *engine.Engine, r runReq) tea.Cmd {
	return func() tea.Msg {
		argv, err := eng.ShellArgv(r.world, r.command)
		if err != nil {
			return doneMsg{err: fmt.Errorf("run in %s: %w", r.world, err)}
		}
		// A terminal lets strata tell a session waiting for input, and lets
		// the person attach to it.
		meta, err := eng.Exec(ctx, r.world, engine.ExecOptions{Argv: argv, TTY: true})
		if err != nil {
			return doneMsg{err: fmt.Errorf("run in %s: %w", r.world, err)}
		}
		return doneMsg{info: "started " + shortRef(meta.ID) + ": " + r.command}
	}
}

func killSession(ctx context.Context, eng *engine.Engine, r killReq) tea.Cmd {
	return func() tea.Msg {
		// TERM, then KILL after the grace period; force: KILL now.
		if _, err := eng.KillAgent(ctx, r.world, r.session, r.force, 0); err != nil {
			return doneMsg{err: fmt.Errorf("kill %s: %w", shortRef(r.session), err)}
		}
		return doneMsg{info: "stopped " + shortRef(r.session) + " (killed by strata)", reload: true}
	}
}

func takeSnapshot(ctx context.Context, eng *engine.Engine, r snapshotReq) tea.Cmd {
	return func() tea.Msg {
		s, err := eng.Snapshot(ctx, r.world, engine.SnapshotOptions{Message: r.message})
		if err != nil {
			return doneMsg{err: fmt.Errorf("snapshot %s: %w", r.world, err)}
		}
		return doneMsg{info: fmt.Sprintf("snapshot %s of %s (%s)", shortRef(s.ID), r.world, panes.Count(s.Files, "file", "files")), reload: true, snap: s.ID}
	}
}

func rollback(ctx context.Context, eng *engine.Engine, r rollbackReq) tea.Cmd {
	return func() tea.Msg {
		res, err := eng.Rollback(ctx, r.world, r.snap, engine.RollbackOptions{Kill: true})
		if err != nil {
			return doneMsg{err: fmt.Errorf("roll back %s: %w", r.world, err)}
		}
		info := "rolled " + r.world + " back to " + shortRef(r.snap)
		if res.Saved != nil {
			info += " (the state before is snapshot " + shortRef(res.Saved.ID) + ")"
		}
		return doneMsg{info: info, reload: true}
	}
}

func fork(ctx context.Context, eng *engine.Engine, r forkReq) tea.Cmd {
	return func() tea.Msg {
		var n int
		if _, err := fmt.Sscan(r.n, &n); err != nil || n < 1 || n > 64 {
			return doneMsg{err: fmt.Errorf("fork %s: %q is not a count from 1 to 64", r.world, r.n)}
		}
		ws, err := eng.Fork(ctx, r.world, engine.ForkOptions{Snap: r.snap, N: n})
		if err != nil {
			return doneMsg{err: fmt.Errorf("fork %s: %w", r.world, err)}
		}
		names := make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.Name
		}
		return doneMsg{info: fmt.Sprintf("forked %s into %v", r.world, names)}
	}
}

// snapshotChanges lists what changed in a snapshot relative to its parent
// (or to the World now when it has none).
func snapshotChanges(ctx context.Context, eng *engine.Engine, world, parent, snap string) tea.Cmd {
	return func() tea.Msg {
		a, b := parent, snap
		title := "Changes in snapshot " + shortRef(snap)
		if parent == "" {
			a, b = snap, ""
			title = "Changes since snapshot " + shortRef(snap)
		}
		ds, err := eng.SnapDiff(ctx, world, a, b)
		if err != nil {
			return infoMsg{err: fmt.Errorf("snapshot %s: %w", shortRef(snap), err)}
		}
		lines := make([]string, 0, len(ds))
		for _, d := range ds {
			lines = append(lines, fmt.Sprintf("%v %s", d.Change, d.Path))
		}
		sort.Strings(lines)
		if len(lines) == 0 {
			lines = append(lines, "no changes")
		}
		return infoMsg{title: title, lines: lines}
	}
}

// boundaryGlance is a World's level and network mode, "sandbox/proxy".
func boundaryGlance(eng *engine.Engine, name string) string {
	b, err := eng.Boundary(name, engine.ExecOptions{})
	if err != nil || b == nil {
		return ""
	}
	return string(b.Level) + "/" + string(b.Network)
}
