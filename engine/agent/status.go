package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// State is what an agent is doing, as a person would act on it.
type State string

const (
	StateStarting   State = "starting"         // launched, nothing reported yet
	StateWorking    State = "working"          // busy on a turn
	StatePermission State = "needs-permission" // waiting for the person to allow a tool
	StateQuestion   State = "asking"           // asked the person a question
	StateWaiting    State = "waiting"          // turn done, waiting for a prompt
	StateFailed     State = "failed"           // a turn or the program failed
	StateExited     State = "exited"           // the program ended
)

// NeedsYou says whether the state waits on the person.
func (s State) NeedsYou() bool {
	switch s {
	case StatePermission, StateQuestion, StateWaiting, StateFailed:
		return true
	}
	return false
}

// Status is an agent's state with why and since when.
type Status struct {
	State  State     `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
	// SessionID is the agent's conversation id, for resuming after a rollback.
	SessionID string `json:"session_id,omitempty"`
	// Turn is the number of the current (or last) turn, 0 before the first.
	Turn  int   `json:"turn"`
	Usage Usage `json:"usage"`
}

// Turn is one prompt and the work it started.
type Turn struct {
	N         int       `json:"n"`
	Prompt    string    `json:"prompt"`
	SessionID string    `json:"session_id,omitempty"`
	Started   time.Time `json:"started"`
	// Ended is zero while the turn runs.
	Ended time.Time `json:"ended,omitzero"`
	// Failed says the turn ended in an error (Claude's StopFailure).
	Failed bool   `json:"failed,omitempty"`
	Reply  string `json:"reply,omitempty"` // the agent's last message, when it reports it
}

// Tracker is one agent session's state machine. Feed it the session's hook
// events in order (Apply), the PTY heuristic's readings (Terminal) and the
// program's end (Exit). Not safe for concurrent use.
type Tracker struct {
	integration Integration
	st          Status
	turns       []Turn
	hooked      bool   // a hook event has arrived
	pendingTool string // "Bash: rm -rf x" between PreToolUse and PostToolUse
	ended       bool   // the program exited: nothing changes the status now
	// promptPending: launched with a first prompt the program submits
	// itself (an argument or a flag), not yet seen submitted.
	promptPending bool
}

// NewTracker starts tracking an agent launched at start with the given integration.
func NewTracker(integration Integration, start time.Time) *Tracker {
	return &Tracker{integration: integration, st: Status{State: StateStarting, Since: start}}
}

// ExpectPrompt says the program was launched with a first prompt it submits
// itself (Claude's prompt argument, Gemini's --prompt-interactive): its
// SessionStart starts that turn, it does not wait for a prompt, so a script
// waiting for needs-input does not stop between the two hooks.
func (t *Tracker) ExpectPrompt() { t.promptPending = true }

// Status is the current status.
func (t *Tracker) Status() Status { return t.st }

// Turns are the turns so far, oldest first.
func (t *Tracker) Turns() []Turn { return slices.Clone(t.turns) }

// set moves to state s; Since moves only when the state or reason changes, so
// a repeated report does not reset how long the person has been waited on.
func (t *Tracker) set(s State, reason string, at time.Time) {
	if t.st.State == StateExited {
		return
	}
	if s == t.st.State && reason == t.st.Reason {
		return
	}
	t.st.State, t.st.Reason, t.st.Since = s, reason, at
}

// Apply folds one hook event into the state. A returned turn is one that just
// ended (for a per-turn snapshot labelled with its prompt).
func (t *Tracker) Apply(e Event) (ended *Turn) {
	if t.ended {
		return nil // a straggler from a hook still running at exit
	}
	first := !t.hooked
	t.hooked = true
	if e.SessionID != "" {
		t.st.SessionID = e.SessionID
	}
	if e.Usage != nil {
		t.st.Usage = t.st.Usage.Add(*e.Usage)
	}
	switch e.Agent {
	case "codex":
		return t.applyCodex(e)
	case "aider":
		return t.endTurn(e, false)
	}
	switch e.Kind {
	case "SessionStart":
		// Also sent on /clear and after a compaction, which can be mid-turn.
		// Before the first hook the state is only the PTY guess (output
		// while the program starts reads as working): the agent's own word
		// replaces it, so a resumed session does not stay "working".
		if e.Source == "clear" || (first || t.st.State == StateStarting) && t.openTurn() == nil {
			if t.promptPending && e.Source != "clear" {
				t.set(StateWorking, "starting the first turn", e.Time)
			} else {
				t.set(StateWaiting, "ready for a prompt", e.Time)
			}
		}
	case "UserPromptSubmit", "BeforeAgent":
		t.startTurn(e.Prompt, e.Time)
		t.set(StateWorking, "", e.Time)
	case "PreToolUse", "BeforeTool":
		t.pendingTool = toolReason(e)
		t.set(StateWorking, "running "+t.pendingTool, e.Time)
	case "PermissionRequest":
		t.set(StatePermission, "allow "+toolReason(e)+"?", e.Time)
	case "PostToolUse", "PostToolUseFailure", "AfterTool":
		t.pendingTool = ""
		t.set(StateWorking, "", e.Time)
	case "Notification":
		t.notification(e)
	case "Stop", "AfterAgent":
		return t.endTurn(e, false)
	case "StopFailure":
		ended = t.endTurn(e, true)
		t.set(StateFailed, firstOf(e.Error, e.Message, "the turn failed"), e.Time)
		return ended
	case "SessionEnd":
		t.set(StateExited, firstOf(e.Source, "session ended"), e.Time)
	}
	return nil
}

func (t *Tracker) notification(e Event) {
	switch e.Notification {
	case "permission_prompt", "ToolPermission":
		reason := t.pendingTool
		switch {
		case reason != "":
		case e.ToolInput != "":
			// Gemini asks before BeforeTool: the notification's details say
			// what (the command, the file).
			reason = toolReason(e)
		default:
			reason = firstOf(e.Message, "a tool")
		}
		if t.st.State == StatePermission {
			return // PermissionRequest already said which
		}
		t.set(StatePermission, "allow "+reason+"?", e.Time)
	case "elicitation_dialog":
		t.set(StateQuestion, firstOf(e.Message, "asks a question"), e.Time)
	case "idle_prompt":
		// Claude repeats this after a minute idle: the turn was already done.
		if t.st.State != StateWaiting {
			t.set(StateWaiting, firstOf(e.Message, "waiting for a prompt"), e.Time)
		}
	}
}

func (t *Tracker) applyCodex(e Event) *Turn {
	switch e.Kind {
	case "agent-turn-complete":
		if open := t.openTurn(); open == nil {
			// Codex reports the prompt only when the turn ends.
			start := e.Time
			if n := len(t.turns); n > 0 {
				start = t.turns[n-1].Ended
			}
			t.startTurn(e.Prompt, start)
		} else if open.Prompt == "" {
			open.Prompt = e.Prompt
		}
		return t.endTurn(e, false)
	case "approval-requested":
		t.set(StatePermission, "allow "+firstOf(e.Message, "a command")+"?", e.Time)
	}
	return nil
}

func (t *Tracker) openTurn() *Turn {
	if n := len(t.turns); n > 0 && t.turns[n-1].Ended.IsZero() {
		return &t.turns[n-1]
	}
	return nil
}

func (t *Tracker) startTurn(prompt string, at time.Time) {
	t.promptPending = false
	if open := t.openTurn(); open != nil {
		open.Ended = at // a prompt typed mid-turn (or a lost Stop) ends the last
	}
	t.turns = append(t.turns, Turn{N: len(t.turns) + 1, Prompt: prompt, SessionID: t.st.SessionID, Started: at})
	t.st.Turn = len(t.turns)
	t.pendingTool = ""
}

func (t *Tracker) endTurn(e Event, failed bool) *Turn {
	open := t.openTurn()
	if open == nil {
		// A Stop without a prompt we saw (aider, or a hook installed mid-turn).
		t.startTurn(e.Prompt, e.Time)
		open = t.openTurn()
	}
	open.Ended, open.Failed, open.Reply = e.Time, failed, e.Message
	if open.SessionID == "" {
		open.SessionID = t.st.SessionID
	}
	t.pendingTool = ""
	t.set(StateWaiting, fmt.Sprintf("turn %d done", open.N), e.Time)
	done := *open
	return &done
}

// Terminal folds in the PTY heuristic: waiting says the program is blocked
// reading its terminal and quiet. Agents without hooks live by it; an agent
// whose hooks speak ignores it once they have, except Codex and aider, whose
// hooks only report turn ends: for them output after a finished turn means
// working, and a quiet terminal mid-turn (an approval prompt) means waiting.
//
// Aider runs its notifications command at the first wait after the model
// answered, which is often a confirmation ("Create new file?"), and not
// again at the prompt after it: the turn it ended goes on after the answer.
// So for aider, output after its turn ended and then a quiet terminal again
// returns that turn once more (its end moved), for the snapshot to be taken
// again with what the answer changed.
func (t *Tracker) Terminal(waiting bool, at time.Time) (continued *Turn) {
	if t.ended {
		return nil
	}
	if t.hooked {
		switch t.integration {
		case IntegrationCodex, IntegrationAider:
			switch {
			case !waiting && t.st.State == StateWaiting:
				t.set(StateWorking, "", at)
			case waiting && t.st.State == StateWorking:
				t.set(StateWaiting, "waiting for input", at)
				if n := len(t.turns); t.integration == IntegrationAider && n > 0 && !t.turns[n-1].Ended.IsZero() {
					t.turns[n-1].Ended = at
					t.set(StateWaiting, fmt.Sprintf("turn %d done", n), at)
					done := t.turns[n-1]
					return &done
				}
			}
		}
		return nil
	}
	if waiting {
		t.set(StateWaiting, "waiting for input", at)
	} else {
		t.set(StateWorking, "", at)
	}
	return nil
}

// Typed says strata typed text on the program's terminal as its next prompt
// (a queued prompt, aider's first one). Aider's only hook says a turn ended,
// without its prompt: for aider this starts the turn with the prompt typed,
// so the turn and its snapshot are labelled with it. Others report their
// prompts themselves.
func (t *Tracker) Typed(text string, at time.Time) {
	if t.ended || t.integration != IntegrationAider {
		return
	}
	prompt := strings.TrimSpace(strings.NewReplacer("\x1b[200~", "", "\x1b[201~", "").Replace(text))
	if prompt == "" {
		return
	}
	t.startTurn(prompt, at)
	t.set(StateWorking, "", at)
}

// Exit records the program's end. killed says strata stopped it on purpose
// (rollback --kill, rm --kill, K): that is an exit, not a failure.
func (t *Tracker) Exit(code int, signal string, killed bool, at time.Time) {
	if open := t.openTurn(); open != nil {
		open.Ended = at
	}
	t.ended = true
	s, reason := StateExited, "exited"
	switch {
	case killed:
		reason = "stopped by strata"
	case signal != "":
		s, reason = StateFailed, "killed by "+signal
	case code != 0:
		s, reason = StateFailed, fmt.Sprintf("exited with status %d", code)
	}
	if t.st.State == StateExited && s == StateExited {
		return // SessionEnd said so first, with its reason
	}
	t.st.State, t.st.Reason, t.st.Since = s, reason, at
}

func toolReason(e Event) string {
	tool := firstOf(e.Tool, "a tool")
	if e.ToolInput == "" {
		return tool
	}
	return tool + ": " + e.ToolInput
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Named is a status with the World (or session) it belongs to.
type Named struct {
	Name   string
	Status Status
}

// ByAttention orders statuses for "who needs you": those waiting on the person
// first, oldest wait first; then working, starting, and exited last.
func ByAttention(list []Named) {
	rank := func(s State) int {
		switch {
		case s.NeedsYou():
			return 0
		case s == StateWorking:
			return 1
		case s == StateStarting:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(list, func(a, b Named) int {
		return cmp.Or(
			cmp.Compare(rank(a.Status.State), rank(b.Status.State)),
			a.Status.Since.Compare(b.Status.Since),
			strings.Compare(a.Name, b.Name),
		)
	})
}
