package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeBinDir is where the fakes are built: outside /tmp, which a sandboxed
// World replaces with a private one, on a path the World sees read-only
// (the host's /var/cache), the way a user's installed agent is seen.
const fakeBinDir = "/var/cache/strata-test/fakes"

var (
	fakeMu   sync.Mutex
	fakeBins = map[string]string{}
)

// buildFake builds testdata/agents/NAME once per test process, into
// fakeBinDir/run-PID (left by a process that has ended, such a dir is
// removed by the next).
func buildFake(t *testing.T, name string) string {
	t.Helper()
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if bin, ok := fakeBins[name]; ok {
		return bin
	}
	dir := filepath.Join(fakeBinDir, "run-"+strconv.Itoa(os.Getpid()))
	if len(fakeBins) == 0 {
		old, _ := filepath.Glob(filepath.Join(fakeBinDir, "run-*"))
		for _, d := range old {
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "run-"))
			if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) != nil {
				_ = os.RemoveAll(d)
			}
		}
	}
	must(t, os.MkdirAll(dir, 0o755))
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, "../../testdata/agents/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	fakeBins[name] = bin
	return bin
}

// recordDir is where the fakes write their records: a dir the host reads
// and every World writes in place, declared as a shared cache (a sandboxed
// World's /tmp is its own).
func recordDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "records")
	must(t, os.MkdirAll(dir, 0o777))
	return dir
}

// sharedCache is the [boundary] table declaring dir a shared cache.
func sharedCache(dir string) string {
	return "[boundary]\nshared_caches = [\"" + dir + "\"]\n\n"
}

// agentJSON is what ls --json says of a World's agent.
type agentJSON struct {
	Session string `json:"session"`
	Preset  string `json:"preset"`
	Status  struct {
		State     string `json:"state"`
		Reason    string `json:"reason"`
		SessionID string `json:"session_id"`
		Turn      int    `json:"turn"`
	} `json:"status"`
	Turns      []turnJSON        `json:"turns"`
	Snapshots  map[string]string `json:"snapshots"`
	Supervised bool              `json:"supervised"`
}

type turnJSON struct {
	N         int    `json:"n"`
	Prompt    string `json:"prompt"`
	SessionID string `json:"session_id"`
	EndedAt   string `json:"ended"`
}

func (t turnJSON) Ended() bool { return t.EndedAt != "" }

func (e *env) agentOf(world string) agentJSON {
	e.t.Helper()
	var infos []struct {
		Name  string     `json:"name"`
		Agent *agentJSON `json:"agent"`
	}
	must(e.t, json.Unmarshal([]byte(e.ok("ls", "--all", "--json")), &infos))
	for _, i := range infos {
		if i.Name == world && i.Agent != nil {
			return *i.Agent
		}
	}
	e.t.Fatalf("ls --json: world %s has no agent", world)
	return agentJSON{}
}

// eventually polls cond for up to d.
func (e *env) eventually(d time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fakeRecords reads what the fake agent recorded ({"what": ...} lines).
func fakeRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func argvRecords(t *testing.T, path string) [][]string {
	var out [][]string
	for _, r := range fakeRecords(t, path) {
		if r["what"] != "argv" {
			continue
		}
		var argv []string
		for _, a := range r["argv"].([]any) {
			argv = append(argv, a.(string))
		}
		out = append(out, argv)
	}
	return out
}

// TestE2EAgentClaudeFlow drives fakeclaude through the binary: launch with
// a prompt, needs permission with the command as the reason, y on the
// terminal, turn done, a snapshot per turn, a queued second prompt, and a
// rollback to turn 1 that resumes turn 1's conversation.
func TestE2EAgentClaudeFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fake := buildFake(t, "fakeclaude")
	recs := recordDir(t)
	rec := filepath.Join(recs, "record.jsonl")
	cfg := sharedCache(recs) + "[agents.claude]\ncommand = [\"" + fake + "\"]\nenv = [\"FAKECLAUDE_RECORD\"]\n"
	must(t, os.WriteFile(strings.TrimPrefix(e.vars[1], "STRATA_CONFIG="), []byte(cfg), 0o644))
	e.vars = append(e.vars, "FAKECLAUDE_RECORD="+rec, "ANTHROPIC_API_KEY=sk-ant-test-0123456789abcdefghij")

	out := e.ok("new", "w1", "--agent", "claude", "--prompt", "[bash: echo one > t1.txt]")
	if !strings.Contains(out, "started claude in world w1") {
		t.Fatalf("new --agent: %s", out)
	}
	// The hook reaches strata from inside the World: working, then permission.
	out = e.ok("wait", "w1", "--for", "needs-input", "--timeout", "30s")
	ag := e.agentOf("w1")
	if ag.Status.State != "needs-permission" || !strings.Contains(ag.Status.Reason, "echo one > t1.txt") {
		t.Fatalf("after launch: %+v (wait said %q)", ag.Status, out)
	}
	conv := ag.Status.SessionID
	// Claude's folder trust is seeded in the World's agent home, not the real one.
	var trust struct {
		Projects map[string]struct {
			Trusted bool `json:"hasTrustDialogAccepted"`
		} `json:"projects"`
	}
	data, err := os.ReadFile(filepath.Join(e.home, "worlds", "w1", "agent-home", ".claude.json"))
	must(t, err)
	must(t, json.Unmarshal(data, &trust))
	if !trust.Projects[e.source].Trusted {
		t.Fatalf("no trust entry for %s: %s", e.source, data)
	}
	if conv == "" {
		t.Fatalf("no conversation id: %+v", ag)
	}
	// The person answers y on the terminal.
	e.ok("send", "w1", "--now", "y")
	e.ok("wait", "w1", "--for", "done", "--timeout", "30s")
	e.eventually(30*time.Second, "turn 1's snapshot", func() bool {
		ag = e.agentOf("w1")
		return ag.Snapshots["1"] != ""
	})
	if ag.Status.State != "waiting" || ag.Status.Turn != 1 {
		t.Fatalf("after turn 1: %+v", ag.Status)
	}
	if got := e.readWorld("w1", "t1.txt"); got != "one\n" {
		t.Fatalf("t1.txt in the World: %q", got)
	}
	tl := e.ok("timeline", "w1")
	if !strings.Contains(tl, "turn 1: [bash: echo one > t1.txt]") || !strings.Contains(tl, "before turn 1") {
		t.Fatalf("timeline lacks the turn snapshots:\n%s", tl)
	}
	turn1 := ag.Snapshots["1"]
	// Usage from Claude's transcript in the World's agent home.
	var usage []struct {
		Name  string `json:"name"`
		Usage *struct {
			In  int64 `json:"input_tokens"`
			Out int64 `json:"output_tokens"`
		} `json:"agent_usage"`
	}
	must(t, json.Unmarshal([]byte(e.ok("ls", "--all", "--json")), &usage))
	if len(usage) != 1 || usage[0].Usage == nil || usage[0].Usage.Out == 0 {
		t.Fatalf("ls --json usage after turn 1: %+v", usage)
	}
	if show := e.ok("show", "w1"); !strings.Contains(show, "usage:") || !strings.Contains(show, "needs-permission") && !strings.Contains(show, "waiting") {
		t.Fatalf("show lacks the agent:\n%s", show)
	}
	if ls := e.ok("ls", "--all"); !strings.Contains(ls, "agents: ") {
		t.Fatalf("ls lacks the usage total:\n%s", ls)
	}

	// A second prompt, then another sent while it works is queued.
	e.ok("send", "w1", "[bash: echo two > t2.txt]")
	e.eventually(30*time.Second, "turn 2's permission prompt", func() bool {
		ag = e.agentOf("w1")
		return ag.Status.State == "needs-permission" && ag.Status.Turn == 2
	})
	out = e.ok("send", "w1", "third prompt")
	if !strings.Contains(out, "queued") {
		t.Fatalf("send to an agent waiting for permission should queue: %s", out)
	}
	e.ok("send", "w1", "--now", "y")
	e.eventually(30*time.Second, "turn 3 done", func() bool {
		ag = e.agentOf("w1")
		return ag.Status.Turn == 3 && ag.Status.State == "waiting"
	})
	if ag.Turns[2].Prompt != "third prompt" {
		t.Fatalf("queued prompt did not become turn 3: %+v", ag.Turns)
	}
	old := ag.Session

	// Rollback to turn 1: files back, and the agent resumes turn 1's conversation.
	out = e.ok("rollback", "w1", turn1, "--kill")
	if !strings.Contains(out, "resumed claude conversation "+conv) {
		t.Fatalf("rollback did not resume: %s", out)
	}
	if _, err := os.Stat(filepath.Join(e.home, "worlds", "w1", "upper", "t2.txt")); err == nil {
		t.Fatalf("t2.txt survived the rollback to turn 1")
	}
	var last []string
	e.eventually(30*time.Second, "the restarted agent", func() bool {
		argvs := argvRecords(t, rec)
		last = argvs[len(argvs)-1]
		return len(argvs) == 2
	})
	if i := slices.Index(last, "--resume"); i < 0 || last[i+1] != conv {
		t.Fatalf("the restarted agent got %q, want --resume %s", last, conv)
	}
	// The conversation went back with the files: the transcript it resumes
	// is turn 1's, without turns 2 and 3.
	transcript, err := os.ReadFile(filepath.Join(e.home, "worlds", "w1", "agent-home", ".claude", "projects", strings.ReplaceAll(e.source, "/", "-"), conv+".jsonl"))
	must(t, err)
	if !strings.Contains(string(transcript), "echo one") || strings.Contains(string(transcript), "echo two") || strings.Contains(string(transcript), "third prompt") {
		t.Fatalf("the resumed conversation is not turn 1's:\n%s", transcript)
	}
	e.ok("wait", "w1", "--for", "done", "--timeout", "30s")
	// The killed session is reported as stopped by strata, not failed.
	var ss []struct {
		ID        string `json:"id"`
		State     string `json:"state"`
		Attention string `json:"attention"`
		Killed    bool   `json:"killed_by_strata"`
		Agent     *struct {
			State  string `json:"state"`
			Reason string `json:"reason"`
		} `json:"agent"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w1", "--json")), &ss))
	found := false
	for _, s := range ss {
		if s.ID != old {
			continue
		}
		found = true
		if !s.Killed || s.Agent == nil || s.Agent.State != "exited" {
			t.Fatalf("killed session: %+v agent %+v", s, s.Agent)
		}
	}
	if !found {
		t.Fatalf("old session %s not listed", old)
	}
	// K: TERM ends fakeclaude (SessionEnd); exited, not failed.
	out = e.ok("kill", "w1")
	if !strings.Contains(out, "killed by strata") {
		t.Fatalf("kill: %s", out)
	}
	e.ok("wait", "w1", "--for", "exit", "--timeout", "30s")
	if ag = e.agentOf("w1"); ag.Status.State != "exited" {
		t.Fatalf("after kill: %+v", ag.Status)
	}
	// events carries the state changes.
	ev := e.ok("events", "--json", "--world", "w1")
	if !strings.Contains(ev, `"agent.state"`) || !strings.Contains(ev, `"needs-permission"`) {
		t.Fatalf("events lack agent.state changes:\n%s", ev)
	}
}

// readWorld reads a file as the World sees it (its upper, else the source).
func (e *env) readWorld(world, rel string) string {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.home, "worlds", world, "upper", rel))
	if err != nil {
		data, err = os.ReadFile(filepath.Join(e.source, rel))
		if err != nil {
			return ""
		}
	}
	return string(data)
}

// strata __hook records the event and prints nothing; every failure is exit
// 1, never 2 (Claude blocks the action on 2), config mistakes included.
func TestE2EHookCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(env []string, stdin string, args ...string) (string, string, int) {
		c := exec.Command(strataBin, append([]string{"__hook"}, args...)...)
		c.Env = env
		c.Stdin = strings.NewReader(stdin)
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return out.String(), errb.String(), code
	}
	badCfg := filepath.Join(t.TempDir(), "config.toml")
	must(t, os.WriteFile(badCfg, []byte("nonsense = 1\n"), 0o644))
	env := []string{"STRATA_HOOK_DIR=" + dir, "STRATA_CONFIG=" + badCfg}
	out, errs, code := run(env, `{"session_id":"s1","hook_event_name":"Stop"}`, "claude", "Stop")
	if code != 0 || out != "" {
		t.Fatalf("__hook claude Stop: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || !strings.HasSuffix(ents[0].Name(), ".json") {
		t.Fatalf("channel holds %v", ents)
	}
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{[]string{"STRATA_CONFIG=" + badCfg}, []string{"claude", "Stop"}}, // no channel
		{env, nil}, // no arguments
		{env, []string{"claude", "../../etc/passwd"}}, // an event name that is a path
		{env, []string{"nosuchagent", "Stop"}},
	} {
		out, errs, code := run(tc.env, "{}", tc.args...)
		if code != 1 || out != "" || !strings.Contains(errs, "strata __hook") {
			t.Errorf("__hook %v: exit %d (want 1), stdout %q, stderr %q", tc.args, code, out, errs)
		}
	}
}

// TestE2EAgentCodexFlow: fakecodex through its per-World CODEX_HOME. Its
// approval prompt is seen by the terminal heuristic (notify has no such
// event), the turn's end by notify with the prompt and thread id; rollback
// to turn 1 resumes that thread.
func TestE2EAgentCodexFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fake := buildFake(t, "fakecodex")
	recs := recordDir(t)
	rec := filepath.Join(recs, "record.jsonl")
	userHome := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(userHome, ".codex"), 0o755))
	userCfg := "model = \"o4-mini\"\n"
	must(t, os.WriteFile(filepath.Join(userHome, ".codex", "config.toml"), []byte(userCfg), 0o644))
	cfg := sharedCache(recs) + "[agents.codex]\ncommand = [\"" + fake + "\"]\nenv = [\"FAKECODEX_RECORD\"]\n"
	must(t, os.WriteFile(strings.TrimPrefix(e.vars[1], "STRATA_CONFIG="), []byte(cfg), 0o644))
	e.vars = append(e.vars, "FAKECODEX_RECORD="+rec, "OPENAI_API_KEY=sk-test-codex", "HOME="+userHome)

	e.ok("new", "c1", "--agent", "codex", "--prompt", "[bash: echo c > c.txt]")
	e.ok("wait", "c1", "--for", "needs-input", "--timeout", "30s")
	ag := e.agentOf("c1")
	if ag.Status.State != "waiting" || ag.Status.Turn != 0 {
		t.Fatalf("at the approval prompt: %+v", ag.Status)
	}
	e.ok("send", "c1", "--now", "y")
	e.eventually(30*time.Second, "turn 1's snapshot", func() bool {
		ag = e.agentOf("c1")
		return ag.Snapshots["1"] != ""
	})
	if len(ag.Turns) != 1 || ag.Turns[0].Prompt != "[bash: echo c > c.txt]" || ag.Status.SessionID == "" {
		t.Fatalf("turn 1: %+v %+v", ag.Status, ag.Turns)
	}
	if got := e.readWorld("c1", "c.txt"); got != "c\n" {
		t.Fatalf("c.txt: %q", got)
	}
	thread := ag.Status.SessionID
	if data, _ := os.ReadFile(filepath.Join(userHome, ".codex", "config.toml")); string(data) != userCfg {
		t.Fatalf("the user's codex config changed: %q", data)
	}
	e.ok("send", "c1", "second")
	e.eventually(30*time.Second, "turn 2", func() bool { return e.agentOf("c1").Snapshots["2"] != "" })

	out := e.ok("rollback", "c1", ag.Snapshots["1"], "--kill")
	if !strings.Contains(out, "resumed codex conversation "+thread) {
		t.Fatalf("rollback: %s", out)
	}
	var last []string
	e.eventually(30*time.Second, "the resumed codex", func() bool {
		argvs := argvRecords(t, rec)
		last = argvs[len(argvs)-1]
		return len(argvs) == 2
	})
	if len(last) < 2 || last[0] != "resume" || last[1] != thread {
		t.Fatalf("resumed codex got %q, want resume %s", last, thread)
	}
	e.ok("kill", "c1", "--force")
	e.ok("wait", "c1", "--for", "exit", "--timeout", "30s")
}

// A plain command started with run: an idle shell waits on the terminal
// (counts as needing you) until muted; kill escalates TERM to KILL after
// kill_grace for a shell that ignores TERM, and the session reads
// "killed by strata", the World not failed.
func TestE2ERunMuteAndKillEscalation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	must(t, os.WriteFile(strings.TrimPrefix(e.vars[1], "STRATA_CONFIG="), []byte("kill_grace = \"1s\"\n"), 0o644))
	e.ok("new", "s1", "--", "sh", "-c", "trap '' TERM; read x")
	type lsRow struct {
		Name      string `json:"name"`
		Status    string `json:"status"`
		Attention string `json:"attention"`
		Agent     *struct {
			Muted bool `json:"muted"`
		} `json:"agent"`
	}
	row := func() lsRow {
		var rows []lsRow
		must(t, json.Unmarshal([]byte(e.ok("ls", "--all", "--json")), &rows))
		for _, r := range rows {
			if r.Name == "s1" {
				return r
			}
		}
		t.Fatal("s1 not listed")
		return lsRow{}
	}
	e.eventually(20*time.Second, "the idle shell to count as waiting", func() bool { return row().Attention == "waiting" })
	e.ok("mute", "s1")
	if r := row(); r.Attention == "waiting" || r.Agent == nil || !r.Agent.Muted {
		t.Fatalf("muted: %+v", r)
	}
	e.ok("mute", "s1", "--off")
	e.eventually(20*time.Second, "unmuted to count again", func() bool { return row().Attention == "waiting" })

	start := time.Now()
	out := e.ok("kill", "s1")
	took := time.Since(start)
	if !strings.Contains(out, "killed by strata") || took < time.Second || took > 15*time.Second {
		t.Fatalf("kill took %s: %s", took, out)
	}
	var ss []struct {
		State, Signal, Attention string
		Killed                   bool `json:"killed_by_strata"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "s1", "--json")), &ss))
	if len(ss) != 1 || ss[0].Signal != "SIGKILL" || !ss[0].Killed || ss[0].Attention != "done" {
		t.Fatalf("session after the escalated kill: %+v", ss)
	}
	if r := row(); r.Status == "failed" || r.Attention == "failed" {
		t.Fatalf("the World reads failed after strata killed its session: %+v", r)
	}
}

// TestE2EAgentFanOut: one prompt to two presets at once (one World each),
// then a Claude turn snapshot forked into two Worlds, each continuing the
// conversation as a new one with its own prompt.
func TestE2EAgentFanOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	claude, codex := buildFake(t, "fakeclaude"), buildFake(t, "fakecodex")
	recs := recordDir(t)
	rec := filepath.Join(recs, "claude.jsonl")
	cfg := sharedCache(recs) + "[agents.claude]\ncommand = [\"" + claude + "\"]\nenv = [\"FAKECLAUDE_RECORD\"]\n\n[agents.codex]\ncommand = [\"" + codex + "\"]\n"
	must(t, os.WriteFile(strings.TrimPrefix(e.vars[1], "STRATA_CONFIG="), []byte(cfg), 0o644))
	e.vars = append(e.vars, "FAKECLAUDE_RECORD="+rec, "ANTHROPIC_API_KEY=sk-ant-test-0123456789abcdefghij", "OPENAI_API_KEY=sk-test", "HOME="+t.TempDir())

	var started []struct {
		World   string `json:"world"`
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	out := e.ok("new", "race", "--agent", "claude,codex", "--prompt", "say hello", "--json")
	if err := json.Unmarshal([]byte(out), &started); err != nil || len(started) != 2 || started[0].World != "race-claude" || started[1].World != "race-codex" || started[1].Session.ID == "" {
		t.Fatalf("new --agent claude,codex --json: %v %s", err, out)
	}
	var ag agentJSON
	for _, w := range []string{"race-claude", "race-codex"} {
		e.eventually(30*time.Second, w+"'s turn 1", func() bool {
			ag = e.agentOf(w)
			return ag.Snapshots["1"] != ""
		})
		if ag.Preset != strings.TrimPrefix(w, "race-") || ag.Turns[0].Prompt != "say hello" {
			t.Fatalf("%s: %+v", w, ag)
		}
	}
	ag = e.agentOf("race-claude")
	conv, turn1 := ag.Status.SessionID, ag.Snapshots["1"]

	out = e.ok("fork", "race-claude", "--snap", turn1, "-n", "2", "--prompt", "try A", "--prompt", "try B")
	for i, p := range []string{"try A", "try B"} {
		w := "race-claude-" + string(rune('1'+i))
		if !strings.Contains(out, "world "+w+": claude continues conversation "+conv) {
			t.Fatalf("fork: %s", out)
		}
		e.eventually(30*time.Second, w+"'s first turn", func() bool {
			ag = e.agentOf(w)
			return len(ag.Turns) > 0 && ag.Turns[0].Ended() && ag.Status.State == "waiting"
		})
		if ag.Turns[0].Prompt != p || ag.Status.SessionID == "" || ag.Status.SessionID == conv {
			t.Fatalf("%s: want prompt %q in a new conversation forked from %s: %+v %+v", w, p, conv, ag.Status, ag.Turns)
		}
	}
	forks := 0
	for _, argv := range argvRecords(t, rec) {
		if i := slices.Index(argv, "--resume"); i >= 0 && argv[i+1] == conv && slices.Contains(argv, "--fork-session") {
			forks++
		}
	}
	if forks != 2 {
		t.Fatalf("%d agents forked conversation %s, want 2: %q", forks, conv, argvRecords(t, rec))
	}
	for _, w := range []string{"race-claude", "race-codex", "race-claude-1", "race-claude-2"} {
		e.ok("kill", w, "--force")
		e.ok("wait", w, "--for", "exit", "--timeout", "30s")
	}
}

// The agent sees its channel and nothing else of strata's records: it cannot
// rewrite its status record, its queue or its mute mark, nor reach the
// strata binary other than read-only.
func TestE2EAgentSeesOnlyItsChannel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "p", "--", "sh", "-c", "ls -A /run/strata/session; echo x > /run/strata/bin/strata && echo WROTE-STRATA; echo $STRATA_HOOK_DIR; sleep 30")
	var out string
	e.eventually(20*time.Second, "the listing", func() bool {
		out = e.ok("logs", "p")
		return strings.Contains(out, "/run/strata/session/events")
	})
	lines := strings.Fields(out)
	if len(lines) == 0 || lines[0] != "events" || strings.Contains(out, "agent.json") || strings.Contains(out, "queue") || strings.Contains(out, "WROTE-STRATA") {
		t.Fatalf("inside the World:\n%s", out)
	}
	e.ok("kill", "p", "--force")
	e.ok("wait", "p", "--for", "exit", "--timeout", "30s")
}
