package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/panes"
)

// The compare view: the Worlds of the last fan-out (or the selected
// World's siblings over its source) side by side; per path, the World
// whose version to adopt, published through the normal apply; then the
// Worlds not chosen can be removed together.

type (
	compareLoadedMsg struct {
		worlds []string
		source string
		paths  []panes.ComparePath
		fanout *panes.FanOut
		err    error
		// refresh: read again on an event, not opened by the person.
		refresh bool
	}
	compareAppliedMsg struct {
		applied []string // Worlds whose adopted paths were published
		paths   int
		world   string // the World whose apply failed
		picks   []applyPick
		res     applyOutcome
		err     error
	}
	removeWorldsReq struct {
		names []string
		force bool
	}
	removeWorldsDoneMsg struct {
		removed, unsaved []string
		force            bool
		err              error
	}
)

// fanoutEvent is the activity log's record of a fan-out.
const fanoutEvent = engine.EventFanOut

// loadCompare compares the Worlds of the last fan-out that include world,
// else every World over world's source.
func loadCompare(ctx context.Context, eng *engine.Engine, world string, names []string) tea.Cmd {
	return func() tea.Msg {
		w, err := eng.World(world)
		if err != nil {
			return compareLoadedMsg{err: fmt.Errorf("compare: %w", err)}
		}
		fo, foWorlds := lastFanOut(eng, w.Source)
		if names == nil {
			names = foWorlds
			if !slices.Contains(names, world) {
				names, fo = nil, nil
			}
		}
		if len(names) < 2 {
			ws, err := eng.WorldsOfSource(w.Source)
			if err != nil {
				return compareLoadedMsg{err: fmt.Errorf("compare: list worlds: %w", err)}
			}
			names = nil
			for _, x := range ws {
				names = append(names, x.Name)
			}
		}
		if len(names) < 2 {
			return compareLoadedMsg{err: fmt.Errorf("compare: %s is the only World over %s; fork it (timeline f) or fan out first", world, w.Source)}
		}
		cmp, err := eng.Compare(ctx, names)
		if err != nil {
			return compareLoadedMsg{err: fmt.Errorf("compare %s: %w", strings.Join(names, ", "), err)}
		}
		m := compareLoadedMsg{worlds: cmp.Worlds, source: cmp.Source, fanout: fo}
		for _, p := range cmp.Paths {
			cp := panes.ComparePath{Path: p.Path, ChangedBy: p.ChangedBy, Agree: p.Agree}
			for _, v := range p.Versions {
				cp.Versions = append(cp.Versions, panes.CompareVersion{Worlds: v.Worlds, Type: v.Type, Size: v.Size, Source: v.Source})
			}
			m.paths = append(m.paths, cp)
		}
		return m
	}
}

// lastFanOut finds the newest fan-out over source in the activity log: its
// command and, per World, the session it ran (exit status and duration).
// The log's event names the Worlds and the command; the results come from
// the event when it carries them, else from each World's sessions.
func lastFanOut(eng *engine.Engine, source string) (*panes.FanOut, []string) {
	evs, _, err := eng.ReadActivity(0)
	if err != nil {
		return nil, nil
	}
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		if ev.Type != fanoutEvent {
			continue
		}
		names := stringList(ev.Detail["worlds"])
		argv := stringList(ev.Detail["argv"])
		var live []string
		for _, n := range names {
			if w, err := eng.World(n); err == nil && w.Source == source {
				live = append(live, n)
			}
		}
		if len(live) == 0 {
			continue
		}
		fo := &panes.FanOut{Command: engine.ShellQuote(argv), At: ev.Time.Local()}
		results := map[string]map[string]any{}
		if rs, ok := ev.Detail["results"].([]any); ok {
			for _, r := range rs {
				if m, ok := r.(map[string]any); ok {
					if w, ok := m["world"].(string); ok {
						results[w] = m
					}
				}
			}
		}
		for _, n := range live {
			fo.Rows = append(fo.Rows, fanOutRow(eng, n, argv, ev, results[n]))
		}
		return fo, live
	}
	return nil, nil
}

func fanOutRow(eng *engine.Engine, world string, argv []string, ev engine.Event, res map[string]any) panes.FanOutRow {
	row := panes.FanOutRow{World: world, Changed: -1}
	if res != nil {
		if v, ok := res["exit_code"].(float64); ok {
			row.ExitCode = int(v)
		}
		row.Signal, _ = res["signal"].(string)
		row.Duration, _ = res["duration"].(string)
		row.Error, _ = res["error"].(string)
		if ch, ok := res["changed"].([]any); ok {
			row.Changed = len(ch)
		}
		return row
	}
	// The event is written when the fan-out ends: its session is the last
	// one with the same command that started before it.
	ss, err := eng.Sessions(world)
	if err != nil {
		row.Error = err.Error()
		return row
	}
	var found *engine.SessionMeta
	for i := range ss {
		s := &ss[i]
		if slices.Equal(s.Argv, argv) && !s.StartedAt.After(ev.Time) && (found == nil || s.StartedAt.After(found.StartedAt)) {
			found = s
		}
	}
	if found == nil {
		row.Error = "its session is gone"
		return row
	}
	row.ExitCode, row.Signal, row.Error = found.ExitCode, found.Signal, found.Error
	row.Running = found.State == engine.SessionRunning || found.State == engine.SessionStarting
	row.Duration = found.Duration().Round(1e6).String()
	// The paths it changed: those its watcher saw it write.
	if prov, err := eng.Provenance(world); err == nil {
		row.Changed = 0
		for _, ws := range prov {
			for _, w := range ws {
				if w.Session == found.ID {
					row.Changed++
					break
				}
			}
		}
	}
	return row
}

func stringList(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// applyAdopted publishes, World by World, the paths adopted from each; it
// stops at the first World whose apply fails (each apply is atomic).
func applyAdopted(ctx context.Context, eng *engine.Engine, picks map[string][]string) tea.Cmd {
	return func() tea.Msg {
		worlds := make([]string, 0, len(picks))
		for w := range picks {
			worlds = append(worlds, w)
		}
		sort.Strings(worlds)
		var msg compareAppliedMsg
		for _, w := range worlds {
			var aps []applyPick
			for _, p := range picks[w] {
				aps = append(aps, applyPick{Path: p})
			}
			res, err := engineApply(ctx, eng, w, aps)
			if err != nil {
				msg.world, msg.picks, msg.res, msg.err = w, aps, res, err
				return msg
			}
			msg.applied = append(msg.applied, w)
			msg.paths += len(aps)
		}
		return msg
	}
}

func removeWorlds(ctx context.Context, eng *engine.Engine, r removeWorldsReq) tea.Cmd {
	return func() tea.Msg {
		var msg removeWorldsDoneMsg
		msg.force = r.force
		var errs []error
		for _, n := range r.names {
			_, err := eng.Remove(ctx, n, engine.RemoveOptions{Force: r.force, Kill: r.force})
			switch {
			case err == nil:
				msg.removed = append(msg.removed, n)
			case errors.Is(err, engine.ErrUnsavedWork) && !r.force:
				msg.unsaved = append(msg.unsaved, n)
			default:
				errs = append(errs, fmt.Errorf("remove %s: %w", n, err))
			}
		}
		msg.err = errors.Join(errs...)
		return msg
	}
}

// reloadCompare reads the open compare view again (nil when none is open).
func reloadCompare(m Model) tea.Cmd {
	cmp := m.compare()
	if cmp == nil {
		return nil
	}
	load := loadCompare(m.ctx, m.eng, cmp.Worlds[0], cmp.Worlds)
	return func() tea.Msg {
		msg := load()
		if c, ok := msg.(compareLoadedMsg); ok {
			c.refresh = true
			return c
		}
		return msg
	}
}

// compareResult handles the compare view's messages; ok is false for any
// other message.
func (m Model) compareResult(msg tea.Msg) (Model, tea.Cmd, bool) {
	switch msg := msg.(type) {
	case compareLoadedMsg:
		var again tea.Cmd
		if msg.refresh {
			if m.lCompare.done() {
				if again = reloadCompare(m); again == nil {
					m.lCompare.inflight = false
				}
			}
			if m.compare() == nil {
				return m, again, true // closed meanwhile: the answer is for nobody
			}
		}
		if msg.err != nil {
			m.setResult("", msg.err)
			return m, again, true
		}
		if x, i := topmost[compareModal](m); i >= 0 {
			m.setModal(i, compareModal{x.c.SetPaths(msg.worlds, msg.paths, msg.fanout)})
		} else {
			m.push(compareModal{panes.NewCompare(m.env, msg.worlds, msg.source, msg.paths, msg.fanout)})
		}
		return m, again, true
	case panes.CompareClosedMsg:
		closeAll[compareModal](&m)
		return m, nil, true
	case panes.CompareApplyMsg:
		m.setResult("applying the adopted versions…", nil)
		return m, applyAdopted(m.ctx, m.eng, msg.Picks), true
	case compareAppliedMsg:
		var cmds []tea.Cmd
		if len(msg.applied) > 0 {
			m.setResult(fmt.Sprintf("adopted %s from %s", panes.Count(msg.paths, "path", "paths"), strings.Join(msg.applied, ", ")), nil)
		}
		if msg.err != nil {
			if len(msg.res.Conflicts) > 0 {
				m = m.openConflicts(msg.world, msg.picks, msg.res.Conflicts)
				m.setResult("", fmt.Errorf("adopting from %s conflicts: resolve and apply again", msg.world))
			} else {
				m.setResult("", fmt.Errorf("adopt from %s: %w", msg.world, msg.err))
			}
		}
		if cmp := m.compare(); cmp != nil {
			cmds = append(cmds, loadCompare(m.ctx, m.eng, cmp.Worlds[0], cmp.Worlds))
		}
		var c tea.Cmd
		m, c = m.reloadAll()
		cmds = append(cmds, c)
		return m, tea.Batch(cmds...), true
	case panes.CompareRemoveMsg:
		d := panes.NewConfirm(m.env, "Remove "+panes.Count(len(msg.Worlds), "World", "Worlds")+" not chosen?",
			[]string{strings.Join(msg.Worlds, ", "), "Each goes to the trash (restorable for 7 days with `strata restore-world`) and its sessions stop."},
			true, removeWorldsReq{names: msg.Worlds})
		m.push(dialogModal{d})
		return m, nil, true
	case removeWorldsReq:
		return m, removeWorlds(m.ctx, m.eng, msg), true
	case removeWorldsDoneMsg:
		if len(msg.unsaved) > 0 {
			d := panes.NewTypedConfirm(m.env, "Remove "+panes.Count(len(msg.unsaved), "World", "Worlds")+" with unapplied work?",
				[]string{"Never applied or snapshotted: " + strings.Join(msg.unsaved, ", ") + ". Each goes to the trash, restorable for 7 days."},
				"remove", removeWorldsReq{names: msg.unsaved, force: true})
			m.push(dialogModal{d})
		}
		switch {
		case msg.err != nil:
			m.setResult("", msg.err)
		case len(msg.removed) > 0:
			m.setResult("removed "+strings.Join(msg.removed, ", "), nil)
		}
		var cmds []tea.Cmd
		if cmp := m.compare(); cmp != nil && len(msg.removed) > 0 {
			var left []string
			for _, w := range cmp.Worlds {
				if !slices.Contains(msg.removed, w) {
					left = append(left, w)
				}
			}
			if len(left) < 2 {
				closeAll[compareModal](&m)
			} else {
				cmds = append(cmds, loadCompare(m.ctx, m.eng, left[0], left))
			}
		}
		mm, c := m.reloadWorlds()
		m = mm.(Model)
		return m, tea.Batch(append(cmds, c)...), true
	}
	return m, nil, false
}
