package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFakeCodexEndToEnd runs fakecodex on a PTY with strata's per-World
// CODEX_HOME: notify brings each turn's end, with its prompt and thread id;
// the Terminal calls stand in for the engine's PTY heuristic, which is what
// shows a Codex approval prompt (notify does not).
func TestFakeCodexEndToEnd(t *testing.T) {
	root := t.TempDir()
	home, src, chanDir, cfg := filepath.Join(root, "home"), filepath.Join(root, "src"), filepath.Join(root, "events"), filepath.Join(root, "config")
	for _, d := range []string{home + "/.codex", src, chanDir} {
		os.MkdirAll(d, 0o755)
	}
	userCfg := "model = \"o4-mini\"\nnotify = [\"/bin/false\"]\n"
	os.WriteFile(filepath.Join(home, ".codex/config.toml"), []byte(userCfg), 0o644)
	p := Builtins()["codex"]
	in, err := Install(p, HookSetup{Strata: buildTool(t, "strata-hook"), HookDir: chanDir, ConfigDir: cfg, ConfigDirInWorld: cfg, CodexBase: []byte(userCfg)})
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(root, "record.jsonl")
	start := func(l Launch) (*terminal, *watcher) {
		l.Extra = append(in.Args, l.Extra...)
		inv, err := p.Argv(l)
		if err != nil {
			t.Fatal(err)
		}
		inv.Argv[0] = buildTool(t, "fakecodex")
		env := append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "FAKECODEX_RECORD=" + record}, in.Env...)
		return startOnPTY(t, src, env, inv.Argv...), &watcher{t: t, r: NewReader(chanDir), tr: NewTracker(p.Status, time.Now())}
	}
	term, w := start(Launch{Prompt: "tidy [bash: echo hi > out.txt]"})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(term.screen(), "Allow command?") {
		if time.Now().After(deadline) {
			t.Fatalf("no approval prompt; screen:\n%s", term.screen())
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.tr.Terminal(true, time.Now())
	if st := w.tr.Status(); st.State != StateWaiting || st.Reason != "waiting for input" {
		t.Fatalf("at the approval prompt: %+v", st)
	}
	term.typeLine("y")
	st := w.until(term, "turn 1 done", func(s Status) bool { return s.Reason == "turn 1 done" })
	if _, err := os.Stat(filepath.Join(src, "out.txt")); err != nil {
		t.Errorf("approved command did not run: %v", err)
	}
	thread := st.SessionID
	if turns := w.tr.Turns(); len(turns) != 1 || turns[0].Prompt != "tidy [bash: echo hi > out.txt]" || turns[0].SessionID == "" || !strings.Contains(turns[0].Reply, "ran: echo hi") {
		t.Fatalf("turns %+v", turns)
	}
	w.tr.Terminal(false, time.Now()) // the person types, Codex works
	term.typeLine("more")
	if w.tr.Status().State != StateWorking {
		t.Errorf("after typing: %+v", w.tr.Status())
	}
	w.until(term, "turn 2 done", func(s Status) bool { return s.Reason == "turn 2 done" })
	term.typeLine("/quit")
	if code := term.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	w.tr.Exit(0, "", false, time.Now())

	// The user's own notify was replaced in the World's Codex home, not run.
	if data, _ := os.ReadFile(filepath.Join(home, ".codex/config.toml")); string(data) != userCfg {
		t.Errorf("user config changed: %q", data)
	}
	for _, r := range readRecord(t, record) {
		if r.What == "hook" && r.Exit != 0 {
			t.Errorf("notify exited %d: %s", r.Exit, r.Stderr)
		}
	}

	term, w = start(Launch{Resume: thread, Prompt: "again"})
	if st := w.until(term, "resumed turn", func(s Status) bool { return s.Reason == "turn 1 done" }); st.SessionID != thread {
		t.Errorf("resume thread %q, want %q", st.SessionID, thread)
	}
	term.typeLine("/quit")
	term.wait()
	term, w = start(Launch{Resume: thread, Fork: true, Prompt: "fork"})
	if st := w.until(term, "forked turn", func(s Status) bool { return s.Reason == "turn 1 done" }); st.SessionID == thread || st.SessionID == "" {
		t.Errorf("fork thread %q (parent %q)", st.SessionID, thread)
	}
	term.typeLine("/quit")
	term.wait()
}
