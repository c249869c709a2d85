package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestRealGeminiHooks starts the real Gemini CLI (from $STRATA_GEMINI_BIN or
// PATH; `npm install -g @google/gemini-cli`) on a PTY with strata's
// per-World GEMINI_CLI_HOME and checks that its SessionStart reaches the
// channel. A dummy key and no network: it goes no further. Without the
// trusted folder (HookSetup.Workdir) Gemini 0.61 sends no hook at all.
func TestRealGeminiHooks(t *testing.T) {
	bin := os.Getenv("STRATA_GEMINI_BIN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("gemini"); err != nil {
			t.Skip("gemini is not installed (npm install -g @google/gemini-cli, or set STRATA_GEMINI_BIN)")
		}
	}
	root := t.TempDir()
	home, src, chanDir, cfg := filepath.Join(root, "home"), filepath.Join(root, "src"), filepath.Join(root, "events"), filepath.Join(root, "config")
	for _, d := range []string{home, src, chanDir} {
		os.MkdirAll(d, 0o755)
	}
	p := Builtins()["gemini"]
	in, err := Install(p, HookSetup{Strata: buildTool(t, "strata-hook"), HookDir: chanDir, ConfigDir: cfg, ConfigDirInWorld: cfg, Workdir: src})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := p.Argv(Launch{Extra: in.Args})
	if err != nil {
		t.Fatal(err)
	}
	inv.Argv[0] = bin
	env := append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "GEMINI_API_KEY=dummy-strata-test"}, in.Env...)
	term := startOnPTY(t, src, env, inv.Argv...)
	w := &watcher{t: t, r: NewReader(chanDir), tr: NewTracker(p.Status, time.Now()), patience: 2 * time.Minute}
	w.until(term, "SessionStart from the real gemini", func(s Status) bool { return len(w.events) > 0 })
	for _, e := range w.events {
		t.Logf("event %s: session=%s source=%s cwd=%s raw=%s", e.Kind, e.SessionID, e.Source, e.Cwd, e.Raw)
	}
	if e := w.events[0]; e.Kind != "SessionStart" || e.SessionID == "" || e.Invalid {
		t.Errorf("first event %+v", e)
	}
	if entries, _ := os.ReadDir(home); len(entries) > 0 {
		for _, e := range entries {
			t.Logf("gemini wrote in HOME: %s", e.Name())
		}
	}
}
