package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/engine/session"
)

// Agents are sessions whose command is a coding agent (a preset of
// engine/agent). An agent session has, beside its session dir, an agent dir
// worlds/<name>/agents/<session>/ holding its hook channel (world/events/,
// the only part bound into the World), its status as its supervisor
// last recorded it (agent.json) and the input waiting for its turn to end
// (queue/). The supervisor is `strata __agent-supervise`, a host process of
// its own started with the session: it reads the channel, runs the status
// Tracker, takes the per-turn snapshots and delivers queued input.

const (
	// AgentSuperviseArg is the hidden command that supervises an agent session.
	AgentSuperviseArg = "__agent-supervise"

	// Inside the World: the per-session dir (its events/ is agent.WorldHookDir),
	// the strata binary for the hook command, and the agent's home.
	agentWorldSession = "/run/strata/session"
	agentWorldStrata  = "/run/strata/bin/strata"
	agentWorldHome    = "/run/strata/home"

	agentRecordFile = "agent.json"
	// agentInWorldDir, in the agent dir, is what the World sees at
	// agentWorldSession: the channel (events/) and nothing else.
	agentInWorldDir = "world"
	agentQueueDir   = "queue"
	// agentTurnsFile, in a World dir, maps turn snapshots to conversations;
	// agentTurnConvDir keeps each turn snapshot's conversation file.
	agentTurnsFile   = "agent-turns.json"
	agentTurnConvDir = "agent-turns"
	// agentHomeDir, in a World dir, is the agent's home as the World sees it
	// (until Worlds have a home layer of their own): Claude's trust entry,
	// its transcripts, what --resume reads.
	agentHomeDir = "agent-home"
	// agentConfigDir, in the agent home, holds the hook configuration
	// strata writes (Claude's settings file, the Codex and Gemini homes).
	agentConfigDir = ".strata-agent"
)

// EventAgentState is an agent session's status change; detail: state,
// reason, turn, preset.
const EventAgentState EventType = "agent.state"

// ErrNoAgent: the World has no agent session.
var ErrNoAgent = errors.New("world has no agent session")

// AgentOptions say what to start in a World: a preset (with a first prompt,
// or resuming a conversation), or a plain command.
type AgentOptions struct {
	// Preset names an agent preset ("claude", "codex"...); "" runs Argv as a
	// plain command (status from the PTY heuristic only).
	Preset string
	Prompt string
	// Argv: without a preset, the command; with one, arguments appended to
	// the preset's.
	Argv []string
	// Resume continues the agent's conversation Resume; Fork continues it
	// as a new conversation.
	Resume string
	Fork   bool
	// Env is the environment strata passes credentials from; nil = this
	// process's.
	Env       []string
	Isolation Isolation
	NoNetwork bool
	// NoSnapshots turns per-turn snapshots off.
	NoSnapshots bool
	// Muted: an idle agent does not count as needing the person.
	Muted bool
}

// AgentRecord is agent.json: what the supervisor knows of an agent session.
type AgentRecord struct {
	Session     string            `json:"session"`
	World       string            `json:"world"`
	Preset      string            `json:"preset,omitempty"`
	Integration agent.Integration `json:"integration"`
	Prompt      string            `json:"prompt,omitempty"`
	// PromptOnLaunch: Prompt went on the command line (not typed), so the
	// agent submits it itself after its SessionStart.
	PromptOnLaunch bool         `json:"prompt_on_launch,omitempty"`
	Status         agent.Status `json:"status"`
	Turns          []agent.Turn `json:"turns,omitempty"`
	// Snapshots are the turn snapshots: turn N -> snapshot id (0: before
	// the first turn).
	Snapshots map[int]string `json:"snapshots,omitempty"`
	Muted     bool           `json:"muted,omitempty"`
	Queued    int            `json:"queued,omitempty"`
	Snap      bool           `json:"per_turn_snapshots,omitempty"`
	// Supervised: a supervisor is running (false once it recorded the end).
	Supervised bool      `json:"supervised"`
	Updated    time.Time `json:"updated"`
	// Usage is what the agent reported it spent (hook events, and Claude's
	// transcript), for the session.
	Usage agent.Usage `json:"usage"`
}

// NeedsYou says whether the agent waits on the person (a muted one never does).
func (r AgentRecord) NeedsYou() bool { return !r.Muted && r.Status.State.NeedsYou() }

// AgentUsage is what the World's agents spent, all its agent sessions
// together.
func (e *Engine) AgentUsage(name string) agent.Usage {
	var u agent.Usage
	entries, _ := os.ReadDir(filepath.Join(e.Paths.World(name), "agents"))
	for _, d := range entries {
		if r, ok := e.ReadAgentRecord(name, d.Name()); ok {
			u = u.Add(r.Usage)
		}
	}
	return u
}

// UsageText says a usage in a line: tokens in and out, cost when known.
func UsageText(u agent.Usage) string {
	s := fmt.Sprintf("%d tokens in (%d cached), %d out", u.InputTokens+u.CacheRead+u.CacheWrite, u.CacheRead, u.OutputTokens)
	if u.CostUSD > 0 {
		s += fmt.Sprintf(", $%.2f", u.CostUSD)
	}
	return s
}

// AgentTurnSnap is a turn snapshot: which conversation it continues.
type AgentTurnSnap struct {
	Snapshot string `json:"snapshot"`
	Preset   string `json:"preset"`
	Turn     int    `json:"turn"`
	// Conversation is the agent's conversation id at the end of the turn.
	Conversation string `json:"conversation,omitempty"`
	Prompt       string `json:"prompt,omitempty"`
	Session      string `json:"session"`
	// Transcript is the conversation file as it stood at the end of the
	// turn (Claude's transcript, relative to the agent home), kept in the
	// World's agent-turns/ dir: a resume from the snapshot puts it back, so
	// files and conversation go back together.
	Transcript string `json:"transcript,omitempty"`
	// world is the World whose agent-turns/ holds the copy (TurnSnapshot's).
	world string
}

// agentAttention is a World's attention with its agent's own word on it:
// a supervised agent's hooks know better than the terminal heuristic, and a
// muted agent never waits on the person.
func agentAttention(att Attention, r AgentRecord) Attention {
	if att != AttentionWaiting && att != AttentionRunning {
		return att
	}
	switch {
	case r.Muted && att == AttentionWaiting:
		return AttentionRunning
	case !r.Supervised:
		return att
	case r.NeedsYou():
		return AttentionWaiting
	case r.Status.State == agent.StateWorking:
		return AttentionRunning
	}
	return att
}

// agentEventsDir is the hook channel of an agent dir, on the host.
func agentEventsDir(adir string) string { return filepath.Join(adir, agentInWorldDir, "events") }

// Registry is the agent presets in effect (built-ins with config applied).
func (e *Engine) Registry() (*agent.Registry, error) {
	return agent.NewRegistry(e.Config.Agents)
}

func (e *Engine) agentDir(world, session string) string {
	return filepath.Join(e.Paths.World(world), "agents", session)
}

// StartAgent starts an agent (or a plain command) on a PTY in the World,
// detached, with its hooks installed for this session only, and a supervisor
// that turns its hooks into a status.
func (e *Engine) StartAgent(ctx context.Context, name string, o AgentOptions) (SessionMeta, error) {
	w, err := e.World(name)
	if err != nil {
		return SessionMeta{}, err
	}
	environ := o.Env
	if environ == nil {
		environ = os.Environ()
	}
	var preset agent.Preset
	if o.Preset == "" {
		if len(o.Argv) == 0 {
			return SessionMeta{}, fmt.Errorf("start in world %q: no agent and no command (pass --agent PRESET or -- CMD ARGS...)", name)
		}
		preset = agent.Preset{Name: "", Command: o.Argv, Prompt: agent.PromptNone, Status: agent.IntegrationNone}
		o.Argv = nil
	} else {
		reg, err := e.Registry()
		if err != nil {
			return SessionMeta{}, fmt.Errorf("start agent in world %q: %w", name, err)
		}
		if preset, err = reg.Get(o.Preset); err != nil {
			return SessionMeta{}, fmt.Errorf("start agent in world %q: %w (presets: %s)", name, err, strings.Join(reg.Names(), ", "))
		}
	}
	creds, err := preset.CredentialEnv(environ)
	if err != nil {
		return SessionMeta{}, fmt.Errorf("start agent %s in world %q: %w", preset.Name, name, err)
	}
	id := NewSessionID()
	adir := e.agentDir(w.Name, id)
	home := filepath.Join(e.Paths.World(w.Name), agentHomeDir)
	for _, d := range []string{agentEventsDir(adir), filepath.Join(adir, agentQueueDir), filepath.Join(home, agentConfigDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return SessionMeta{}, fmt.Errorf("start agent in world %q: %w", name, err)
		}
	}
	strata := e.exe
	if strata == "" {
		if strata, err = os.Executable(); err != nil {
			return SessionMeta{}, fmt.Errorf("start agent: find the strata binary: %w", err)
		}
	}
	installed, err := agent.Install(preset, agent.HookSetup{
		Strata: agentWorldStrata, HookDir: agent.WorldHookDir,
		// In the World's agent home, not the session: Codex keeps its
		// conversations in CODEX_HOME, and a later session (after a
		// rollback) must find them to resume one.
		ConfigDir: filepath.Join(home, agentConfigDir), ConfigDirInWorld: agentWorldHome + "/" + agentConfigDir,
		Workdir: w.Source, CodexBase: userCodexConfig(environ),
	})
	if err != nil {
		return SessionMeta{}, fmt.Errorf("start agent %s in world %q: install its hooks: %w", preset.Name, name, err)
	}
	if preset.Status == agent.IntegrationClaude {
		if err := seedClaudeTrust(home, w.Source, creds); err != nil {
			return SessionMeta{}, fmt.Errorf("start agent %s in world %q: %w", preset.Name, name, err)
		}
	}
	launch := agent.Launch{Prompt: o.Prompt, Resume: o.Resume, Fork: o.Fork, Extra: append(slices.Clone(installed.Args), o.Argv...)}
	if len(preset.SessionID) > 0 && (o.Resume == "" || o.Fork) {
		launch.SessionID = newUUID()
	}
	if o.Resume != "" && len(preset.Resume) == 0 {
		return SessionMeta{}, fmt.Errorf("start agent %s in world %q: %w", preset.Name, name, agent.ErrCannotResume)
	}
	inv, err := preset.Argv(launch)
	if err != nil {
		return SessionMeta{}, fmt.Errorf("start agent %s in world %q: %w", preset.Name, name, err)
	}
	var env []string
	if o.Preset == "" {
		// A plain command gets what strata exec gives one: the whole
		// environment and the real home.
		env = slices.Clone(environ)
	} else {
		env = agentBaseEnv(environ)
		env = append(env, "HOME="+agentWorldHome)
	}
	env = append(env, installed.Env...)
	env = append(env, creds...)

	// Before the first turn: the state the prompt starts from.
	snap := !o.NoSnapshots && preset.Status != agent.IntegrationNone
	rec := AgentRecord{
		Session: id, World: w.Name, Preset: preset.Name, Integration: preset.Status, Prompt: o.Prompt,
		PromptOnLaunch: o.Prompt != "" && inv.Type == "",
		Status:         agent.Status{State: agent.StateStarting, Since: time.Now()}, Muted: o.Muted, Snap: snap, Supervised: true, Updated: time.Now(),
	}
	if snap && o.Resume == "" {
		s, err := e.Snapshot(ctx, w.Name, SnapshotOptions{Message: "before turn 1: " + shortPrompt(o.Prompt), Auto: true})
		if err != nil {
			return SessionMeta{}, fmt.Errorf("start agent in world %q: snapshot before the first turn: %w", name, err)
		}
		rec.Snapshots = map[int]string{0: s.ID}
		_ = e.recordTurnSnap(w.Name, AgentTurnSnap{Snapshot: s.ID, Preset: preset.Name, Turn: 0, Prompt: o.Prompt, Session: id})
	}
	if err := writeJSONAtomic(filepath.Join(adir, agentRecordFile), rec); err != nil {
		return SessionMeta{}, fmt.Errorf("start agent in world %q: %w", name, err)
	}
	if inv.Type != "" {
		// Typed on the terminal once the program first waits for input.
		_ = queueInput(adir, inv.Type, true)
	}
	// What strata itself hands the agent (its hook channel, config home and
	// the one credential it needs) passes the boundary's environment scrub.
	var pass []string
	for _, kv := range append(slices.Clone(installed.Env), creds...) {
		if k, _, ok := strings.Cut(kv, "="); ok {
			pass = append(pass, k)
		}
	}
	meta, err := e.runtimeFor(w).StartSession(ctx, w, ExecOptions{
		Argv: inv.Argv, Env: env, TTY: true, NoNetwork: o.NoNetwork, Isolation: o.Isolation,
		ID: id, PassEnv: pass,
		Binds: []Bind{
			// Only the channel: the record, the queue and the mute mark
			// stay out of the agent's reach.
			{Source: filepath.Join(adir, agentInWorldDir), Target: agentWorldSession},
			{Source: strata, Target: agentWorldStrata, ReadOnly: true},
			{Source: home, Target: agentWorldHome},
		},
	})
	if err != nil {
		rec.Status = agent.Status{State: agent.StateFailed, Reason: err.Error(), Since: time.Now()}
		rec.Supervised = false
		_ = writeJSONAtomic(filepath.Join(adir, agentRecordFile), rec)
		return meta, err
	}
	if err := e.startSupervisor(w.Name, meta.ID, strata); err != nil {
		return meta, fmt.Errorf("agent %s in world %q runs (session %s) but its status cannot be followed: %w", preset.Name, name, meta.ID, err)
	}
	return meta, nil
}

// startSupervisor starts `strata __agent-supervise` detached.
func (e *Engine) startSupervisor(world, session, strata string) error {
	logf, err := os.OpenFile(filepath.Join(e.agentDir(world, session), "supervisor.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(strata, AgentSuperviseArg, e.Paths.Root, e.Config.Path(), world, session)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// agentBaseEnv is what an agent session inherits from strata's
// environment: the terminal and locale, never strata's secrets (the
// credential the preset needs is passed on its own).
func agentBaseEnv(environ []string) []string {
	keep := []string{"PATH", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "SHELL", "COLORTERM"}
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(keep, k) {
			out = append(out, kv)
		}
	}
	if !slices.ContainsFunc(out, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		out = append(out, defaultPath)
	}
	return out
}

// userCodexConfig is the user's own ~/.codex/config.toml (their model
// settings carry over into the World's Codex home), or nil.
func userCodexConfig(environ []string) []byte {
	home := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if home == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
	if err != nil {
		return nil
	}
	return data
}

// seedClaudeTrust marks the source trusted in the agent home's .claude.json
// (Claude shows its trust dialog, and sends no hook, until it is), keeping
// whatever the file already holds.
func seedClaudeTrust(home, source string, creds []string) error {
	p := filepath.Join(home, ".claude.json")
	doc := map[string]any{}
	if data, err := os.ReadFile(p); err == nil {
		if err := json.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("the World's %s is not JSON (%w): fix or remove it", p, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	doc["hasCompletedOnboarding"] = true
	projects, _ := doc["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	proj, _ := projects[source].(map[string]any)
	if proj == nil {
		proj = map[string]any{}
	}
	proj["hasTrustDialogAccepted"] = true
	projects[source] = proj
	doc["projects"] = projects
	for _, kv := range creds {
		if v, ok := strings.CutPrefix(kv, "ANTHROPIC_API_KEY="); ok && len(v) >= 20 {
			doc["customApiKeyResponses"] = map[string]any{"approved": []string{v[len(v)-20:]}}
		}
	}
	return writeJSONAtomic(p, doc)
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// shortPrompt is a prompt cut for a snapshot label: its first line, at most
// 60 characters.
func shortPrompt(p string) string {
	p = strings.TrimSpace(p)
	if i := strings.IndexAny(p, "\r\n"); i >= 0 {
		p = p[:i] + "…"
	}
	if r := []rune(p); len(r) > 60 {
		p = string(r[:59]) + "…"
	}
	return p
}

func writeJSONAtomic(p string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// ReadAgentRecord reads an agent session's agent.json; ok false when the
// session is not an agent session.
func (e *Engine) ReadAgentRecord(world, session string) (AgentRecord, bool) {
	var r AgentRecord
	data, err := os.ReadFile(filepath.Join(e.agentDir(world, session), agentRecordFile))
	if err != nil || json.Unmarshal(data, &r) != nil {
		return r, false
	}
	if r.Supervised {
		// The session's end is the status at once (its supervisor records it
		// within a tick); a supervisor that died leaves a record that claims
		// to be live: after a grace, it is not.
		if m, err := ReadSessionMeta(e.SessionDir(world, session)); err == nil && m.State.Ended() {
			r.Status = endStatus(r.Status, m)
			if time.Since(m.EndedAt) > 5*time.Second {
				r.Supervised = false
			}
		}
	}
	return r, true
}

// endStatus is the status a session's end implies.
func endStatus(s agent.Status, m SessionMeta) agent.Status {
	t := agent.NewTracker(agent.IntegrationNone, m.StartedAt)
	t.Exit(m.ExitCode, m.Signal, m.KilledByStrata, m.EndedAt)
	end := t.Status()
	s.State, s.Reason, s.Since = end.State, end.Reason, end.Since
	return s
}

// AgentStatus is the status of the World's agent session: the newest
// session that has an agent record.
func (e *Engine) AgentStatus(name string) (AgentRecord, error) {
	if _, err := e.World(name); err != nil {
		return AgentRecord{}, err
	}
	return e.agentStatus(name)
}

// agentStatus is AgentStatus of a World the caller has already read.
func (e *Engine) agentStatus(name string) (AgentRecord, error) {
	entries, err := os.ReadDir(filepath.Join(e.Paths.World(name), "agents"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return AgentRecord{}, fmt.Errorf("agent status of world %q: %w", name, err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if r, ok := e.ReadAgentRecord(name, entries[i].Name()); ok {
			return r, nil
		}
	}
	return AgentRecord{}, fmt.Errorf("world %q: %w (start one with strata run %s --agent PRESET)", name, ErrNoAgent, name)
}

// AgentsNeedingYou lists the Worlds whose agent waits on the person, oldest
// wait first (agent.ByAttention), then the rest.
func (e *Engine) AgentsNeedingYou() ([]AgentRecord, error) {
	ws, err := e.Worlds()
	if err != nil {
		return nil, err
	}
	var named []agent.Named
	byName := map[string]AgentRecord{}
	for _, w := range ws {
		r, err := e.AgentStatus(w.Name)
		if err != nil {
			continue
		}
		st := r.Status
		if r.Muted && st.State.NeedsYou() {
			st.State = agent.StateWorking // a muted agent sorts with the busy ones
		}
		named = append(named, agent.Named{Name: w.Name, Status: st})
		byName[w.Name] = r
	}
	agent.ByAttention(named)
	out := make([]AgentRecord, 0, len(named))
	for _, n := range named {
		out = append(out, byName[n.Name])
	}
	return out, nil
}

// SetMuted mutes (or unmutes) the World's agent session: a muted session
// never counts as needing the person.
func (e *Engine) SetMuted(name string, muted bool) error {
	r, err := e.AgentStatus(name)
	if err != nil {
		return err
	}
	p := filepath.Join(e.agentDir(name, r.Session), "muted")
	if muted {
		err = os.WriteFile(p, nil, 0o600)
	} else if err = os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("mute world %q: %w", name, err)
	}
	r.Muted = muted
	return writeJSONAtomic(filepath.Join(e.agentDir(name, r.Session), agentRecordFile), r)
}

// SendInput sends text to the World's agent: while the agent works on a turn
// (or waits for a permission answer) it is queued and delivered when the turn
// ends, unless now. A carriage
// return is added (the agent reads a line).
func (e *Engine) SendInput(ctx context.Context, name, text string, now bool) (queued bool, err error) {
	r, err := e.AgentStatus(name)
	if err != nil {
		return false, err
	}
	dir := e.SessionDir(name, r.Session)
	m, err := ReadSessionMeta(dir)
	if err != nil {
		return false, err
	}
	if m.State.Ended() {
		return false, fmt.Errorf("send to world %q: its agent session %s has ended (%s): %w", name, r.Session, m.State, ErrSessionNotRunning)
	}
	if !strings.HasSuffix(text, "\r") && !strings.HasSuffix(text, "\n") {
		text += "\r"
	}
	// Mid-turn (working, or at a permission prompt, where typed text would
	// be read as the answer) it waits for the turn to end.
	busy := r.Status.State == agent.StateWorking || r.Status.State == agent.StateStarting || r.Status.State == agent.StatePermission
	if now || !r.Supervised || !busy {
		if err := SendPTYInput(dir, []byte(text)); err != nil {
			return false, fmt.Errorf("send to world %q: %w", name, err)
		}
		return false, nil
	}
	if err := queueInput(e.agentDir(name, r.Session), text, false); err != nil {
		return false, fmt.Errorf("send to world %q: queue: %w", name, err)
	}
	return true, nil
}

// queueInput leaves text in the agent's queue, in order.
func queueInput(adir, text string, first bool) error {
	name := fmt.Sprintf("%020d", time.Now().UnixNano())
	if first {
		name = "00000000000000000000"
	}
	tmp := filepath.Join(adir, agentQueueDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(adir, agentQueueDir, name))
}

// SendPTYInput writes data to a running TTY session's terminal.
func SendPTYInput(dir string, data []byte) error {
	conn, err := session.DialAttach(dir)
	if err != nil {
		return fmt.Errorf("reach the session's terminal: %w", err)
	}
	defer conn.Close()
	if err := session.WriteAttachFrame(conn, session.AttachHello, []byte{0}); err != nil {
		return err
	}
	return session.WriteAttachFrame(conn, session.AttachInput, data)
}

// recordTurnSnap adds a turn snapshot to the World's agent-turns.json.
func (e *Engine) recordTurnSnap(world string, t AgentTurnSnap) error {
	p := filepath.Join(e.Paths.World(world), agentTurnsFile)
	var list []AgentTurnSnap
	if data, err := os.ReadFile(p); err == nil {
		_ = json.Unmarshal(data, &list)
	}
	list = append(list, t)
	return writeJSONAtomic(p, list)
}

// TurnSnapshot says which agent conversation a snapshot of the World
// continues, when it is a turn snapshot.
func (e *Engine) TurnSnapshot(world, ref string) (AgentTurnSnap, bool) {
	tl, err := e.Timeline(world)
	if err != nil {
		return AgentTurnSnap{}, false
	}
	s, err := tl.Find(ref)
	if err != nil {
		return AgentTurnSnap{}, false
	}
	data, err := os.ReadFile(filepath.Join(e.Paths.World(world), agentTurnsFile))
	if err != nil {
		return AgentTurnSnap{}, false
	}
	var list []AgentTurnSnap
	if json.Unmarshal(data, &list) != nil {
		return AgentTurnSnap{}, false
	}
	for _, t := range list {
		if t.Snapshot == s.ID {
			t.world = world
			return t, true
		}
	}
	return AgentTurnSnap{}, false
}

// saveTurnConversation copies the conversation file the agent names (a path
// in the World, under its agent home) into the World's agent-turns/ as the
// one of snapshot snap, and returns its path relative to the agent home ("":
// nothing kept). The path comes from the agent: it is read through an
// os.Root of the agent home, so it cannot name a host file.
func (e *Engine) saveTurnConversation(world, snap, inWorld string) (string, error) {
	rel, ok := strings.CutPrefix(inWorld, agentWorldHome+"/")
	if !ok || snap == "" {
		return "", nil
	}
	root, err := os.OpenRoot(filepath.Join(e.Paths.World(world), agentHomeDir))
	if err != nil {
		return "", err
	}
	defer root.Close()
	src, err := root.Open(rel)
	if err != nil {
		return "", err
	}
	defer src.Close()
	if fi, err := src.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("conversation file %s is not a regular file", inWorld)
	}
	dir := filepath.Join(e.Paths.World(world), agentTurnConvDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := copyToFile(filepath.Join(dir, snap+".conv"), src); err != nil {
		return "", err
	}
	return rel, nil
}

// restoreTurnConversation puts the conversation file of turn snapshot t back
// into the agent home of World name, as it stood at the end of the turn.
func (e *Engine) restoreTurnConversation(name string, t AgentTurnSnap) error {
	if t.Transcript == "" {
		return nil
	}
	from := cmp.Or(t.world, name)
	src, err := os.Open(filepath.Join(e.Paths.World(from), agentTurnConvDir, t.Snapshot+".conv"))
	if err != nil {
		return fmt.Errorf("the conversation of turn %d is not kept: %w", t.Turn, err)
	}
	defer src.Close()
	home := filepath.Join(e.Paths.World(name), agentHomeDir)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(home)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(t.Transcript), 0o755); err != nil {
		return err
	}
	tmp := t.Transcript + ".strata-restore"
	dst, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, cerr := io.Copy(dst, src)
	if err := errors.Join(cerr, dst.Close()); err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return root.Rename(tmp, t.Transcript)
}

func copyToFile(path string, src io.Reader) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	_, cerr := io.Copy(tmp, src)
	if err := errors.Join(cerr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// ResumeAgent restarts the agent of a turn snapshot in the World (after a
// rollback to it, or in a fork of it): resuming the conversation the turn
// ended with (fork: as a new conversation), with prompt as the next turn.
// A snapshot from before the first turn starts the agent afresh with the
// turn's prompt (or prompt when given).
func (e *Engine) ResumeAgent(ctx context.Context, name string, t AgentTurnSnap, prompt string, fork bool, o AgentOptions) (SessionMeta, error) {
	o.Preset, o.Prompt, o.Resume, o.Fork = t.Preset, prompt, t.Conversation, fork && t.Conversation != ""
	if t.Conversation != "" {
		// The conversation as it was at the end of the turn: what the agent
		// said after it is rolled back with the files.
		if err := e.restoreTurnConversation(name, t); err != nil {
			return SessionMeta{}, fmt.Errorf("resume %s conversation %s in world %q: %w", t.Preset, t.Conversation, name, err)
		}
	}
	if t.Conversation == "" && prompt == "" {
		o.Prompt = t.Prompt
	}
	return e.StartAgent(ctx, name, o)
}

// CopyAgentHome gives a fork the agent home of the World it was forked from
// (the conversations its agent resumes).
func (e *Engine) CopyAgentHome(from, to string) error {
	src := filepath.Join(e.Paths.World(from), agentHomeDir)
	if _, err := os.Stat(src); err != nil {
		return nil
	}
	dst := filepath.Join(e.Paths.World(to), agentHomeDir)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", "--", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copy the agent home of %q to %q: %v: %s", from, to, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// KillAgent ends the World's agent session: TERM, then KILL after grace
// (or at once with force). It is reported "exited (killed by strata)".
func (e *Engine) KillAgent(ctx context.Context, name, ref string, force bool, grace time.Duration) (SessionMeta, error) {
	var s SessionMeta
	var err error
	if ref == "" {
		r, aerr := e.AgentStatus(name)
		if aerr != nil {
			return s, aerr
		}
		ref = r.Session
	}
	if s, err = e.Session(name, ref); err != nil {
		return s, err
	}
	dir := e.SessionDir(name, s.ID)
	sig := syscall.SIGTERM
	if force {
		sig = syscall.SIGKILL
	}
	if err := KillSession(dir, sig); err != nil {
		return s, fmt.Errorf("kill session %s of world %q: %w", s.ID, name, err)
	}
	if force {
		return s, nil
	}
	if grace <= 0 {
		grace = e.Config.killGrace()
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if m, err := WaitSession(wctx, dir); err == nil {
		return m, nil
	}
	if err := KillSession(dir, syscall.SIGKILL); err != nil && !errors.Is(err, ErrSessionNotRunning) {
		return s, fmt.Errorf("kill session %s of world %q: %w", s.ID, name, err)
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	return WaitSession(wctx2, dir)
}
