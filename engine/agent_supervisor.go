package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/engine/sandbox"
)

// supervisorTick is how often the supervisor looks at the channel, the
// terminal heuristic and the session's end without an fsnotify wake-up.
const supervisorTick = 250 * time.Millisecond

// AgentSuperviseMain is `strata __agent-supervise STATE_ROOT CONFIG WORLD SESSION`.
func AgentSuperviseMain(args []string) int {
	// Long-lived: it must not hold what its starter leaked (sandbox.CloseInherited).
	sandbox.CloseInherited(nil)
	if len(args) > 0 && args[0] == AgentSuperviseArg {
		args = args[1:]
	}
	if len(args) != 4 {
		fmt.Fprintf(os.Stderr, "usage: strata %s STATE_ROOT CONFIG WORLD SESSION (started by strata itself)\n", AgentSuperviseArg)
		return 2
	}
	signal.Ignore(syscall.SIGHUP)
	var cfg *Config
	if args[1] != "" {
		c, err := LoadConfig(args[1])
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent supervisor: %v\n", err)
			return 1
		}
		cfg = c
	} else {
		cfg = (&Config{}).withDefaults()
	}
	ctx := context.Background()
	e, err := Open(ctx, Options{StateRoot: args[0], Config: cfg})
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent supervisor: %v\n", err)
		return 1
	}
	if err := e.superviseAgent(ctx, args[2], args[3]); err != nil {
		fmt.Fprintf(os.Stderr, "agent supervisor %s/%s: %v\n", args[2], args[3], err)
		return 1
	}
	return 0
}

type supervisor struct {
	e       *Engine
	world   string
	session string
	adir    string
	sdir    string
	rec     AgentRecord
	tracker *agent.Tracker
	reader  *agent.Reader
	last    agent.Status
	// transcriptUsage is the usage in Claude's transcript, last read.
	transcriptUsage agent.Usage
	// transcript is the agent's transcript as the World names it (Claude's
	// transcript_path), read for usage.
	transcript string
	// typed: the first queued item (a PTY prompt) waits for the program
	// to first wait for input.
	sawWaiting bool
}

func (e *Engine) superviseAgent(ctx context.Context, world, session string) error {
	s := &supervisor{e: e, world: world, session: session, adir: e.agentDir(world, session), sdir: e.SessionDir(world, session)}
	rec, ok := e.ReadAgentRecord(world, session)
	if !ok {
		return fmt.Errorf("no agent record in %s", s.adir)
	}
	s.rec = rec
	meta, err := ReadSessionMeta(s.sdir)
	if err != nil {
		return err
	}
	s.tracker = agent.NewTracker(rec.Integration, meta.StartedAt)
	if rec.PromptOnLaunch {
		s.tracker.ExpectPrompt()
	}
	s.reader = agent.NewReader(agentEventsDir(s.adir))
	s.last = s.tracker.Status()

	w, err := fsnotify.NewWatcher()
	var wake <-chan fsnotify.Event
	if err == nil {
		defer w.Close()
		if w.Add(agentEventsDir(s.adir)) == nil {
			wake = w.Events
		}
	}
	tick := time.NewTicker(supervisorTick)
	defer tick.Stop()
	for {
		select {
		case <-wake:
		case <-tick.C:
		}
		if _, err := os.Stat(s.adir); errors.Is(err, fs.ErrNotExist) {
			return nil // the World was removed
		}
		s.drain(ctx)
		meta, err := ReadSessionMeta(s.sdir)
		if err != nil {
			return err
		}
		if meta.State.Ended() {
			s.drain(ctx)
			s.tracker.Exit(meta.ExitCode, meta.Signal, meta.KilledByStrata, meta.EndedAt)
			s.readUsage()
			s.rec.Supervised = false
			s.publish(ctx)
			return nil
		}
		waiting := meta.Attention == AttentionWaiting
		if again := s.tracker.Terminal(waiting, time.Now()); again != nil {
			s.publish(ctx)
			s.turnSnapshot(ctx, again)
		}
		if waiting {
			s.sawWaiting = true
		}
		s.deliver()
		s.publish(ctx)
	}
}

// drain folds every event that arrived into the tracker, snapshotting each
// turn that ended.
func (s *supervisor) drain(ctx context.Context) {
	for {
		evs, err := s.reader.Read()
		if err != nil {
			s.e.Log.Warn("agent channel", "world", s.world, "session", s.session, "err", err)
			return
		}
		for _, ev := range evs {
			if ev.TranscriptPath != "" {
				s.transcript = ev.TranscriptPath
			}
			if ended := s.tracker.Apply(ev); ended != nil {
				s.readUsage()
				s.publish(ctx)
				s.turnSnapshot(ctx, ended)
			}
		}
		if len(evs) < 512 {
			return
		}
	}
}

func (s *supervisor) turnSnapshot(ctx context.Context, t *agent.Turn) {
	if !s.rec.Snap {
		return
	}
	conv := t.SessionID
	if conv == "" {
		conv = s.tracker.Status().SessionID
	}
	msg := fmt.Sprintf("turn %d: %s", t.N, shortPrompt(t.Prompt))
	if s.rec.Snapshots[t.N] != "" {
		msg = fmt.Sprintf("turn %d, after your answer: %s", t.N, shortPrompt(t.Prompt))
	}
	snap, err := s.e.Snapshot(ctx, s.world, SnapshotOptions{Message: msg, Auto: true})
	if err != nil {
		s.e.Log.Warn("turn snapshot", "world", s.world, "turn", t.N, "err", err)
		return
	}
	if s.rec.Snapshots == nil {
		s.rec.Snapshots = map[int]string{}
	}
	s.rec.Snapshots[t.N] = snap.ID
	ts := AgentTurnSnap{Snapshot: snap.ID, Preset: s.rec.Preset, Turn: t.N, Conversation: conv, Prompt: t.Prompt, Session: s.session}
	if s.transcript != "" {
		rel, err := s.e.saveTurnConversation(s.world, snap.ID, s.transcript)
		if err != nil {
			s.e.Log.Warn("turn snapshot: keep the conversation", "world", s.world, "turn", t.N, "err", err)
		}
		ts.Transcript = rel
	}
	_ = s.e.recordTurnSnap(s.world, ts)
	s.publish(ctx)
}

// deliver types the oldest queued input once the agent's turn is over.
func (s *supervisor) deliver() {
	dir := filepath.Join(s.adir, agentQueueDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name()[0] != '.' {
			names = append(names, e.Name())
		}
	}
	s.rec.Queued = len(names)
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	st := s.tracker.Status().State
	ready := st == agent.StateWaiting || (st == agent.StateStarting && s.sawWaiting)
	if !ready {
		return
	}
	p := filepath.Join(dir, names[0])
	data, err := os.ReadFile(p)
	if err != nil {
		return
	}
	if err := SendPTYInput(s.sdir, data); err != nil {
		s.e.Log.Warn("deliver queued input", "world", s.world, "err", err)
		return
	}
	_ = os.Remove(p)
	s.tracker.Typed(string(data), time.Now())
	s.rec.Queued--
	// One at a time: the next waits for the turn this one starts to end.
	s.sawWaiting = false
}

// publish writes agent.json and logs a state change.
func (s *supervisor) publish(ctx context.Context) {
	st := s.tracker.Status()
	_, err := os.Lstat(filepath.Join(s.adir, "muted"))
	s.rec.Muted = err == nil
	changed := st.State != s.last.State || st.Reason != s.last.Reason
	s.rec.Status, s.rec.Turns, s.rec.Updated = st, s.tracker.Turns(), time.Now()
	s.rec.Usage = st.Usage.Add(s.transcriptUsage)
	if err := writeJSONAtomic(filepath.Join(s.adir, agentRecordFile), s.rec); err != nil {
		s.e.Log.Warn("agent record", "world", s.world, "err", err)
	}
	if changed {
		s.e.activity(ctx, Event{Type: EventAgentState, World: s.world, Session: s.session, Detail: map[string]any{
			"state": string(st.State), "reason": st.Reason, "turn": st.Turn, "preset": s.rec.Preset,
		}})
	}
	s.last = st
}

// readUsage adds up the usage in the agent's transcript. The path comes
// from the agent (it may be forged): it is read only inside the World's agent
// home, through an os.Root, so it cannot name a host file.
func (s *supervisor) readUsage() {
	rel, ok := strings.CutPrefix(s.transcript, agentWorldHome+"/")
	if !ok || s.rec.Integration != agent.IntegrationClaude {
		return
	}
	root, err := os.OpenRoot(filepath.Join(s.e.Paths.World(s.world), agentHomeDir))
	if err != nil {
		return
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	if u, err := agent.ClaudeTranscriptUsage(f); err == nil {
		s.transcriptUsage = u
	}
}
