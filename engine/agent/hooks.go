package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// ClaudeHookEvents are the Claude Code hook events strata installs, and the
// Notification matchers (notification_type values) it listens for.
var (
	ClaudeHookEvents = []string{
		"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
		"PostToolUseFailure", "Notification", "Stop", "StopFailure", "SessionEnd",
	}
	ClaudeNotificationMatchers = []string{"permission_prompt", "idle_prompt", "elicitation_dialog"}
	// GeminiHookEvents are Gemini CLI's hook events strata installs.
	GeminiHookEvents = []string{"SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "Notification", "AfterAgent", "SessionEnd"}
)

// HookSetup says where a World's hook configuration goes.
type HookSetup struct {
	// Strata is the strata binary as the World sees it (the hook command).
	Strata string
	// HookDir is the hook channel as the World sees it (WorldHookDir).
	HookDir string
	// ConfigDir is a host directory private to this World's session where the
	// agent's configuration is written; ConfigDirInWorld is the same directory
	// as the World sees it. Never the user's own ~/.claude, ~/.codex, ~/.gemini.
	ConfigDir        string
	ConfigDirInWorld string
	// Workdir is the agent's working directory as the World sees it. When
	// set, the per-World Gemini home trusts it: Gemini CLI runs no hooks at
	// all in an untrusted folder, and the World is already the sandbox.
	Workdir string
	// CodexBase is a config.toml to start the World's Codex config from (the
	// user's own, read by the caller, so their model settings carry over); nil
	// for none. Its notify is replaced.
	CodexBase []byte
}

// Installed is what a session adds to the agent's launch for its hooks.
type Installed struct {
	Args  []string // before the prompt: e.g. --settings FILE
	Env   []string // K=V
	Files []string // host paths written
}

// Install writes p's per-World hook configuration and returns what to add to
// its launch. An agent without hooks gets only the channel's variable.
func Install(p Preset, s HookSetup) (Installed, error) {
	for what, path := range map[string]string{"strata binary": s.Strata, "hook channel": s.HookDir, "config dir": s.ConfigDir, "config dir in the World": s.ConfigDirInWorld} {
		if !filepath.IsAbs(path) || strings.ContainsAny(path, "\x00\n") {
			return Installed{}, fmt.Errorf("install %s hooks: %s %q is not an absolute path", p.Name, what, path)
		}
	}
	in := Installed{Env: []string{EnvHookDir + "=" + s.HookDir}}
	write := func(rel string, data []byte) (string, error) {
		host := filepath.Join(s.ConfigDir, rel)
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return "", fmt.Errorf("install %s hooks: %w", p.Name, err)
		}
		if err := writeFileAtomic(host, data); err != nil {
			return "", fmt.Errorf("install %s hooks: %w", p.Name, err)
		}
		in.Files = append(in.Files, host)
		return filepath.Join(s.ConfigDirInWorld, rel), nil
	}
	hook := func(agent, event string) string {
		return shellQuote(s.Strata) + " __hook " + agent + " " + event
	}
	switch p.Status {
	case IntegrationClaude:
		data, err := ClaudeSettings(func(ev string) string { return hook("claude", ev) })
		if err != nil {
			return Installed{}, err
		}
		path, err := write("claude-settings.json", data)
		if err != nil {
			return Installed{}, err
		}
		in.Args = append(in.Args, "--settings", path)
	case IntegrationCodex:
		data, err := CodexConfig(s.CodexBase, []string{s.Strata, "__hook", "codex"})
		if err != nil {
			return Installed{}, fmt.Errorf("install codex hooks: %w", err)
		}
		if _, err := write("codex-home/config.toml", data); err != nil {
			return Installed{}, err
		}
		in.Env = append(in.Env, "CODEX_HOME="+filepath.Join(s.ConfigDirInWorld, "codex-home"))
	case IntegrationGemini:
		data, err := GeminiSettings(func(ev string) string { return hook("gemini", ev) })
		if err != nil {
			return Installed{}, err
		}
		if _, err := write("gemini-home/.gemini/settings.json", data); err != nil {
			return Installed{}, err
		}
		if s.Workdir != "" {
			if !filepath.IsAbs(s.Workdir) {
				return Installed{}, fmt.Errorf("install gemini hooks: working directory %q is not absolute", s.Workdir)
			}
			trust, _ := json.Marshal(map[string]string{s.Workdir: "TRUST_FOLDER"})
			if _, err := write("gemini-home/.gemini/trustedFolders.json", trust); err != nil {
				return Installed{}, err
			}
		}
		in.Env = append(in.Env, "GEMINI_CLI_HOME="+filepath.Join(s.ConfigDirInWorld, "gemini-home"))
	case IntegrationAider:
		in.Args = append(in.Args, "--notifications", "--notifications-command", hook("aider", "Stop"))
	}
	return in, nil
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout,omitempty"`
}

type hookGroup struct {
	Matcher string        `json:"matcher,omitempty"`
	Hooks   []hookCommand `json:"hooks"`
}

// ClaudeSettings is the JSON for Claude Code's --settings flag that sends each
// of ClaudeHookEvents to command(event).
func ClaudeSettings(command func(event string) string) ([]byte, error) {
	hooks := map[string][]hookGroup{}
	for _, ev := range ClaudeHookEvents {
		cmd := []hookCommand{{Type: "command", Command: command(ev), Timeout: 10}}
		switch ev {
		case "Notification":
			for _, m := range ClaudeNotificationMatchers {
				hooks[ev] = append(hooks[ev], hookGroup{Matcher: m, Hooks: cmd})
			}
		case "PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest":
			hooks[ev] = []hookGroup{{Matcher: "*", Hooks: cmd}}
		default:
			hooks[ev] = []hookGroup{{Hooks: cmd}}
		}
	}
	return json.MarshalIndent(map[string]any{"hooks": hooks}, "", "  ")
}

// GeminiSettings is a Gemini CLI settings.json with hooks sending each of
// GeminiHookEvents to command(event).
func GeminiSettings(command func(event string) string) ([]byte, error) {
	hooks := map[string][]hookGroup{}
	for _, ev := range GeminiHookEvents {
		g := hookGroup{Hooks: []hookCommand{{Type: "command", Command: command(ev), Timeout: 10000}}}
		if ev == "BeforeTool" || ev == "AfterTool" {
			g.Matcher = "*"
		}
		hooks[ev] = []hookGroup{g}
	}
	// Gemini CLI 0.61 runs hooks only with hooksConfig.enabled.
	return json.MarshalIndent(map[string]any{"hooksConfig": map[string]any{"enabled": true}, "hooks": hooks}, "", "  ")
}

// CodexConfig is base (a Codex config.toml, may be nil) with notify set.
func CodexConfig(base []byte, notify []string) ([]byte, error) {
	doc := map[string]any{}
	if len(bytes.TrimSpace(base)) > 0 {
		if _, err := toml.Decode(string(base), &doc); err != nil {
			return nil, fmt.Errorf("read the Codex config to start from: %w", err)
		}
	}
	doc["notify"] = notify
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(doc); err != nil {
		return nil, fmt.Errorf("encode Codex config: %w", err)
	}
	return buf.Bytes(), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Chmod(0o644), f.Close()); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
