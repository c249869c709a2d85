package engine

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/overlay/mount"
)

// WorldInfo is a World with what a person wants to see at a glance.
type WorldInfo struct {
	World
	Status    string    `json:"status"` // running, waiting, failed, done, idle, planned, stopped, source missing
	Changes   int       `json:"changes"`
	Sessions  int       `json:"sessions"`
	Running   int       `json:"running_sessions"`
	Attention Attention `json:"attention"`
	Mounted   bool      `json:"mounted"`
	Error     string    `json:"error,omitempty"` // why Changes could not be read
	// TreeChanges counts each overlay tree's changes in a World with
	// several trees (main is the source); Changes is their sum.
	TreeChanges map[string]int `json:"tree_changes,omitempty"`
	// Details are the runtime's own rows (a cube World's sandbox and
	// template); the JSON form has them in the World's own fields.
	Details []Detail `json:"-"`
	// Agent is the state of the World's agent session (usage included).
	Agent *AgentRecord `json:"agent,omitempty"`
	// AgentUsage is what all the World's agent sessions spent.
	AgentUsage *agent.Usage `json:"agent_usage,omitempty"`
	// ResidentInits are the host pids of the World's resident inits (Info
	// only, not Infos): the one its sessions start in, and a retired one
	// still running sessions.
	ResidentInits []int `json:"resident_inits,omitempty"`
}

// Info gathers a World's derived state: its status, change count and sessions.
func (e *Engine) Info(ctx context.Context, w *World) WorldInfo {
	mt, _ := mount.ReadTable()
	wi := e.info(ctx, w, mt)
	wi.ResidentInits = ResidentPIDs(e.Paths.World(w.Name))
	return wi
}

// Infos is Info of each World in ws, then BrokenInfo of each in broken, in
// that order, for a listing: what is the same for every World is read once
// (the mount table, which the kernel formats whole on every read and which
// holds one overlay per mounted World, so a read per World made listing 100
// Worlds take a second), and the Worlds are read on up to GOMAXPROCS
// workers.
func (e *Engine) Infos(ctx context.Context, ws []*World, broken []*BrokenWorldError) []WorldInfo {
	mt, _ := mount.ReadTable() // unreadable: nothing shows as mounted, as in Info
	out := make([]WorldInfo, len(ws)+len(broken))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(out)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if i < len(ws) {
					out[i] = e.info(ctx, ws[i], mt)
				} else {
					out[i] = e.brokenInfo(broken[i-len(ws)], mt)
				}
			}
		}()
	}
	for i := range out {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}

// mountedIn reports whether the table shows something mounted at merged; a
// nil table (the mount table could not be read) shows nothing.
func mountedIn(mt *mount.Table, merged string) bool {
	if mt == nil {
		return false
	}
	_, ok, _ := mt.MountedAt(merged)
	return ok
}

func (e *Engine) info(ctx context.Context, w *World, mt *mount.Table) WorldInfo {
	rt := e.runtimeFor(w)
	wi := WorldInfo{World: *w, Mounted: rt.HostView() && mountedIn(mt, e.Paths.Merged(w.Name)), Details: rt.Details(w)}
	if cs, err := e.Changes(ctx, w, false); err == nil {
		wi.Changes = len(cs.Changes)
	} else {
		wi.Error = err.Error()
	}
	e.treeInfo(ctx, w, &wi) // the extra trees' changes (trees.go)
	ss, _ := ListSessions(e.Paths.World(w.Name))
	wi.Sessions = len(ss)
	for _, s := range ss {
		if s.State == SessionRunning || s.State == SessionStarting {
			wi.Running++
		}
	}
	wi.Attention = WorldAttention(currentSessions(ss))
	wi.Status = worldStatus(w, ss, wi.Attention)
	if errors.Is(e.CheckSource(w), ErrSourceMissing) {
		wi.Status = "source missing"
	}
	if r, err := e.agentStatus(w.Name); err == nil {
		wi.Agent = &r
		u := e.AgentUsage(w.Name)
		wi.AgentUsage = &u
		if att := agentAttention(wi.Attention, r); att != wi.Attention && wi.Status != "source missing" {
			wi.Attention, wi.Status = att, worldStatus(w, ss, att)
		}
	}
	return wi
}

// BrokenInfo describes a broken World for listings: its name, state and
// status "broken", the error, and its sessions (which need no world.toml).
func (e *Engine) BrokenInfo(b *BrokenWorldError) WorldInfo {
	mt, _ := mount.ReadTable()
	return e.brokenInfo(b, mt)
}

func (e *Engine) brokenInfo(b *BrokenWorldError, mt *mount.Table) WorldInfo {
	wi := WorldInfo{World: World{Name: b.Name, State: StateBroken}, Status: string(StateBroken), Error: b.Reason()}
	wi.Mounted = mountedIn(mt, e.Paths.Merged(b.Name))
	ss, _ := ListSessions(e.Paths.World(b.Name))
	wi.Sessions = len(ss)
	for _, s := range ss {
		if s.State == SessionRunning || s.State == SessionStarting {
			wi.Running++
		}
	}
	return wi
}

func worldStatus(w *World, ss []SessionMeta, att Attention) string {
	switch w.State {
	case StatePlanned:
		return "planned"
	case StateStopped:
		return "stopped"
	}
	if len(ss) == 0 {
		return "idle"
	}
	switch att {
	case AttentionWaiting:
		return "waiting"
	case AttentionRunning:
		return "running"
	case AttentionFailed:
		return "failed"
	case AttentionDone:
		return "done"
	}
	return string(att)
}

// Listing is WorldsOfSource(dir) and BrokenWorlds from one read of the
// Worlds directory.
func (e *Engine) Listing(dir string) ([]*World, []*BrokenWorldError, error) {
	all, broken, err := e.scanWorlds()
	if err != nil {
		return nil, nil, err
	}
	return e.ofSource(all, dir), broken, nil
}

// WorldsOfSource lists the Worlds whose source contains dir (or all when dir is "").
func (e *Engine) WorldsOfSource(dir string) ([]*World, error) {
	all, err := e.Worlds()
	if err != nil {
		return nil, err
	}
	return e.ofSource(all, dir), nil
}

// ofSource are the Worlds of all whose source contains dir (all when dir is "").
func (e *Engine) ofSource(all []*World, dir string) []*World {
	if dir == "" {
		return all
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	var out []*World
	for _, w := range all {
		if within(real, w.Source) || inTree(w, real) {
			out = append(out, w)
		}
	}
	return out
}

// currentSessions are the sessions that describe a World now: every live
// one, plus the one that ended last. An old failure followed by successful
// runs is history, not something that needs the person.
func currentSessions(ss []SessionMeta) []SessionMeta {
	var out []SessionMeta
	var last *SessionMeta
	for i := range ss {
		s := &ss[i]
		if s.State == SessionRunning || s.State == SessionStarting {
			out = append(out, *s)
			continue
		}
		if last == nil || s.EndedAt.After(last.EndedAt) {
			last = s
		}
	}
	if last != nil {
		out = append(out, *last)
	}
	return out
}
