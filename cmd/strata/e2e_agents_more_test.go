package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// agentEnv is an env whose config runs the fake for preset, recording to a
// shared-cache dir; extra are further lines of the [agents.PRESET] table.
func agentEnv(t *testing.T, preset, fakeName, recordVar string, vars ...string) (*env, string) {
	t.Helper()
	e := newEnv(t)
	fake := buildFake(t, fakeName)
	recs := recordDir(t)
	rec := filepath.Join(recs, "record.jsonl")
	cfg := sharedCache(recs) + "[agents." + preset + "]\ncommand = [\"" + fake + "\"]\nenv = [\"" + recordVar + "\"]\n"
	must(t, os.WriteFile(strings.TrimPrefix(e.vars[1], "STRATA_CONFIG="), []byte(cfg), 0o644))
	e.vars = append(e.vars, recordVar+"="+rec)
	e.vars = append(e.vars, vars...)
	return e, rec
}

// hookEvents are the hook events the fake ran, in order, with their exit status.
func hookEvents(t *testing.T, rec string) (events []string, failed []string) {
	for _, r := range fakeRecords(t, rec) {
		if r["what"] != "hook" {
			continue
		}
		ev, _ := r["event"].(string)
		events = append(events, ev)
		if code, _ := r["exit"].(float64); code != 0 {
			failed = append(failed, ev+": "+r["stderr"].(string))
		}
	}
	return events, failed
}

// TestE2EAgentGeminiFlow drives fakegemini through the binary at the default
// sandbox level: its hooks are read from the per-World GEMINI_CLI_HOME (in a
// folder strata trusts for it), the prompt goes in with
// --prompt-interactive, the ToolPermission notification reads as needing
// permission with the command as the reason, y on the terminal, AfterAgent
// ends the turn and a snapshot is taken per turn; rollback to turn 1
// resumes that conversation with --resume ID, its chat as it was at turn 1.
func TestE2EAgentGeminiFlow(t *testing.T) {
	t.Parallel()
	userHome := t.TempDir()
	e, rec := agentEnv(t, "gemini", "fakegemini", "FAKEGEMINI_RECORD", "GEMINI_API_KEY=gm-test-0123456789", "HOME="+userHome)
	// The user's own ~/.gemini is not where the World's hooks go.
	must(t, os.MkdirAll(filepath.Join(userHome, ".gemini"), 0o755))
	userSettings := `{"model":{"name":"gemini-2.5-pro"}}`
	must(t, os.WriteFile(filepath.Join(userHome, ".gemini", "settings.json"), []byte(userSettings), 0o644))

	out := e.ok("new", "g1", "--agent", "gemini", "--prompt", "[bash: echo one > g1.txt]")
	if !strings.Contains(out, "started gemini in world g1") {
		t.Fatalf("new --agent gemini: %s", out)
	}
	e.ok("wait", "g1", "--for", "needs-input", "--timeout", "30s")
	ag := e.agentOf("g1")
	if ag.Status.State != "needs-permission" || !strings.Contains(ag.Status.Reason, "echo one > g1.txt") {
		t.Fatalf("at the confirmation: %+v", ag.Status)
	}
	conv := ag.Status.SessionID
	if conv == "" || ag.Status.Turn != 1 {
		t.Fatalf("no conversation id or turn at the confirmation: %+v", ag.Status)
	}
	argvs := argvRecords(t, rec)
	if len(argvs) != 1 || !slices.Contains(argvs[0], "--prompt-interactive") || argvs[0][len(argvs[0])-1] != "[bash: echo one > g1.txt]" {
		t.Fatalf("gemini started with %q", argvs)
	}
	e.ok("send", "g1", "--now", "y")
	e.eventually(30*time.Second, "turn 1's snapshot", func() bool {
		ag = e.agentOf("g1")
		return ag.Snapshots["1"] != ""
	})
	if ag.Status.State != "waiting" || ag.Status.Turn != 1 || len(ag.Turns) != 1 || ag.Turns[0].Prompt != "[bash: echo one > g1.txt]" {
		t.Fatalf("after turn 1: %+v %+v", ag.Status, ag.Turns)
	}
	if got := e.readWorld("g1", "g1.txt"); got != "one\n" {
		t.Fatalf("g1.txt in the World: %q", got)
	}
	turn1 := ag.Snapshots["1"]
	events, failed := hookEvents(t, rec)
	want := []string{"SessionStart", "BeforeAgent", "Notification", "BeforeTool", "AfterTool", "AfterAgent"}
	if !slices.Equal(events, want) || len(failed) > 0 {
		t.Fatalf("hooks run %q (failed %q), want %q", events, failed, want)
	}
	if data, _ := os.ReadFile(filepath.Join(userHome, ".gemini", "settings.json")); string(data) != userSettings {
		t.Fatalf("the user's gemini settings changed: %s", data)
	}

	// A second turn, also asking.
	e.ok("send", "g1", "[bash: echo two > g2.txt]")
	e.eventually(30*time.Second, "turn 2's confirmation", func() bool {
		ag = e.agentOf("g1")
		return ag.Status.State == "needs-permission" && ag.Status.Turn == 2
	})
	if !strings.Contains(ag.Status.Reason, "echo two > g2.txt") {
		t.Fatalf("turn 2's reason: %+v", ag.Status)
	}
	e.ok("send", "g1", "--now", "y")
	e.eventually(30*time.Second, "turn 2's snapshot", func() bool { return e.agentOf("g1").Snapshots["2"] != "" })

	out = e.ok("rollback", "g1", turn1, "--kill")
	if !strings.Contains(out, "resumed gemini conversation "+conv) {
		t.Fatalf("rollback did not resume: %s", out)
	}
	if _, err := os.Stat(filepath.Join(e.home, "worlds", "g1", "upper", "g2.txt")); err == nil {
		t.Fatalf("g2.txt survived the rollback to turn 1")
	}
	var last []string
	e.eventually(30*time.Second, "the resumed gemini", func() bool {
		argvs = argvRecords(t, rec)
		last = argvs[len(argvs)-1]
		return len(argvs) == 2
	})
	if i := slices.Index(last, "--resume"); i < 0 || i+1 >= len(last) || last[i+1] != conv {
		t.Fatalf("the resumed gemini got %q, want --resume %s", last, conv)
	}
	// It found the chat, as it was at turn 1, and said so in SessionStart.
	var resumed map[string]any
	e.eventually(30*time.Second, "the resumed session", func() bool {
		for _, r := range fakeRecords(t, rec) {
			if r["what"] == "session" && r["source"] == "resume" {
				resumed = r
			}
		}
		return resumed != nil
	})
	if resumed["session_id"] != conv || resumed["messages"].(float64) != 2 {
		t.Fatalf("resumed session: %v (want %s with turn 1's 2 messages)", resumed, conv)
	}
	e.eventually(30*time.Second, "the resumed agent to wait", func() bool {
		ag = e.agentOf("g1")
		return ag.Status.State == "waiting" && ag.Status.SessionID == conv
	})
	out = e.ok("kill", "g1")
	if !strings.Contains(out, "killed by strata") {
		t.Fatalf("kill: %s", out)
	}
	e.ok("wait", "g1", "--for", "exit", "--timeout", "30s")
	var sawEnd bool
	for _, r := range fakeRecords(t, rec) {
		if r["what"] == "hook" && r["event"] == "SessionEnd" {
			sawEnd = true
		}
	}
	if ag = e.agentOf("g1"); ag.Status.State != "exited" || !sawEnd {
		t.Fatalf("after kill: %+v (SessionEnd hook ran: %v)", ag.Status, sawEnd)
	}
}

// recordsOf are the fake's records of kind what.
func recordsOf(t *testing.T, rec, what string) []map[string]any {
	var out []map[string]any
	for _, r := range fakeRecords(t, rec) {
		if r["what"] == what {
			out = append(out, r)
		}
	}
	return out
}

// TestE2EAgentAiderFlow drives fakeaider: the first prompt is typed on its
// terminal when it first waits; its "Create new file?" confirmation is the
// first wait after the LLM answered, so aider's notifications command runs
// there (not at the next prompt): the World reads as needing you, y on the
// terminal creates the file, and turn 1's snapshot holds the file even so.
// A second turn; rollback to turn 1 restarts aider plainly (it has no
// resume) and says so, typing no prompt.
func TestE2EAgentAiderFlow(t *testing.T) {
	t.Parallel()
	e, rec := agentEnv(t, "aider", "fakeaider", "FAKEAIDER_RECORD", "ANTHROPIC_API_KEY=sk-ant-test-0123456789abcdefghij", "HOME="+t.TempDir())

	out := e.ok("new", "a1", "--agent", "aider", "--prompt", "[create: a1.txt one]")
	if !strings.Contains(out, "started aider in world a1") {
		t.Fatalf("new --agent aider: %s", out)
	}
	var ag agentJSON
	e.eventually(30*time.Second, "the typed prompt's confirmation", func() bool {
		return len(recordsOf(t, rec, "notify")) == 1
	})
	if ps := recordsOf(t, rec, "prompt"); len(ps) != 1 || ps[0]["text"] != "[create: a1.txt one]" {
		t.Fatalf("aider received prompts %v", ps)
	}
	argv := argvRecords(t, rec)[0]
	if !slices.Contains(argv, "--notifications") || !slices.Contains(argv, "--notifications-command") || slices.Contains(argv, "[create: a1.txt one]") {
		t.Fatalf("aider started with %q", argv)
	}
	e.ok("wait", "a1", "--for", "needs-input", "--timeout", "30s")
	// wait returns at the notification; the question aider prints after it
	// reads as work until its terminal is quiet again, which under load can
	// be a while: the World settles as needing you.
	e.eventually(30*time.Second, "a1 waiting at the confirmation", func() bool {
		ag = e.agentOf("a1")
		return slices.Contains([]string{"waiting", "needs-permission"}, ag.Status.State)
	})
	e.ok("send", "a1", "--now", "y")
	e.eventually(30*time.Second, "a1.txt", func() bool { return e.readWorld("a1", "a1.txt") == "one\n" })
	// Turn 1's snapshot is the state after the answer, with a1.txt.
	e.eventually(30*time.Second, "turn 1's snapshot with a1.txt", func() bool {
		ag = e.agentOf("a1")
		return ag.Snapshots["1"] != "" && strings.Contains(e.ok("snapdiff", "a1", ag.Snapshots["0"], ag.Snapshots["1"]), "a1.txt")
	})
	turn1 := ag.Snapshots["1"]
	if ag.Status.State != "waiting" || len(ag.Turns) != 1 || ag.Turns[0].Prompt != "[create: a1.txt one]" {
		t.Fatalf("after turn 1: %+v %+v", ag.Status, ag.Turns)
	}

	e.ok("send", "a1", "[create: a2.txt two]")
	e.eventually(30*time.Second, "turn 2's confirmation", func() bool { return len(recordsOf(t, rec, "notify")) == 2 })
	e.ok("send", "a1", "--now", "y")
	e.eventually(30*time.Second, "turn 2's snapshot", func() bool {
		ag = e.agentOf("a1")
		return ag.Snapshots["2"] != "" && e.readWorld("a1", "a2.txt") == "two\n"
	})

	out = e.ok("rollback", "a1", turn1, "--kill")
	if !strings.Contains(out, "aider cannot resume") || !strings.Contains(out, "started it afresh") {
		t.Fatalf("rollback to an aider turn: %s", out)
	}
	if got := e.readWorld("a1", "a1.txt"); got != "one\n" {
		t.Fatalf("a1.txt after the rollback: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.home, "worlds", "a1", "upper", "a2.txt")); err == nil {
		t.Fatalf("a2.txt survived the rollback to turn 1")
	}
	e.eventually(30*time.Second, "the restarted aider", func() bool { return len(argvRecords(t, rec)) == 2 })
	e.eventually(30*time.Second, "the restarted aider to wait", func() bool {
		return strings.Contains(e.ok("logs", "a1"), "> ")
	})
	time.Sleep(time.Second) // a prompt typed on its first wait would be recorded by now
	if ps := recordsOf(t, rec, "prompt"); len(ps) != 2 {
		t.Fatalf("the restarted aider was given a prompt: %v", ps)
	}
	e.ok("kill", "a1", "--force")
	e.ok("wait", "a1", "--for", "exit", "--timeout", "30s")
}

// TestE2EAgentOpencodeFlow: opencode has no hooks, so its status is the
// terminal heuristic alone: launched with --prompt, working while it
// streams, waiting once it blocks on the terminal, input reaches it (and
// makes it work again), exited on /exit.
func TestE2EAgentOpencodeFlow(t *testing.T) {
	t.Parallel()
	e, rec := agentEnv(t, "opencode", "fakeopencode", "FAKEOPENCODE_RECORD", "OPENAI_API_KEY=sk-test-opencode", "HOME="+t.TempDir())

	out := e.ok("new", "o1", "--agent", "opencode", "--prompt", "[slow: 4s] hello")
	if !strings.Contains(out, "started opencode in world o1") {
		t.Fatalf("new --agent opencode: %s", out)
	}
	argv := argvRecords(t, rec)
	e.eventually(30*time.Second, "opencode to start", func() bool { argv = argvRecords(t, rec); return len(argv) == 1 })
	if i := slices.Index(argv[0], "--prompt"); i < 0 || i+1 >= len(argv[0]) || argv[0][i+1] != "[slow: 4s] hello" {
		t.Fatalf("opencode started with %q", argv[0])
	}
	var ag agentJSON
	e.eventually(30*time.Second, "working while it streams", func() bool {
		ag = e.agentOf("o1")
		return ag.Status.State == "working" && len(recordsOf(t, rec, "answered")) == 0
	})
	e.ok("wait", "o1", "--for", "needs-input", "--timeout", "30s")
	if ag = e.agentOf("o1"); ag.Status.State != "waiting" || len(recordsOf(t, rec, "answered")) != 1 {
		t.Fatalf("after the first answer: %+v", ag.Status)
	}
	e.ok("send", "o1", "[slow: 3s] more")
	e.eventually(30*time.Second, "the input to arrive", func() bool {
		in := recordsOf(t, rec, "input")
		return len(in) == 1 && in[0]["text"] == "[slow: 3s] more"
	})
	e.eventually(30*time.Second, "working on the second prompt", func() bool {
		ag = e.agentOf("o1")
		return ag.Status.State == "working" && len(recordsOf(t, rec, "answered")) == 1
	})
	e.eventually(30*time.Second, "waiting after the second answer", func() bool {
		ag = e.agentOf("o1")
		return ag.Status.State == "waiting" && len(recordsOf(t, rec, "answered")) == 2
	})
	e.ok("send", "o1", "--now", "/exit")
	e.ok("wait", "o1", "--for", "exit", "--timeout", "30s")
	if ag = e.agentOf("o1"); ag.Status.State != "exited" {
		t.Fatalf("after /exit: %+v", ag.Status)
	}
}

// TestE2EAgentReviewRoundPerPreset: a review round of two comments reaches
// each new preset's fake as one prompt (one bracketed paste), whatever its
// status integration.
func TestE2EAgentReviewRoundPerPreset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ preset, fake, recordVar, key string }{
		{"gemini", "fakegemini", "FAKEGEMINI_RECORD", "GEMINI_API_KEY=gm-test-0123456789"},
		{"aider", "fakeaider", "FAKEAIDER_RECORD", "ANTHROPIC_API_KEY=sk-ant-test-0123456789abcdefghij"},
		{"opencode", "fakeopencode", "FAKEOPENCODE_RECORD", "OPENAI_API_KEY=sk-test-opencode"},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			t.Parallel()
			e, rec := agentEnv(t, tc.preset, tc.fake, tc.recordVar, tc.key, "HOME="+t.TempDir())
			e.ok("new", "r")
			e.ok("exec", "r", "--", "sh", "-c", "printf 'one\\ntwo\\n' > n.txt")
			e.ok("run", "r", "--agent", tc.preset)
			e.ok("wait", "r", "--for", "needs-input", "--timeout", "30s")
			e.ok("review", "r", "add", "n.txt:1", "first")
			e.ok("review", "r", "add", "n.txt:2", "second")
			out := e.ok("review", "r", "send")
			if !strings.Contains(out, "review round 1 (2 comments) sent to r") {
				t.Fatalf("review send: %s", out)
			}
			waitRecord(t, rec, func(rs []fakeRecord) bool {
				return slices.ContainsFunc(rs, func(r fakeRecord) bool { return r.What == "prompt" })
			})
			time.Sleep(500 * time.Millisecond) // a second prompt, if the round were split, would be here by now
			var prompts []string
			for _, r := range readRecord(t, rec) {
				if r.What == "prompt" {
					prompts = append(prompts, r.Text)
				}
			}
			if len(prompts) != 1 || !strings.HasPrefix(prompts[0], "Review round 1: 2 comments") ||
				!strings.Contains(prompts[0], "1. n.txt:1\n   > one\n   first") || !strings.Contains(prompts[0], "2. n.txt:2\n   > two\n   second") {
				t.Fatalf("%s received %q", tc.preset, prompts)
			}
			e.ok("kill", "r", "--force")
			e.ok("wait", "r", "--for", "exit", "--timeout", "30s")
		})
	}
}
