package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real agent CLIs from the npm registry, each started in a World at the
// default (sandbox) level on a PTY, as far as it gets without its service:
// strata's hooks must be where the program reads them (the World's agent
// home, never the real home) and the program's own start-up events must
// reach strata. Each package is installed once per machine into npmCache;
// a test skips only when npm cannot install it.

// Pinned versions: a new release is a deliberate bump (and a re-check of
// docs/agents.md's "What the real programs did").
const (
	claudePkg = "@anthropic-ai/claude-code@2.1.328"
	geminiPkg = "@google/gemini-cli@0.61.0"
	codexPkg  = "@openai/codex@0.169.0"
)

// npmCache holds the installed packages across runs: outside /tmp, which a
// sandboxed World replaces, so the World sees the program read-only where
// the host installed it. STRATA_TEST_NPM_CACHE moves it.
func npmCache() string {
	if d := os.Getenv("STRATA_TEST_NPM_CACHE"); d != "" {
		return d
	}
	return "/var/cache/strata-test/npm"
}

// npmAgent installs pkg (name@version) into the cache once per machine and
// returns the path of its bin; concurrent test processes take a lock. It
// skips the test, with npm's error, only when the install fails.
func npmAgent(t *testing.T, pkg, bin string) string {
	t.Helper()
	dir := filepath.Join(npmCache(), strings.ReplaceAll(pkg, "/", "_"))
	path := filepath.Join(dir, "node_modules", ".bin", bin)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("%s cannot be installed: npm is not on PATH (apt-get install npm)", pkg)
	}
	must(t, os.MkdirAll(npmCache(), 0o755))
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	must(t, err)
	defer lock.Close()
	must(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	if _, err := os.Stat(path); err == nil {
		return path // another process installed it meanwhile
	}
	tmp := dir + ".tmp"
	must(t, os.RemoveAll(tmp))
	must(t, os.MkdirAll(tmp, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error", pkg).CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(tmp)
		t.Skipf("npm install %s failed (%v); the real-program test needs the npm registry:\n%s", pkg, err, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "node_modules", ".bin", bin)); err != nil {
		t.Fatalf("npm installed %s but it has no bin %q: %v\n%s", pkg, bin, err, out)
	}
	must(t, os.RemoveAll(dir))
	must(t, os.Rename(tmp, dir))
	t.Logf("installed %s in %s (%s)", pkg, dir, time.Since(start).Round(time.Second))
	return path
}

// realAgentEnv is a test env whose user has a home of their own (outside
// /tmp, so that the World's home layer covers it as it would a person's),
// with nothing of the agents in it.
func realAgentEnv(t *testing.T, cfg string) (*env, string) {
	t.Helper()
	e := newEnv(t)
	must(t, os.MkdirAll("/var/cache/strata-test/homes", 0o755))
	home, err := os.MkdirTemp("/var/cache/strata-test/homes", "user-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	must(t, os.WriteFile(strings.TrimPrefix(e.vars[1], "STRATA_CONFIG="), []byte(cfg), 0o644))
	e.vars = append(e.vars, "HOME="+home, "TERM=xterm-256color")
	return e, home
}

// stopAgent ends the World's agent however it behaves without its service,
// so that a denied connection cannot hang the test.
func stopAgent(e *env, world string) {
	e.t.Helper()
	_, _, _ = e.run("kill", world, "--force")
	e.ok("wait", world, "--for", "exit", "--timeout", "30s")
}

// noAgentFiles fails when the real home holds any of the agents' config:
// the hooks go to the World's agent home only.
func noAgentFiles(t *testing.T, home string) {
	t.Helper()
	for _, rel := range []string{".claude", ".claude.json", ".codex", ".gemini"} {
		if _, err := os.Lstat(filepath.Join(home, rel)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the real home has %s (err %v): strata's agent config must stay in the World", rel, err)
		}
	}
}

// agentStates are the World's agent.state events as "state: reason",
// oldest first.
func agentStates(e *env, world string) []string {
	var out []string
	for _, line := range strings.Split(e.ok("events", "--json", "--world", world), "\n") {
		var ev struct {
			Type   string `json:"type"`
			Detail struct {
				State  string `json:"state"`
				Reason string `json:"reason"`
			} `json:"detail"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "agent.state" {
			out = append(out, ev.Detail.State+": "+ev.Detail.Reason)
		}
	}
	return out
}

// requireSandbox fails unless the World ran at the default sandbox level.
func requireSandbox(t *testing.T, e *env, world string) {
	t.Helper()
	if show := e.ok("show", world); !strings.Contains(show, "level    sandbox") {
		t.Fatalf("world %s is not at the sandbox level:\n%s", world, show)
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestE2ERealClaudeCode: the real Claude Code, sandbox level, strata's
// --settings in the World's agent home. Its SessionStart (with the session
// id strata chose) and the UserPromptSubmit of the first prompt reach
// strata through the hook channel; the API call that follows is denied by
// the egress proxy (no service here), and the test stops there.
func TestE2ERealClaudeCode(t *testing.T) {
	t.Parallel()
	bin := npmAgent(t, claudePkg, "claude")
	cfg := "[agents.claude]\ncommand = [\"" + bin + "\"]\n" +
		"env = [\"DISABLE_AUTOUPDATER\", \"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\"]\n"
	e, home := realAgentEnv(t, cfg)
	e.vars = append(e.vars, "ANTHROPIC_API_KEY=sk-ant-api03-strata-test-dummy-key-0000000000000000000000",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	e.ok("new", "w", "--agent", "claude", "--prompt", "say hi")
	defer stopAgent(e, "w")

	var ag agentJSON
	e.eventually(60*time.Second, "the real claude's SessionStart and UserPromptSubmit", func() bool {
		ag = e.agentOf("w")
		return ag.Status.SessionID != "" && len(ag.Turns) > 0
	})
	if !uuidRE.MatchString(ag.Status.SessionID) || ag.Turns[0].Prompt != "say hi" || ag.Status.Turn != 1 {
		t.Fatalf("after launch: %+v %+v", ag.Status, ag.Turns)
	}
	// SessionStart itself: only it says "starting the first turn" (a
	// launch prompt pending), before UserPromptSubmit opens turn 1.
	states := agentStates(e, "w")
	t.Logf("agent states: %q; status %+v", states, ag.Status)
	if !slices.Contains(states, "working: starting the first turn") {
		t.Fatalf("no SessionStart from the real claude in the World's events: %q", states)
	}
	requireSandbox(t, e, "w")
	settings, err := os.ReadFile(filepath.Join(e.home, "worlds", "w", "agent-home", ".strata-agent", "claude-settings.json"))
	must(t, err)
	if !strings.Contains(string(settings), "__hook claude SessionStart") {
		t.Fatalf("claude-settings.json in the agent home lacks the SessionStart hook:\n%s", settings)
	}
	noAgentFiles(t, home)
	// The session id is the one strata passed (--session-id), so strata knew
	// the conversation before the first hook.
	var ss []struct {
		Argv []string `json:"argv"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
	if len(ss) != 1 || !strings.Contains(strings.Join(ss[0].Argv, " "), "--session-id "+ag.Status.SessionID) {
		t.Fatalf("the agent's conversation %s is not the one strata chose: %+v", ag.Status.SessionID, ss)
	}
}

// TestE2ERealGeminiCLI: the real Gemini CLI, sandbox level, strata's hooks in
// the World's GEMINI_CLI_HOME (with the folder trusted there: Gemini runs no
// hook in an untrusted folder). Its SessionStart reaches strata.
func TestE2ERealGeminiCLI(t *testing.T) {
	t.Parallel()
	bin := npmAgent(t, geminiPkg, "gemini")
	e, home := realAgentEnv(t, "[agents.gemini]\ncommand = [\""+bin+"\"]\n")
	e.vars = append(e.vars, "GEMINI_API_KEY=strata-test-dummy-key")
	e.ok("new", "g", "--agent", "gemini", "--prompt", "say hi")
	defer stopAgent(e, "g")

	var states []string
	e.eventually(75*time.Second, "the real gemini's SessionStart", func() bool {
		states = agentStates(e, "g")
		return slices.Contains(states, "working: starting the first turn")
	})
	ag := e.agentOf("g")
	t.Logf("agent states: %q; status %+v; turns %+v", states, ag.Status, ag.Turns)
	if ag.Status.SessionID == "" {
		t.Fatalf("gemini's SessionStart gave no session id: %+v", ag.Status)
	}
	requireSandbox(t, e, "g")
	ghome := filepath.Join(e.home, "worlds", "g", "agent-home", ".strata-agent", "gemini-home", ".gemini")
	settings, err := os.ReadFile(filepath.Join(ghome, "settings.json"))
	must(t, err)
	if !strings.Contains(string(settings), "__hook gemini SessionStart") {
		t.Fatalf("gemini settings.json in the agent home lacks the SessionStart hook:\n%s", settings)
	}
	noAgentFiles(t, home)
}

// TestE2ERealCodexCLI: the real Codex CLI, sandbox level. Codex's only
// integration, notify, fires at a turn's end, which needs the service: what
// can be seen without it is that Codex starts in the World on its PTY with
// strata's CODEX_HOME, where it reads config.toml (strata's notify is there)
// and keeps its state, and that the real home gets nothing.
func TestE2ERealCodexCLI(t *testing.T) {
	t.Parallel()
	bin := npmAgent(t, codexPkg, "codex")
	e, home := realAgentEnv(t, "[agents.codex]\ncommand = [\""+bin+"\"]\n")
	e.vars = append(e.vars, "OPENAI_API_KEY=sk-strata-test-dummy")
	e.ok("new", "c", "--agent", "codex", "--prompt", "say hi")
	defer stopAgent(e, "c")

	chome := filepath.Join(e.home, "worlds", "c", "agent-home", ".strata-agent", "codex-home")
	cfg, err := os.ReadFile(filepath.Join(chome, "config.toml"))
	must(t, err)
	if !strings.Contains(string(cfg), `notify = ["/run/strata/bin/strata", "__hook", "codex"]`) {
		t.Fatalf("codex config.toml in the World's CODEX_HOME lacks strata's notify:\n%s", cfg)
	}
	// Codex installs its system skills into the CODEX_HOME it was given as
	// it starts (0.169: skills/.system/.codex-system-skills.marker): it took
	// strata's home, the one holding strata's config.toml.
	e.eventually(60*time.Second, "the real codex to start in its CODEX_HOME", func() bool {
		_, err := os.Stat(filepath.Join(chome, "skills", ".system", ".codex-system-skills.marker"))
		return err == nil
	})
	ents, _ := os.ReadDir(chome)
	var made []string
	for _, d := range ents {
		made = append(made, d.Name())
	}
	t.Logf("codex's CODEX_HOME holds %v; its terminal:\n%s", made, e.ok("logs", "c"))
	var ss []struct {
		State string `json:"state"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "c", "--json")), &ss))
	if len(ss) != 1 || ss[0].State != "running" {
		t.Fatalf("codex is not running in the World: %+v\n%s", ss, e.ok("logs", "c"))
	}
	requireSandbox(t, e, "c")
	noAgentFiles(t, home)
}
