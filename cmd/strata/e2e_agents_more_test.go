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
