package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/overlay"
)

// Config is config.toml. Every field is optional.
type Config struct {
	// Backend is the default runtime for new Worlds: "local" or "cube".
	Backend Runtime `toml:"backend"`
	// MountBackend is the default overlay backend: auto, kernel,
	// fuse-overlayfs or unionfs-fuse.
	MountBackend string `toml:"mount_backend"`
	// Isolation is the default isolation for sessions: sandbox (default),
	// strict or tree. An alias of boundary.level.
	Isolation Isolation `toml:"isolation"`
	// StrictBinds are directories written in place by every World (e.g. a
	// build cache). An alias of boundary.shared_caches, checked the same way.
	StrictBinds []string `toml:"strict_binds"`
	// Ignore lists gitignore-style patterns left out of change sets, in
	// addition to .git/.
	Ignore []string `toml:"ignore"`
	// EnvRedact lists glob patterns of environment names whose values are not
	// recorded in session metadata.
	EnvRedact []string `toml:"env_redact"`
	// AutoSnapshot takes a snapshot before each exec.
	AutoSnapshot bool `toml:"auto_snapshot"`
	// Theme is dark, light, high-contrast, auto or a path to a TOML theme.
	Theme string `toml:"theme"`
	// Keys maps action names to key lists, overriding the defaults.
	Keys map[string]KeyList `toml:"keys"`
	// Colors maps colour roles to colours, overriding the theme.
	Colors map[string]string `toml:"colors"`
	// Cube configures the CubeSandbox runtime.
	Cube CubeConfig `toml:"cube"`
	// Agents adds or overrides agent presets ([agents.NAME]).
	Agents map[string]agent.Override `toml:"agents"`
	// KillGrace is how long K (strata kill --agent) waits after TERM before
	// KILL: a Go duration, default 5s.
	KillGrace string `toml:"kill_grace"`
	// Boundary is the [boundary] table (docs/security.md): level, network
	// mode and allow-list, per World and per agent.
	Boundary boundary.Config `toml:"boundary"`
	// Build lists gitignore-style patterns of build state besides Ignore
	// (build outputs that are not ignored, e.g. "*.o" next to sources):
	// snapshots leave build state out (docs/design.md, "Build state").
	Build []string `toml:"build"`
	// BuildState is what rollback does with build state by default: keep
	// (restored source files get the current time) or discard.
	BuildState BuildStateMode `toml:"build_state"`

	path string
}

// ConfigError is a mistake in config.toml: which file, which line (0 when
// it cannot be told) and which key, and what is wrong with it.
type ConfigError struct {
	Path string
	Line int
	Key  string // dotted: "theme", "keys.global.quit"; "" for a syntax error
	Err  error
}

func (e *ConfigError) Error() string {
	where := e.Path
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.Path, e.Line)
	}
	if e.Key == "" {
		return fmt.Sprintf("config %s: %v", where, e.Err)
	}
	return fmt.Sprintf("config %s: %s: %v", where, e.Key, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// tomlError is a TOML syntax error said without its own "toml: line N"
// (the ConfigError says where).
type tomlError struct{ pe toml.ParseError }

func (e tomlError) Error() string {
	if e.pe.LastKey != "" {
		return fmt.Sprintf("after key %q: %s", e.pe.LastKey, e.pe.Message)
	}
	return e.pe.Message
}

func (e tomlError) Unwrap() error { return e.pe }

// Problem returns a *ConfigError for key (dotted, as in ConfigError.Key),
// finding the key's line in the file.
func (c *Config) Problem(key string, err error) *ConfigError {
	return &ConfigError{Path: c.path, Line: ConfigLine(c.path, key), Key: key, Err: err}
}

// ConfigLine is the line of path that sets the dotted key ("keys.diff.apply"
// is `"diff.apply" = ...` under [keys]; "keys" is the [keys] header), or 0.
// It reads the simple TOML a person writes: one key per line, tables as
// [headers].
func ConfigLine(path, key string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	unquote := func(s string) string {
		s = strings.TrimSpace(s)
		if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
			return s[1 : len(s)-1]
		}
		return s
	}
	table := ""
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "[[") && strings.HasSuffix(line, "]]"):
			table = unquote(line[2 : len(line)-2])
		case strings.HasPrefix(line, "["):
			if end := strings.Index(line, "]"); end > 0 {
				table = unquote(line[1:end])
				if table == key {
					return i + 1
				}
			}
		default:
			k, _, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			full := unquote(k)
			if table != "" {
				full = table + "." + full
			}
			if full == key {
				return i + 1
			}
		}
	}
	return 0
}

// Path is the file the config was read from ("" for defaults).
func (c *Config) Path() string { return c.path }

// LoadConfig reads config.toml; a missing file is the defaults. Unknown keys
// are an error naming them, so a typo is not silently ignored.
// KeyList is one action's keys in config.toml's [keys]: a list
// ("diff.pick" = ["p", "space"]) or, for one key, a string ("diff.pick" = "p").
type KeyList []string

// UnmarshalTOML takes a string or a list of strings.
func (k *KeyList) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*k = KeyList{v}
		return nil
	case []any:
		out := make(KeyList, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("a key is a string such as \"p\" or \"ctrl+s\", not %v", e)
			}
			out = append(out, s)
		}
		*k = out
		return nil
	}
	return fmt.Errorf("keys are a string (\"p\") or a list of strings ([\"p\", \"space\"]), not %v", v)
}

// KeyMap is [keys] as the keymap package takes it.
func (c *Config) KeyMap() map[string][]string {
	if c.Keys == nil {
		return nil
	}
	out := make(map[string][]string, len(c.Keys))
	for a, ks := range c.Keys {
		out[a] = ks
	}
	return out
}

func LoadConfig(path string) (*Config, error) {
	c := &Config{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c.withDefaults(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	c.path = path
	md, err := toml.Decode(string(data), c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ConfigError{Path: path, Line: pe.Position.Line, Err: tomlError{pe}}
		}
		return nil, &ConfigError{Path: path, Err: err}
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, 0, len(und))
		for _, k := range und {
			keys = append(keys, k.String())
		}
		msg := "unknown key (the keys are backend, mount_backend, isolation, strict_binds, ignore, build, build_state, env_redact, auto_snapshot, theme, kill_grace and the tables [keys], [colors], [cube], [agents.NAME], [boundary])"
		if len(und[0]) > 0 && und[0][0] == "boundary" {
			msg = "unknown key (the keys of [boundary] are level, network, allow, deny_paths, env_allow, shared_caches, pass_env, pass_paths and the tables [boundary.worlds.NAME], [boundary.agents.NAME])"
		}
		if len(keys) > 1 {
			msg += "; also unknown: " + strings.Join(keys[1:], ", ")
		}
		err := errors.New(msg)
		return nil, c.Problem(keys[0], err)
	}
	c.withDefaults()
	// A theme file named relative to the config is found next to it,
	// whatever directory strata runs in.
	switch c.Theme {
	case "", "auto", "dark", "light", "high-contrast":
	default:
		if !filepath.IsAbs(c.Theme) && (strings.ContainsRune(c.Theme, filepath.Separator) || strings.HasSuffix(c.Theme, ".toml")) {
			c.Theme = filepath.Join(filepath.Dir(path), c.Theme)
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) withDefaults() *Config {
	if c.Backend == "" {
		c.Backend = world.DefaultRuntime
	}
	if c.MountBackend == "" {
		c.MountBackend = "auto"
	}
	if c.Isolation == "" {
		c.Isolation = Isolation(c.Boundary.Level)
	}
	if c.Isolation == "" {
		c.Isolation = world.DefaultIsolation
	}
	if len(c.EnvRedact) == 0 {
		c.EnvRedact = []string{"*TOKEN*", "*SECRET*", "*PASSWORD*", "*KEY*", "*CREDENTIAL*"}
	}
	return c
}

func (c *Config) validate() error {
	if err := c.Backend.Validate(); err != nil {
		return c.Problem("backend", err)
	}
	switch c.MountBackend {
	case "auto", "kernel", "fuse-overlayfs", "unionfs-fuse":
	default:
		return c.Problem("mount_backend", fmt.Errorf("%q: want auto, kernel, fuse-overlayfs or unionfs-fuse", c.MountBackend))
	}
	if err := c.Isolation.Validate(); err != nil {
		return c.Problem("isolation", err)
	}
	if c.KillGrace != "" {
		if d, err := time.ParseDuration(c.KillGrace); err != nil || d <= 0 {
			return c.Problem("kill_grace", fmt.Errorf("%q: want a positive duration such as 5s or 500ms", c.KillGrace))
		}
	}
	if _, err := agent.NewRegistry(c.Agents); err != nil {
		var ce *agent.ConfigError
		if errors.As(err, &ce) {
			key := "agents." + ce.Preset
			if ce.Field != "" {
				key += "." + ce.Field
			}
			return c.Problem(key, errors.New(ce.Msg))
		}
		return c.Problem("agents", err)
	}
	if err := c.BuildState.Validate(); err != nil {
		return c.Problem("build_state", err)
	}
	if _, err := overlay.NewIgnore(c.Build...); err != nil {
		return c.Problem("build", err)
	}
	if c.Boundary.Level != "" && string(c.Isolation) != c.Boundary.Level {
		return c.Problem("isolation", fmt.Errorf("%q, but boundary.level is %q: isolation is an alias of boundary.level, keep one of them", c.Isolation, c.Boundary.Level))
	}
	return nil
}

// killGrace is how long a kill waits after TERM before KILL.
func (c *Config) killGrace() time.Duration {
	if d, err := time.ParseDuration(c.KillGrace); err == nil && d > 0 {
		return d
	}
	return 5 * time.Second
}

// CheckBoundary validates the [boundary] table (and its aliases isolation
// and strict_binds) against this machine: the user's home and the state
// root. A path that would undo the boundary is a *ConfigError naming its key.
func (c *Config) CheckBoundary(home, stateRoot string) error {
	b := c.effectiveBoundary()
	if err := b.Check(boundary.Host{Home: home, StateRoot: stateRoot}); err != nil {
		var ke *boundary.KeyError
		if errors.As(err, &ke) {
			key := ke.Key
			if key == "boundary.shared_caches" && c.sharedCacheFromStrictBinds(ke.Err) {
				key = "strict_binds"
			}
			return c.Problem(key, ke.Err)
		}
		return c.Problem("boundary", err)
	}
	return nil
}

// effectiveBoundary is [boundary] with its aliases folded in: the default
// level from isolation, strict_binds as shared caches.
func (c *Config) effectiveBoundary() *boundary.Config {
	b := c.Boundary
	if b.Level == "" && c.Isolation != "" {
		b.Level = string(c.Isolation)
	}
	if len(c.StrictBinds) > 0 {
		b.SharedCaches = append(append([]string{}, b.SharedCaches...), c.StrictBinds...)
	}
	return &b
}

// sharedCacheFromStrictBinds tells whether a refused shared cache came from
// strict_binds (its message quotes the entry).
func (c *Config) sharedCacheFromStrictBinds(err error) bool {
	for _, s := range c.StrictBinds {
		if strings.HasPrefix(err.Error(), fmt.Sprintf("%q", s)) && !slicesContains(c.Boundary.SharedCaches, s) {
			return true
		}
	}
	return false
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
