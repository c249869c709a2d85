package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type fakeRecord struct {
	What string `json:"what"`
	Text string `json:"text"`
}

func readRecord(t *testing.T, path string) []fakeRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []fakeRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r fakeRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// waitRecord waits until the fake recorded what ok accepts.
func waitRecord(t *testing.T, path string, ok func([]fakeRecord) bool) []fakeRecord {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rs := readRecord(t, path)
		if ok(rs) {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("fake agent did not record what was expected; it recorded %+v", rs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two comments through the CLI, one send: the agent on the World's
// terminal receives one prompt holding both anchors and both snippets;
// the round is kept and the next one is round 2.
func TestE2EReviewRoundReachesTheAgentAsOnePrompt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := recordDir(t)
	must(t, os.WriteFile(strings.TrimPrefix(e.vars[1], "STRATA_CONFIG="), []byte(sharedCache(dir)), 0o644))
	fake := buildFake(t, "fakeclaude")
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "printf 'one\\ntwo\\nthree\\n' > a.txt; printf 'x\\ny\\nz\\n' > sub/b.txt")

	e.ok("review", "w", "add", "a.txt:2", "why two?")
	e.ok("review", "w", "add", "sub/b.txt:2-3", "rename", "these")
	e.fails(1, "no change to keep.txt", "review", "w", "add", "keep.txt:1", "x")
	e.fails(2, "PATH:LINE", "review", "w", "add", "a.txt", "x")
	list := e.ok("review", "w")
	for _, want := range []string{"a.txt:2", "> two", "why two?", "sub/b.txt:2-3", "> y", "> z", "rename these"} {
		if !strings.Contains(list, want) {
			t.Fatalf("review list lacks %q:\n%s", want, list)
		}
	}
	// No agent yet: the round stays open.
	e.fails(1, "no agent running on a terminal", "review", "w", "send")

	rec := filepath.Join(dir, "rec.jsonl")
	// HOME in the World's private /tmp: the fake's ~/.claude stays there.
	e.ok("exec", "w", "--tty", "--detach", "--env", "FAKECLAUDE_RECORD="+rec, "--env", "HOME=/tmp/fake-home", "--", fake)
	waitRecord(t, rec, func(rs []fakeRecord) bool {
		for _, r := range rs {
			if r.What == "session" {
				return true
			}
		}
		return false
	})
	out := e.ok("review", "w", "send", "--now")
	if !strings.Contains(out, "review round 1 (2 comments) sent to w") {
		t.Fatalf("send said %q", out)
	}
	waitRecord(t, rec, func(rs []fakeRecord) bool {
		for _, r := range rs {
			if r.What == "prompt" {
				return true
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond) // a second prompt, if the round were split, would be here by now
	rs := readRecord(t, rec)
	var prompts []string
	for _, r := range rs {
		if r.What == "prompt" {
			prompts = append(prompts, r.Text)
		}
	}
	if len(prompts) != 1 {
		t.Fatalf("the fake received %d prompts, want 1: %q", len(prompts), prompts)
	}
	p := prompts[0]
	for _, want := range []string{"Review round 1: 2 comments", "1. a.txt:2\n", "   > two\n", "why two?", "2. sub/b.txt:2-3\n", "   > y\n   > z\n", "rename these"} {
		if !strings.Contains(p, want) {
			t.Fatalf("prompt lacks %q:\n%s", want, p)
		}
	}

	var rounds []struct {
		N        int    `json:"round"`
		Prompt   string `json:"prompt"`
		Comments []struct {
			Path string `json:"path"`
		} `json:"comments"`
	}
	if err := json.Unmarshal([]byte(e.ok("review", "w", "--rounds", "--json")), &rounds); err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 1 || rounds[0].N != 1 || rounds[0].Prompt != p || len(rounds[0].Comments) != 2 {
		t.Fatalf("kept rounds: %+v\nreceived %q", rounds, p)
	}
	if list := e.ok("review", "w"); !strings.Contains(list, "no open comments") || !strings.Contains(list, "round 2") {
		t.Fatalf("after send: %s", list)
	}
	e.ok("review", "w", "add", "a.txt:1-3", "again")
	e.ok("review", "w", "send", "--now")
	waitRecord(t, rec, func(rs []fakeRecord) bool {
		for _, r := range rs {
			if r.What == "prompt" && strings.HasPrefix(r.Text, "Review round 2: 1 comment") {
				return true
			}
		}
		return false
	})
}

// Through an agent session (strata new --agent): a round sent while the
// agent works is queued and reaches it as one prompt, its next turn, when
// the turn ends; the round records that it was queued.
func TestE2EReviewRoundQueuedForAWorkingAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fake := buildFake(t, "fakeclaude")
	rec := filepath.Join(recordDir(t), "record.jsonl")
	cfg := sharedCache(filepath.Dir(rec)) + "[agents.claude]\ncommand = [\"" + fake + "\"]\nenv = [\"FAKECLAUDE_RECORD\"]\n"
	must(t, os.WriteFile(strings.TrimPrefix(e.vars[1], "STRATA_CONFIG="), []byte(cfg), 0o644))
	e.vars = append(e.vars, "FAKECLAUDE_RECORD="+rec, "ANTHROPIC_API_KEY=sk-ant-test-0123456789abcdefghij")
	e.ok("new", "w", "--agent", "claude", "--prompt", "[bash: printf 'x\\ny\\n' > n.txt] [think: 4s]", "--", "--permission-mode", "bypassPermissions")
	e.eventually(30*time.Second, "n.txt in the World", func() bool { return e.readWorld("w", "n.txt") == "x\ny\n" })
	e.ok("review", "w", "add", "n.txt:1", "first")
	e.ok("review", "w", "add", "n.txt:2", "second")
	out := e.ok("review", "w", "send")
	if !strings.Contains(out, "queued") {
		t.Fatalf("a round sent mid-turn was not queued: %s", out)
	}
	var prompts []string
	waitRecord(t, rec, func(rs []fakeRecord) bool {
		prompts = prompts[:0]
		for _, r := range rs {
			if r.What == "prompt" {
				prompts = append(prompts, r.Text)
			}
		}
		return len(prompts) >= 2
	})
	time.Sleep(300 * time.Millisecond)
	prompts = prompts[:0]
	for _, r := range readRecord(t, rec) {
		if r.What == "prompt" {
			prompts = append(prompts, r.Text)
		}
	}
	if len(prompts) != 2 || !strings.HasPrefix(prompts[1], "Review round 1: 2 comments") ||
		!strings.Contains(prompts[1], "1. n.txt:1\n   > x\n   first") || !strings.Contains(prompts[1], "2. n.txt:2\n   > y\n   second") {
		t.Fatalf("the agent's prompts: %q", prompts)
	}
	var rounds []struct {
		Queued bool `json:"queued"`
	}
	must(t, json.Unmarshal([]byte(e.ok("review", "w", "--rounds", "--json")), &rounds))
	if len(rounds) != 1 || !rounds[0].Queued {
		t.Fatalf("rounds: %+v", rounds)
	}
}
