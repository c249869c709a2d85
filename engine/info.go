package engine

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/stratahq/strata/engine/agent"
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
}

// Info gathers a World's derived state: its status, change count and sessions.
func (e *Engine) Info(ctx context.Context, w *World) WorldInfo {
	rt := e.runtimeFor(w)
	wi := WorldInfo{World: *w, Mounted: rt.HostView() && e.Mounted(w), Details: rt.Details(w)}
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
	if r, err := e.AgentStatus(w.Name); err == nil {
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
	wi := WorldInfo{World: World{Name: b.Name, State: StateBroken}, Status: string(StateBroken), Error: b.Reason()}
	wi.Mounted = e.mountedAt(e.Paths.Merged(b.Name))
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

// WorldsOfSource lists the Worlds whose source contains dir (or all when dir is "").
func (e *Engine) WorldsOfSource(dir string) ([]*World, error) {
	all, err := e.Worlds()
	if err != nil || dir == "" {
		return all, err
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
	return out, nil
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
