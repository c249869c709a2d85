package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestBuiltinsValid(t *testing.T) {
	b := Builtins()
	for _, name := range []string{"claude", "codex", "gemini", "aider", "opencode", "shell"} {
		p, ok := b[name]
		if !ok {
			t.Fatalf("no built-in %q", name)
		}
		if p.Name != name {
			t.Errorf("%s: Name = %q", name, p.Name)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestArgvClaude(t *testing.T) {
	p := Builtins()["claude"]
	cases := []struct {
		l    Launch
		want []string
	}{
		{Launch{Prompt: "fix it", SessionID: "S1"}, []string{"claude", "--session-id", "S1", "fix it"}},
		{Launch{Resume: "S1"}, []string{"claude", "--resume", "S1"}},
		{Launch{Resume: "S1", Fork: true, SessionID: "S2", Prompt: "again"}, []string{"claude", "--resume", "S1", "--fork-session", "--session-id", "S2", "again"}},
		{Launch{Prompt: "-rf /", Extra: []string{"--model", "opus"}}, []string{"claude", "--model", "opus", "-rf /"}},
	}
	for _, c := range cases {
		inv, err := p.Argv(c.l)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(inv.Argv, c.want) || inv.Type != "" {
			t.Errorf("%+v: got %q type %q, want %q", c.l, inv.Argv, inv.Type, c.want)
		}
	}
}

func TestArgvModes(t *testing.T) {
	b := Builtins()
	inv, err := b["gemini"].Argv(Launch{Prompt: "hi"})
	if err != nil || !slices.Equal(inv.Argv, []string{"gemini", "--prompt-interactive", "hi"}) {
		t.Errorf("gemini: %q %v", inv.Argv, err)
	}
	inv, err = b["aider"].Argv(Launch{Prompt: "hi\n"})
	if err != nil || !slices.Equal(inv.Argv, []string{"aider"}) || inv.Type != "hi\r" {
		t.Errorf("aider: %q %q %v", inv.Argv, inv.Type, err)
	}
	inv, err = b["codex"].Argv(Launch{Resume: "T9"})
	if err != nil || !slices.Equal(inv.Argv, []string{"codex", "resume", "T9"}) {
		t.Errorf("codex resume: %q %v", inv.Argv, err)
	}
	inv, err = b["codex"].Argv(Launch{Resume: "T9", Fork: true, Prompt: "p"})
	if err != nil || !slices.Equal(inv.Argv, []string{"codex", "fork", "T9", "p"}) {
		t.Errorf("codex fork: %q %v", inv.Argv, err)
	}
	if _, err := b["opencode"].Argv(Launch{Resume: "T9", Fork: true}); !errors.Is(err, ErrCannotResume) {
		t.Errorf("opencode fork: %v, want ErrCannotResume", err)
	}
	if _, err := b["aider"].Argv(Launch{Resume: "x"}); !errors.Is(err, ErrCannotResume) {
		t.Errorf("aider resume: %v", err)
	}
	if _, err := b["shell"].Argv(Launch{Prompt: "x"}); err == nil || !strings.Contains(err.Error(), "takes no prompt") {
		t.Errorf("shell prompt: %v", err)
	}
}

func TestParseConfigOverrideAndAdd(t *testing.T) {
	r, err := ParseConfig([]byte(`
theme = "dark"
[keys]
quit = ["q"]
[agents.claude]
command = ["/opt/claude/bin/claude", "--model", "opus"]
egress = ["api.anthropic.com", "*.corp.example:8443"]
[agents.myclaude]
extends = "claude"
credentials = ["MY_KEY"]
[agents.tool]
command = ["mytool", "--tui"]
prompt = "flag"
prompt_flag = "--ask"
`))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.Get("claude")
	if !slices.Equal(c.Command, []string{"/opt/claude/bin/claude", "--model", "opus"}) || c.Status != IntegrationClaude || len(c.Resume) == 0 {
		t.Errorf("override lost built-in fields or missed command: %+v", c)
	}
	m, _ := r.Get("myclaude")
	if m.Status != IntegrationClaude || !slices.Equal(m.Credentials, []string{"MY_KEY"}) || m.Command[0] != "/opt/claude/bin/claude" { // extends the claude in effect
		t.Errorf("extends: %+v", m)
	}
	if b := Builtins()["claude"]; b.Command[0] != "claude" {
		t.Errorf("override mutated the built-ins")
	}
	tl, _ := r.Get("tool")
	inv, _ := tl.Argv(Launch{Prompt: "p"})
	if !slices.Equal(inv.Argv, []string{"mytool", "--tui", "--ask", "p"}) || tl.Status != IntegrationNone {
		t.Errorf("new preset: %+v %q", tl, inv.Argv)
	}
	if _, err := r.Get("nope"); !errors.Is(err, ErrUnknownPreset) || !strings.Contains(err.Error(), "claude") {
		t.Errorf("unknown: %v", err)
	}
}

func TestParseConfigRejects(t *testing.T) {
	cases := map[string]string{
		"[agents.x]\ncomand = [\"a\"]\n":                          "unknown field",
		"[agents.x]\nprompt = \"stdin\"\ncommand=[\"a\"]":         `prompt: is "stdin"`,
		"[agents.x]\ncommand = []\n":                              "command: is empty",
		"[agents.x]\nextends = \"clod\"\n":                        `no preset "clod"`,
		"[agents.claude]\nextends = \"codex\"\n":                  "cannot extend",
		"[agents.x]\ncommand=[\"a\"]\nresume = [\"--resume\"]\n":  "put {id}",
		"[agents.x]\ncommand=[\"a\"]\nstatus = \"hooks\"\n":       `status: is "hooks"`,
		"[agents.x]\ncommand=[\"a\"]\ncredentials = [\"A=B\"]\n":  "not an environment variable",
		"[agents.x]\ncommand=[\"a\"]\negress = [\"http://x/\"]\n": "not a host name",
		"[agents.x]\ncommand=[\"a\"]\nprompt = \"flag\"\n":        "needs the flag",
		"[agents.\"../evil\"]\ncommand=[\"a\"]\n":                 "preset name",
		"[agents]\nx = 1\n":                                       "expected table",
		"[agents.x\n":                                             "config [agents]",
	}
	for in, want := range cases {
		_, err := ParseConfig([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", in, err, want)
		}
	}
}

func TestCredentialEnv(t *testing.T) {
	p := Builtins()["claude"]
	env, err := p.CredentialEnv([]string{"PATH=/bin", "ANTHROPIC_API_KEY=k", "ANTHROPIC_MODEL=m", "OPENAI_API_KEY=o"})
	if err != nil || !slices.Equal(env, []string{"ANTHROPIC_API_KEY=k", "ANTHROPIC_MODEL=m"}) {
		t.Errorf("got %q %v", env, err)
	}
	if _, err := p.CredentialEnv([]string{"ANTHROPIC_API_KEY="}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("empty key accepted: %v", err)
	}
	if _, err := Builtins()["shell"].CredentialEnv(nil); err != nil {
		t.Errorf("shell needs nothing: %v", err)
	}
}
