package agent

import "testing"

// Aider rings its notifications command at the first wait after the model
// answered, here a "Create new file?" confirmation, and not again at the
// prompt after the person's y: the file the answer creates belongs to turn
// 1, so once aider has printed and gone quiet again turn 1 ends anew (for
// its snapshot to be taken again), and a later notification is turn 2.
func TestTrackerAiderTurnGoesOnAfterAConfirmation(t *testing.T) {
	tr := NewTracker(IntegrationAider, t0)
	tr.Terminal(true, at(1)) // waits for the first prompt (strata types it)
	want(t, tr, StateWaiting, "waiting for input", at(1))
	tr.Terminal(false, at(2)) // the prompt's answer streams
	ended := tr.Apply(Event{Agent: "aider", Kind: "Stop", Time: at(5)})
	if ended == nil || ended.N != 1 {
		t.Fatalf("notification: turn %+v", ended)
	}
	want(t, tr, StateWaiting, "turn 1 done", at(5))
	if again := tr.Terminal(true, at(6)); again != nil { // quiet at the confirmation
		t.Fatalf("the confirmation itself continued the turn: %+v", again)
	}
	tr.Terminal(false, at(7)) // y: aider writes the file and prints
	want(t, tr, StateWorking, "", at(7))
	again := tr.Terminal(true, at(8)) // the prompt, no notification
	if again == nil || again.N != 1 || !again.Ended.Equal(at(8)) {
		t.Fatalf("after the answer: %+v", again)
	}
	want(t, tr, StateWaiting, "turn 1 done", at(8))
	if again := tr.Terminal(true, at(9)); again != nil {
		t.Fatalf("still quiet: %+v", again)
	}
	tr.Terminal(false, at(10)) // the next prompt
	if ended := tr.Apply(Event{Agent: "aider", Kind: "Stop", Time: at(12)}); ended == nil || ended.N != 2 {
		t.Fatalf("turn 2: %+v", ended)
	}
	if tu := tr.Turns(); len(tu) != 2 || !tu[0].Ended.Equal(at(8)) {
		t.Fatalf("turns %+v", tu)
	}
	// Codex is not changed: quiet mid-turn is an approval prompt.
	cx := NewTracker(IntegrationCodex, t0)
	cx.Apply(Event{Agent: "codex", Kind: "agent-turn-complete", Time: at(1), Prompt: "go"})
	cx.Terminal(false, at(2))
	if again := cx.Terminal(true, at(3)); again != nil {
		t.Fatalf("codex: %+v", again)
	}
}

// The prompt strata types for aider (its first, or a queued one) labels the
// turn its notification ends; a bracketed paste is its text.
func TestTrackerAiderTurnTakesTheTypedPrompt(t *testing.T) {
	tr := NewTracker(IntegrationAider, t0)
	tr.Terminal(true, at(1))
	tr.Typed("[create: a.txt one]\r", at(2))
	want(t, tr, StateWorking, "", at(2))
	if ended := tr.Apply(Event{Agent: "aider", Kind: "Stop", Time: at(5)}); ended == nil || ended.N != 1 || ended.Prompt != "[create: a.txt one]" {
		t.Fatalf("turn 1: %+v", ended)
	}
	tr.Typed("\x1b[200~Review round 1: 2 comments\n1. a.txt:1\x1b[201~\r", at(6))
	if ended := tr.Apply(Event{Agent: "aider", Kind: "Stop", Time: at(9)}); ended == nil || ended.N != 2 || ended.Prompt != "Review round 1: 2 comments\n1. a.txt:1" {
		t.Fatalf("turn 2: %+v", ended)
	}
	// Claude says its prompts itself: typing starts no turn.
	cl := NewTracker(IntegrationClaude, t0)
	cl.Typed("hello\r", at(1))
	if len(cl.Turns()) != 0 {
		t.Fatalf("claude turns %+v", cl.Turns())
	}
}
