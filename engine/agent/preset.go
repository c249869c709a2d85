// Package agent owns what strata knows about coding agents as programs: the
// presets that say how to start, prompt, resume and fork each one, the per-World
// hook configuration that makes an agent report its own status, the hook channel
// those reports travel through, and the state machine that turns them into
// "who needs you, and why". It does no mounting and starts no processes: the
// engine's sessions call it.
package agent

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// PromptMode says how a first prompt reaches the agent.
type PromptMode string

const (
	PromptArg  PromptMode = "arg"  // appended as the last argument
	PromptFlag PromptMode = "flag" // passed as the value of Preset.PromptFlag
	PromptPTY  PromptMode = "pty"  // typed on the terminal once it starts
	PromptNone PromptMode = "none" // the program takes no prompt (a shell)
)

// Integration says how an agent reports its status to strata.
type Integration string

const (
	// IntegrationClaude: Claude Code hooks through its --settings flag.
	IntegrationClaude Integration = "claude-hooks"
	// IntegrationCodex: Codex's notify program in a per-World CODEX_HOME.
	IntegrationCodex Integration = "codex-notify"
	// IntegrationGemini: Gemini CLI hooks in a per-World settings.json.
	IntegrationGemini Integration = "gemini-hooks"
	// IntegrationAider: aider's --notifications-command.
	IntegrationAider Integration = "aider-notify"
	// IntegrationNone: no hooks; the PTY heuristic guesses.
	IntegrationNone Integration = "none"
)

var integrations = []Integration{IntegrationClaude, IntegrationCodex, IntegrationGemini, IntegrationAider, IntegrationNone}

// Preset is how to run one kind of agent. Argument templates may use {id}
// (a conversation id) and {prompt}.
type Preset struct {
	Name string `json:"name"`
	// Command is the program and its fixed arguments.
	Command []string `json:"command"`
	// Prompt is how the first prompt is passed; PromptFlag names the flag for
	// PromptFlag mode (e.g. "--prompt").
	Prompt     PromptMode `json:"prompt"`
	PromptFlag string     `json:"prompt_flag,omitempty"`
	// SessionID, when set, are arguments that make the agent use a
	// conversation id strata chose (Claude's --session-id {id}), so strata knows
	// it before the first hook fires.
	SessionID []string `json:"session_id,omitempty"`
	// Resume are the arguments that resume conversation {id}; Fork those that
	// continue {id} as a new conversation. Empty: the agent cannot.
	Resume []string `json:"resume,omitempty"`
	Fork   []string `json:"fork,omitempty"`
	// Status is the agent's status integration.
	Status Integration `json:"status"`
	// Credentials are environment variables of which the agent needs at least
	// one (an API key or token), passed through from strata's environment.
	Credentials []string `json:"credentials,omitempty"`
	// Env are further variables passed through when set (base URLs, model).
	Env []string `json:"env,omitempty"`
	// Egress are the hosts the agent must reach (for the World's boundary).
	Egress []string `json:"egress,omitempty"`
	// Description is one line for pickers and `--help`.
	Description string `json:"description,omitempty"`
}

// Builtins returns the built-in presets by name. Flags are as documented by
// each CLI (see docs/agents.md for the sources checked).
func Builtins() map[string]Preset {
	return map[string]Preset{
		"claude": {
			Name: "claude", Description: "Claude Code",
			Command:     []string{"claude"},
			Prompt:      PromptArg,
			SessionID:   []string{"--session-id", "{id}"},
			Resume:      []string{"--resume", "{id}"},
			Fork:        []string{"--resume", "{id}", "--fork-session"},
			Status:      IntegrationClaude,
			Credentials: []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"},
			Env:         []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
			Egress:      []string{"api.anthropic.com", "statsig.anthropic.com"},
		},
		"codex": {
			Name: "codex", Description: "OpenAI Codex CLI",
			Command:     []string{"codex"},
			Prompt:      PromptArg,
			Resume:      []string{"resume", "{id}"},
			Fork:        []string{"fork", "{id}"},
			Status:      IntegrationCodex,
			Credentials: []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
			Env:         []string{"OPENAI_BASE_URL"},
			Egress:      []string{"api.openai.com", "chatgpt.com"},
		},
		"gemini": {
			Name: "gemini", Description: "Gemini CLI",
			Command:     []string{"gemini"},
			Prompt:      PromptFlag,
			PromptFlag:  "--prompt-interactive",
			Resume:      []string{"--resume", "{id}"},
			Status:      IntegrationGemini,
			Credentials: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"},
			Env:         []string{"GOOGLE_CLOUD_PROJECT", "GOOGLE_GENAI_USE_VERTEXAI"},
			Egress:      []string{"generativelanguage.googleapis.com", "oauth2.googleapis.com"},
		},
		"aider": {
			Name: "aider", Description: "Aider",
			// aider's --message runs one prompt and exits; an interactive first
			// prompt is typed.
			Command:     []string{"aider"},
			Prompt:      PromptPTY,
			Status:      IntegrationAider,
			Credentials: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY"},
			Env:         []string{"AIDER_MODEL", "OPENAI_API_BASE"},
			Egress:      []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"},
		},
		"opencode": {
			Name: "opencode", Description: "opencode",
			Command:     []string{"opencode"},
			Prompt:      PromptFlag,
			PromptFlag:  "--prompt",
			Resume:      []string{"--session", "{id}"},
			Status:      IntegrationNone,
			Credentials: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"},
			Egress:      []string{"api.anthropic.com", "api.openai.com", "models.dev"},
		},
		"shell": {
			Name: "shell", Description: "a plain shell",
			Command: []string{"sh"},
			Prompt:  PromptNone,
			Status:  IntegrationNone,
		},
	}
}

// Override is a [agents.NAME] table in config.toml. A field left out keeps the
// preset's value; a new NAME starts from Extends (or from nothing).
type Override struct {
	Extends     string    `toml:"extends"`
	Description *string   `toml:"description"`
	Command     []string  `toml:"command"`
	Prompt      *string   `toml:"prompt"`
	PromptFlag  *string   `toml:"prompt_flag"`
	SessionID   *[]string `toml:"session_id"`
	Resume      *[]string `toml:"resume"`
	Fork        *[]string `toml:"fork"`
	Status      *string   `toml:"status"`
	Credentials *[]string `toml:"credentials"`
	Env         *[]string `toml:"env"`
	Egress      *[]string `toml:"egress"`
}

// ConfigError is an invalid [agents.NAME] table.
type ConfigError struct {
	Preset string
	Field  string
	Msg    string
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("config [agents.%s]: %s", e.Preset, e.Msg)
	}
	return fmt.Sprintf("config [agents.%s] %s: %s", e.Preset, e.Field, e.Msg)
}

// ErrUnknownPreset is returned for a preset name that is neither built in nor configured.
var ErrUnknownPreset = errors.New("unknown agent preset")

var presetName = lazyRegexp(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Registry is the presets in effect: the built-ins with config applied.
type Registry struct{ presets map[string]Preset }

// NewRegistry applies overrides to the built-ins and validates every preset.
func NewRegistry(overrides map[string]Override) (*Registry, error) {
	presets := Builtins()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		o := overrides[name]
		if !presetName().MatchString(name) {
			errs = append(errs, &ConfigError{Preset: name, Msg: "a preset name is 1-32 of a-z, 0-9, - and _, starting with a letter or digit"})
			continue
		}
		p, ok := presets[name]
		if !ok {
			if o.Extends != "" {
				base, ok := presets[o.Extends]
				if !ok {
					errs = append(errs, &ConfigError{Preset: name, Field: "extends", Msg: fmt.Sprintf("no preset %q to extend (built in: %s)", o.Extends, strings.Join(slices.Sorted(maps.Keys(Builtins())), ", "))})
					continue
				}
				p = base
			} else {
				p = Preset{Prompt: PromptArg, Status: IntegrationNone}
			}
		} else if o.Extends != "" {
			errs = append(errs, &ConfigError{Preset: name, Field: "extends", Msg: "a built-in preset cannot extend another; override its fields directly"})
			continue
		}
		p.Name = name
		apply(&p, o)
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		presets[name] = p
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Registry{presets: presets}, nil
}

func apply(p *Preset, o Override) {
	setS := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	setL := func(dst *[]string, src *[]string) {
		if src != nil {
			*dst = slices.Clone(*src)
		}
	}
	setS(&p.Description, o.Description)
	if o.Command != nil {
		p.Command = slices.Clone(o.Command)
	}
	if o.Prompt != nil {
		p.Prompt = PromptMode(*o.Prompt)
	}
	setS(&p.PromptFlag, o.PromptFlag)
	setL(&p.SessionID, o.SessionID)
	setL(&p.Resume, o.Resume)
	setL(&p.Fork, o.Fork)
	if o.Status != nil {
		p.Status = Integration(*o.Status)
	}
	setL(&p.Credentials, o.Credentials)
	setL(&p.Env, o.Env)
	setL(&p.Egress, o.Egress)
}

var (
	envName  = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
	hostName = lazyRegexp(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(:[0-9]{1,5})?$`)
)

// Validate reports the first thing wrong with p, saying what to change.
func (p Preset) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Preset: p.Name, Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	if len(p.Command) == 0 || strings.TrimSpace(p.Command[0]) == "" {
		return bad("command", `is empty; set the program and its arguments, e.g. command = ["claude"]`)
	}
	for i, a := range p.Command {
		if strings.ContainsRune(a, 0) {
			return bad("command", "argument %d contains a NUL byte", i)
		}
	}
	switch p.Prompt {
	case PromptArg, PromptPTY, PromptNone:
	case PromptFlag:
		if !strings.HasPrefix(p.PromptFlag, "-") {
			return bad("prompt_flag", `prompt = "flag" needs the flag, e.g. prompt_flag = "--prompt"`)
		}
	default:
		return bad("prompt", `is %q; use "arg", "flag", "pty" or "none"`, p.Prompt)
	}
	if !slices.Contains(integrations, p.Status) {
		var names []string
		for _, i := range integrations {
			names = append(names, string(i))
		}
		return bad("status", "is %q; use one of %s", p.Status, strings.Join(names, ", "))
	}
	for field, args := range map[string][]string{"session_id": p.SessionID, "resume": p.Resume, "fork": p.Fork} {
		if len(args) > 0 && !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "{id}") }) {
			return bad(field, "%q never names the conversation; put {id} where its id goes", args)
		}
	}
	for field, names := range map[string][]string{"credentials": p.Credentials, "env": p.Env} {
		for _, n := range names {
			if !envName().MatchString(n) {
				return bad(field, "%q is not an environment variable name", n)
			}
		}
	}
	for _, h := range p.Egress {
		if !hostName().MatchString(h) {
			return bad("egress", "%q is not a host name (a.example.com, *.example.com or host:port)", h)
		}
	}
	return nil
}

// Get returns the preset called name.
func (r *Registry) Get(name string) (Preset, error) {
	p, ok := r.presets[name]
	if !ok {
		return Preset{}, fmt.Errorf("%w %q (known: %s; add one under [agents.%s] in config.toml)", ErrUnknownPreset, name, strings.Join(r.Names(), ", "), name)
	}
	return p, nil
}

// Names lists the presets, sorted.
func (r *Registry) Names() []string { return slices.Sorted(maps.Keys(r.presets)) }

// ParseConfig reads the [agents.*] tables of a config.toml, ignoring the rest,
// and returns the registry they make. Unknown keys inside [agents.*] are errors,
// so a misspelt field does not silently keep the built-in value.
func ParseConfig(data []byte) (*Registry, error) {
	var doc struct {
		Agents map[string]Override `toml:"agents"`
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return nil, fmt.Errorf("config [agents]: %w", err)
	}
	var errs []error
	for _, k := range md.Undecoded() {
		if len(k) >= 1 && k[0] == "agents" {
			if len(k) == 2 {
				errs = append(errs, &ConfigError{Preset: k[1], Msg: "must be a table"})
				continue
			}
			if len(k) >= 3 {
				errs = append(errs, &ConfigError{Preset: k[1], Field: strings.Join(k[2:], "."), Msg: "unknown field (known: extends, description, command, prompt, prompt_flag, session_id, resume, fork, status, credentials, env, egress)"})
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return NewRegistry(doc.Agents)
}

// Launch is what to start: a first prompt, a conversation to resume or fork.
type Launch struct {
	Prompt string
	// SessionID asks the agent to use this conversation id (if it can).
	SessionID string
	// Resume continues conversation Resume; with Fork, as a new conversation.
	Resume string
	Fork   bool
	// Extra are the user's arguments appended after the preset's.
	Extra []string
}

// Invocation is a command line ready to run on a PTY.
type Invocation struct {
	Argv []string
	// Type is text to write to the terminal once the program waits for input
	// (PromptPTY), including the final carriage return.
	Type string
}

// ErrCannotResume is returned when a preset has no way to resume or fork.
var ErrCannotResume = errors.New("agent cannot resume a conversation")

// Argv builds the command line for l.
func (p Preset) Argv(l Launch) (Invocation, error) {
	inv := Invocation{Argv: slices.Clone(p.Command)}
	fill := func(tmpl []string, id string) []string {
		out := make([]string, len(tmpl))
		for i, a := range tmpl {
			out[i] = strings.ReplaceAll(a, "{id}", id)
		}
		return out
	}
	switch {
	case l.Resume != "" && l.Fork:
		if len(p.Fork) == 0 {
			return Invocation{}, fmt.Errorf("fork conversation %s with %s: %w (it has no fork = [...] in its preset)", l.Resume, p.Name, ErrCannotResume)
		}
		inv.Argv = append(inv.Argv, fill(p.Fork, l.Resume)...)
		if l.SessionID != "" && len(p.SessionID) > 0 {
			inv.Argv = append(inv.Argv, fill(p.SessionID, l.SessionID)...)
		}
	case l.Resume != "":
		if len(p.Resume) == 0 {
			return Invocation{}, fmt.Errorf("resume conversation %s with %s: %w (it has no resume = [...] in its preset)", l.Resume, p.Name, ErrCannotResume)
		}
		inv.Argv = append(inv.Argv, fill(p.Resume, l.Resume)...)
	case l.SessionID != "" && len(p.SessionID) > 0:
		inv.Argv = append(inv.Argv, fill(p.SessionID, l.SessionID)...)
	}
	inv.Argv = append(inv.Argv, l.Extra...)
	if l.Prompt != "" {
		switch p.Prompt {
		case PromptArg:
			inv.Argv = append(inv.Argv, l.Prompt)
		case PromptFlag:
			inv.Argv = append(inv.Argv, p.PromptFlag, l.Prompt)
		case PromptPTY:
			inv.Type = strings.TrimRight(l.Prompt, "\r\n") + "\r"
		case PromptNone:
			return Invocation{}, fmt.Errorf("%s takes no prompt; start it without --prompt and type into its terminal", p.Name)
		}
	}
	return inv, nil
}

// CredentialEnv returns the credential and pass-through variables set in
// environ ("K=V" entries), and an error naming the variables when the preset
// needs a credential and none is set.
func (p Preset) CredentialEnv(environ []string) ([]string, error) {
	set := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			set[k] = v
		}
	}
	var out []string
	found := len(p.Credentials) == 0
	for _, n := range p.Credentials {
		if v, ok := set[n]; ok && v != "" {
			out = append(out, n+"="+v)
			found = true
		}
	}
	for _, n := range p.Env {
		if v, ok := set[n]; ok {
			out = append(out, n+"="+v)
		}
	}
	if !found {
		return out, fmt.Errorf("%s needs one of %s in the environment; export it (or log in inside the World) and start again", p.Name, strings.Join(p.Credentials, ", "))
	}
	return out, nil
}
