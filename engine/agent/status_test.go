package agent

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func want(t *testing.T, tr *Tracker, s State, reason string, since time.Time) {
	t.Helper()
	st := tr.Status()
	if st.State != s || st.Reason != reason || !st.Since.Equal(since) {
		t.Fatalf("status %s %q since %s, want %s %q since %s", st.State, st.Reason, st.Since.Sub(t0), s, reason, since.Sub(t0))
	}
}

func claude(kind string, sec int, f ...func(*Event)) Event {
	e := Event{Agent: "claude", Kind: kind, Time: at(sec), SessionID: "conv-1"}
	for _, fn := range f {
		fn(&e)
	}
	return e
}

func TestTrackerClaudeTurn(t *testing.T) {
	tr := NewTracker(IntegrationClaude, t0)
	want(t, tr, StateStarting, "", t0)
	tr.Apply(claude("SessionStart", 1, func(e *Event) { e.Source = "startup" }))
	want(t, tr, StateWaiting, "ready for a prompt", at(1))
	tr.Apply(claude("UserPromptSubmit", 2, func(e *Event) { e.Prompt = "fix the build" }))
	want(t, tr, StateWorking, "", at(2))
	tr.Apply(claude("PreToolUse", 3, func(e *Event) { e.Tool, e.ToolInput = "Bash", "rm -rf build" }))
	want(t, tr, StateWorking, "running Bash: rm -rf build", at(3))
	tr.Apply(claude("PermissionRequest", 4, func(e *Event) { e.Tool, e.ToolInput = "Bash", "rm -rf build" }))
	want(t, tr, StatePermission, "allow Bash: rm -rf build?", at(4))
	// The Notification that follows must not reset how long it has waited.
	tr.Apply(claude("Notification", 5, func(e *Event) {
		e.Notification, e.Message = "permission_prompt", "Claude needs your permission to use Bash"
	}))
	want(t, tr, StatePermission, "allow Bash: rm -rf build?", at(4))
	tr.Apply(claude("PostToolUse", 9, func(e *Event) { e.Tool = "Bash" }))
	want(t, tr, StateWorking, "", at(9))
	// A compaction's SessionStart mid-turn is not "ready for a prompt".
	tr.Apply(claude("SessionStart", 10, func(e *Event) { e.Source = "compact" }))
	want(t, tr, StateWorking, "", at(9))
	ended := tr.Apply(claude("Stop", 12, func(e *Event) { e.Message = "Fixed." }))
	want(t, tr, StateWaiting, "turn 1 done", at(12))
	if ended == nil || ended.N != 1 || ended.Prompt != "fix the build" || !ended.Started.Equal(at(2)) || !ended.Ended.Equal(at(12)) || ended.SessionID != "conv-1" || ended.Reply != "Fixed." {
		t.Fatalf("ended turn %+v", ended)
	}
	tr.Apply(claude("Notification", 72, func(e *Event) { e.Notification = "idle_prompt" }))
	want(t, tr, StateWaiting, "turn 1 done", at(12))

	tr.Apply(claude("UserPromptSubmit", 80, func(e *Event) { e.Prompt = "and the docs" }))
	tr.Apply(claude("Notification", 81, func(e *Event) { e.Notification, e.Message = "elicitation_dialog", "Which file?" }))
	want(t, tr, StateQuestion, "Which file?", at(81))
	tr.Apply(claude("PreToolUse", 82, func(e *Event) { e.Tool, e.ToolInput = "Edit", "/src/a.go" }))
	// Notification without a PermissionRequest names the pending tool.
	tr.Apply(claude("Notification", 83, func(e *Event) { e.Notification = "permission_prompt" }))
	want(t, tr, StatePermission, "allow Edit: /src/a.go?", at(83))
	tr.Apply(claude("StopFailure", 84, func(e *Event) { e.Error = "rate_limit" }))
	want(t, tr, StateFailed, "rate_limit", at(84))
	tr.Apply(claude("SessionEnd", 90, func(e *Event) { e.Source = "prompt_input_exit" }))
	want(t, tr, StateExited, "prompt_input_exit", at(90))
	tr.Exit(0, "", false, at(91))
	want(t, tr, StateExited, "prompt_input_exit", at(90))

	turns := tr.Turns()
	if len(turns) != 2 || turns[1].Prompt != "and the docs" || !turns[1].Failed || tr.Status().Turn != 2 || tr.Status().SessionID != "conv-1" {
		t.Fatalf("turns %+v status %+v", turns, tr.Status())
	}
}

// The PTY guess runs before the first hook: a program that draws while it
// starts reads as working. Its SessionStart must still say ready, or a
// resumed agent stays "working" forever (the CI flake of TestE2EAgentClaudeFlow).
func TestTrackerSessionStartAfterTerminalGuess(t *testing.T) {
	tr := NewTracker(IntegrationClaude, t0)
	tr.Terminal(false, at(1))
	want(t, tr, StateWorking, "", at(1))
	tr.Apply(claude("SessionStart", 2, func(e *Event) { e.Source = "resume" }))
	want(t, tr, StateWaiting, "ready for a prompt", at(2))
	// Once hooks speak, the guess no longer moves a hook-capable agent.
	tr.Terminal(false, at(3))
	want(t, tr, StateWaiting, "ready for a prompt", at(2))
}

// Launched with a prompt on its command line, the agent's SessionStart
// starts that turn: between it and UserPromptSubmit nothing waits on the
// person (wait --for needs-input returned there, at "ready for a prompt",
// and found the agent working: the sandboxed flow's flake). /clear later
// is ready for a prompt again.
func TestTrackerSessionStartWithLaunchPrompt(t *testing.T) {
	tr := NewTracker(IntegrationClaude, t0)
	tr.ExpectPrompt()
	tr.Apply(claude("SessionStart", 1, func(e *Event) { e.Source = "startup" }))
	want(t, tr, StateWorking, "starting the first turn", at(1))
	if tr.Status().State.NeedsYou() {
		t.Fatal("between SessionStart and the launch prompt the agent needs the person")
	}
	tr.Apply(claude("UserPromptSubmit", 2, func(e *Event) { e.Prompt = "fix it" }))
	want(t, tr, StateWorking, "", at(2))
	tr.Apply(claude("Stop", 3))
	want(t, tr, StateWaiting, "turn 1 done", at(3))
	tr.Apply(claude("SessionStart", 4, func(e *Event) { e.Source = "clear" }))
	want(t, tr, StateWaiting, "ready for a prompt", at(4))
	// A resumed session (no launch prompt) is ready at once.
	tr = NewTracker(IntegrationClaude, t0)
	tr.Apply(claude("SessionStart", 1, func(e *Event) { e.Source = "resume" }))
	want(t, tr, StateWaiting, "ready for a prompt", at(1))
}

func TestTrackerExit(t *testing.T) {
	for _, c := range []struct {
		code   int
		signal string
		killed bool
		state  State
		reason string
	}{
		{0, "", false, StateExited, "exited"},
		{3, "", false, StateFailed, "exited with status 3"},
		{0, "SIGSEGV", false, StateFailed, "killed by SIGSEGV"},
		{0, "SIGKILL", true, StateExited, "stopped by strata"},
	} {
		tr := NewTracker(IntegrationClaude, t0)
		tr.Apply(claude("UserPromptSubmit", 1, func(e *Event) { e.Prompt = "p" }))
		tr.Exit(c.code, c.signal, c.killed, at(5))
		want(t, tr, c.state, c.reason, at(5))
		if tu := tr.Turns(); !tu[0].Ended.Equal(at(5)) {
			t.Errorf("open turn not closed at exit: %+v", tu)
		}
		// Nothing after the end changes it.
		tr.Apply(claude("UserPromptSubmit", 6, func(e *Event) { e.Prompt = "late" }))
		if tr.Status().State != c.state {
			t.Errorf("state after exit moved to %s", tr.Status().State)
		}
	}
	// A crash after SessionEnd is still a failure.
	tr := NewTracker(IntegrationClaude, t0)
	tr.Apply(claude("SessionEnd", 1))
	tr.Exit(1, "", false, at(2))
	want(t, tr, StateFailed, "exited with status 1", at(2))
}

func TestTrackerTerminalFallback(t *testing.T) {
	sh := NewTracker(IntegrationNone, t0)
	sh.Terminal(true, at(3))
	want(t, sh, StateWaiting, "waiting for input", at(3))
	sh.Terminal(true, at(4))
	want(t, sh, StateWaiting, "waiting for input", at(3))
	sh.Terminal(false, at(5))
	want(t, sh, StateWorking, "", at(5))

	// Claude before its hooks speak lives by the heuristic, then ignores it.
	cl := NewTracker(IntegrationClaude, t0)
	cl.Terminal(true, at(1))
	want(t, cl, StateWaiting, "waiting for input", at(1))
	cl.Apply(claude("UserPromptSubmit", 2))
	cl.Terminal(true, at(3)) // blocked on the terminal while a tool runs: still working
	want(t, cl, StateWorking, "", at(2))

	// Codex's hook only reports turn ends: output afterwards means working.
	cx := NewTracker(IntegrationCodex, t0)
	ended := cx.Apply(Event{Agent: "codex", Kind: "agent-turn-complete", Time: at(10), SessionID: "th", Prompt: "go", Message: "ok"})
	want(t, cx, StateWaiting, "turn 1 done", at(10))
	if ended == nil || ended.Prompt != "go" || ended.SessionID != "th" {
		t.Fatalf("codex turn %+v", ended)
	}
	cx.Terminal(true, at(11))
	want(t, cx, StateWaiting, "turn 1 done", at(10))
	cx.Terminal(false, at(12))
	want(t, cx, StateWorking, "", at(12))
	cx.Terminal(true, at(14)) // an approval prompt mid-turn: notify says nothing
	want(t, cx, StateWaiting, "waiting for input", at(14))
	cx.Terminal(false, at(15))
	want(t, cx, StateWorking, "", at(15))
	cx.Apply(Event{Agent: "codex", Kind: "agent-turn-complete", Time: at(20), Prompt: "more"})
	if tu := cx.Turns(); len(tu) != 2 || !tu[1].Started.Equal(at(10)) || tu[1].Prompt != "more" {
		t.Fatalf("codex turns %+v", tu)
	}
}

func TestTrackerUsage(t *testing.T) {
	tr := NewTracker(IntegrationClaude, t0)
	tr.Apply(claude("Stop", 1, func(e *Event) { e.Usage = &Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.25} }))
	tr.Apply(claude("Stop", 2, func(e *Event) { e.Usage = &Usage{InputTokens: 1, CostUSD: 0.5} }))
	if u := tr.Status().Usage; u.InputTokens != 11 || u.OutputTokens != 5 || u.CostUSD != 0.75 {
		t.Errorf("usage %+v", u)
	}
}

func TestByAttention(t *testing.T) {
	list := []Named{
		{"exited", Status{State: StateExited, Since: at(0)}},
		{"working", Status{State: StateWorking, Since: at(0)}},
		{"perm-new", Status{State: StatePermission, Since: at(30)}},
		{"waiting-old", Status{State: StateWaiting, Since: at(5)}},
		{"failed", Status{State: StateFailed, Since: at(20)}},
		{"starting", Status{State: StateStarting, Since: at(0)}},
		{"asking", Status{State: StateQuestion, Since: at(10)}},
	}
	ByAttention(list)
	var got []string
	for _, n := range list {
		got = append(got, n.Name)
	}
	if w := []string{"waiting-old", "asking", "failed", "perm-new", "working", "starting", "exited"}; !slices.Equal(got, w) {
		t.Errorf("order %q, want %q", got, w)
	}
}
