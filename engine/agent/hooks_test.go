package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func setup(t *testing.T) HookSetup {
	t.Helper()
	return HookSetup{
		Strata: "/run/strata/bin/strata it's", HookDir: WorldHookDir,
		ConfigDir: t.TempDir(), ConfigDirInWorld: "/run/strata/session/config",
	}
}

func TestInstallClaude(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	s := setup(t)
	in, err := Install(Builtins()["claude"], s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.Args, []string{"--settings", "/run/strata/session/config/claude-settings.json"}) {
		t.Errorf("args %q", in.Args)
	}
	if !slices.Contains(in.Env, EnvHookDir+"="+WorldHookDir) {
		t.Errorf("env %q", in.Env)
	}
	data, err := os.ReadFile(filepath.Join(s.ConfigDir, "claude-settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks map[string][]hookGroup `json:"hooks"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, ev := range ClaudeHookEvents {
		groups := doc.Hooks[ev]
		if len(groups) == 0 {
			t.Errorf("no %s hook", ev)
			continue
		}
		want := `'/run/strata/bin/strata it'\''s' __hook claude ` + ev
		if c := groups[0].Hooks[0]; c.Command != want || c.Type != "command" {
			t.Errorf("%s: %+v, want %q", ev, c, want)
		}
	}
	var matchers []string
	for _, g := range doc.Hooks["Notification"] {
		matchers = append(matchers, g.Matcher)
	}
	if !slices.Equal(matchers, ClaudeNotificationMatchers) {
		t.Errorf("notification matchers %q", matchers)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("install wrote into the user's home: %v", ents)
	}
}

func TestInstallCodexGeminiAider(t *testing.T) {
	s := setup(t)
	s.CodexBase = []byte("model = \"o4\"\nnotify = [\"/home/me/notify.py\"]\n[tui]\nnotifications = true\n")
	in, err := Install(Builtins()["codex"], s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(in.Env, "CODEX_HOME=/run/strata/session/config/codex-home") {
		t.Errorf("codex env %q", in.Env)
	}
	var cfg map[string]any
	if _, err := toml.DecodeFile(filepath.Join(s.ConfigDir, "codex-home/config.toml"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["model"] != "o4" || cfg["tui"] == nil {
		t.Errorf("base settings lost: %v", cfg)
	}
	if n, _ := cfg["notify"].([]any); len(n) != 3 || n[0] != s.Strata || n[1] != "__hook" || n[2] != "codex" {
		t.Errorf("notify %v", cfg["notify"])
	}
	s.CodexBase = []byte("model = [")
	if _, err := Install(Builtins()["codex"], s); err == nil || !strings.Contains(err.Error(), "Codex config") {
		t.Errorf("bad base: %v", err)
	}

	s.Workdir = "/src/project"
	in, err = Install(Builtins()["gemini"], s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(in.Env, "GEMINI_CLI_HOME=/run/strata/session/config/gemini-home") {
		t.Errorf("gemini env %q", in.Env)
	}
	data, _ := os.ReadFile(filepath.Join(s.ConfigDir, "gemini-home/.gemini/settings.json"))
	for _, ev := range GeminiHookEvents {
		if !strings.Contains(string(data), "__hook gemini "+ev) {
			t.Errorf("gemini settings lack %s", ev)
		}
	}

	if data, _ := os.ReadFile(filepath.Join(s.ConfigDir, "gemini-home/.gemini/trustedFolders.json")); string(data) != `{"/src/project":"TRUST_FOLDER"}` {
		t.Errorf("gemini trust %s", data)
	}
	if !strings.Contains(string(data), `"hooksConfig"`) {
		t.Error("gemini settings do not enable hooks")
	}
	in, err = Install(Builtins()["aider"], s)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Args) != 3 || in.Args[1] != "--notifications-command" || !strings.HasSuffix(in.Args[2], "__hook aider Stop") {
		t.Errorf("aider args %q", in.Args)
	}
	in, err = Install(Builtins()["shell"], s)
	if err != nil || len(in.Args) != 0 || len(in.Files) != 0 {
		t.Errorf("shell: %+v %v", in, err)
	}
}

func TestInstallRejectsRelativePaths(t *testing.T) {
	for _, mut := range []func(*HookSetup){
		func(s *HookSetup) { s.Strata = "strata" },
		func(s *HookSetup) { s.HookDir = "" },
		func(s *HookSetup) { s.ConfigDir = "rel" },
		func(s *HookSetup) { s.ConfigDirInWorld = "/x\n/y" },
	} {
		s := setup(t)
		mut(&s)
		if _, err := Install(Builtins()["claude"], s); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}
