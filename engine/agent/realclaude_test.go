package agent

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestRealClaudeHooks starts the real Claude Code (from $STRATA_CLAUDE_BIN or
// PATH; `npm install -g @anthropic-ai/claude-code`) on a PTY with strata's
// --settings and a private HOME, and checks that its own start-up and prompt
// events reach the hook channel. It has no service here: a dummy key, no
// network; the test stops at the first API call. Without the trust entry in
// ~/.claude.json, Claude shows its folder-trust dialog and sends no hook at
// all until it is answered (checked with 2.1.197).
func TestRealClaudeHooks(t *testing.T) {
	bin := os.Getenv("STRATA_CLAUDE_BIN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("claude"); err != nil {
			t.Skip("claude is not installed (npm install -g @anthropic-ai/claude-code, or set STRATA_CLAUDE_BIN)")
		}
	}
	root := t.TempDir()
	home, src, chanDir, cfg := filepath.Join(root, "home"), filepath.Join(root, "src"), filepath.Join(root, "events"), filepath.Join(root, "config")
	for _, d := range []string{home, src, chanDir} {
		os.MkdirAll(d, 0o755)
	}
	key := "sk-ant-api03-strata-test-dummy-key-0000000000000000000000"
	// What a person's first run would have answered: onboarding done, this
	// folder trusted (Claude runs no hooks in an untrusted folder), the key approved.
	state, _ := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true,
		"projects":               map[string]any{src: map[string]any{"hasTrustDialogAccepted": true}},
		"customApiKeyResponses":  map[string]any{"approved": []string{key[len(key)-20:]}},
	})
	os.WriteFile(filepath.Join(home, ".claude.json"), state, 0o644)

	p := Builtins()["claude"]
	in, err := Install(p, HookSetup{Strata: buildTool(t, "strata-hook"), HookDir: chanDir, ConfigDir: cfg, ConfigDirInWorld: cfg})
	if err != nil {
		t.Fatal(err)
	}
	sid := "5d9c2b1e-8f7a-4c3d-9e2b-1a0f9e8d7c6b"
	inv, err := p.Argv(Launch{SessionID: sid, Extra: in.Args})
	if err != nil {
		t.Fatal(err)
	}
	inv.Argv[0] = bin
	env := append([]string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "ANTHROPIC_API_KEY=" + key,
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, in.Env...)
	term := startOnPTY(t, src, env, inv.Argv...)
	w := &watcher{t: t, r: NewReader(chanDir), tr: NewTracker(p.Status, time.Now()), patience: 2 * time.Minute}
	st := w.until(term, "SessionStart from the real claude", func(s Status) bool { return len(w.events) > 0 })
	first := w.events[0]
	t.Logf("first event: kind=%s source=%s session=%s cwd=%s transcript=%s raw=%s", first.Kind, first.Source, first.SessionID, first.Cwd, first.TranscriptPath, first.Raw)
	if first.Kind != "SessionStart" || first.SessionID != sid || first.Source != "startup" || first.Invalid {
		t.Errorf("first event %+v", first)
	}
	if st.State != StateWaiting {
		t.Errorf("status after SessionStart %+v", st)
	}
	// A prompt: UserPromptSubmit fires before the (failing) API call.
	time.Sleep(2 * time.Second) // let the input box take keys
	term.master.Write([]byte("say hi"))
	time.Sleep(500 * time.Millisecond)
	term.master.Write([]byte("\r"))
	w.until(term, "UserPromptSubmit from the real claude", func(s Status) bool {
		return slices.ContainsFunc(w.events, func(e Event) bool { return e.Kind == "UserPromptSubmit" })
	})
	// Without a service the turn does not end soon (Claude retries); see what comes.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !slices.ContainsFunc(w.events, func(e Event) bool { return e.Kind == "Stop" || e.Kind == "StopFailure" }) {
		time.Sleep(200 * time.Millisecond)
		w.poll()
	}
	for _, e := range w.events {
		t.Logf("event %s: session=%s prompt=%q notification=%q message=%q error=%q raw=%s", e.Kind, e.SessionID, e.Prompt, e.Notification, e.Message, e.Error, e.Raw)
	}
	t.Logf("status %+v", w.tr.Status())
	if turns := w.tr.Turns(); len(turns) != 1 || turns[0].Prompt != "say hi" {
		t.Errorf("turns %+v", turns)
	}
}
