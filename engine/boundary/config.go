package boundary

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Policy is one layer of boundary settings: the [boundary] table itself, a
// World's [boundary.worlds.NAME] or an agent's [boundary.agents.NAME]. A
// layer's level and network replace the ones below it; its lists add to them.
type Policy struct {
	// Level is the isolation level: sandbox (default), strict or tree.
	Level string `toml:"level"`
	// Network is the egress mode: proxy, none or host; "" is the level's
	// default (tree: host, sandbox: proxy, strict: none).
	Network string `toml:"network"`
	// Allow adds hosts to the egress allow-list (host, *.domain, host:port).
	Allow []string `toml:"allow"`
	// DenyPaths adds credential paths to hide ("~/" is the home).
	DenyPaths []string `toml:"deny_paths"`
	// EnvAllow adds variable names (or NAME_* prefixes) to the environment
	// allow-list.
	EnvAllow []string `toml:"env_allow"`
	// SharedCaches are directories every World writes in place (a compiler
	// cache): never the source, strata's state, / or a credential path.
	SharedCaches []string `toml:"shared_caches"`
	// PassEnv grants variables that would be dropped (an agent's API key).
	PassEnv []string `toml:"pass_env"`
	// PassPaths grants hidden credential paths, read-only.
	PassPaths []string `toml:"pass_paths"`
}

// Config is the [boundary] table of config.toml. The engine embeds it as
//
//	Boundary boundary.Config `toml:"boundary"`
//
// and calls Check once the file is read.
type Config struct {
	Policy
	// Worlds holds per-World layers, by World name.
	Worlds map[string]Policy `toml:"worlds"`
	// Agents holds per-agent layers, by agent name (the World's agent label,
	// "claude", "codex").
	Agents map[string]Policy `toml:"agents"`
}

// KeyError is a mistake in the [boundary] table: the dotted key
// ("boundary.shared_caches", "boundary.worlds.w.allow") and what is wrong.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// ErrRefusedPath is wrapped by every refusal of a writable or granted path.
var ErrRefusedPath = errors.New("refused path")

// Parse reads a config.toml and returns its [boundary] table (zero when the
// file has none). Keys of other tables are left to their owners; unknown keys
// inside [boundary] are refused.
func Parse(data string) (*Config, error) {
	var doc struct {
		Boundary Config `toml:"boundary"`
	}
	md, err := toml.Decode(data, &doc)
	if err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	for _, k := range md.Undecoded() {
		if len(k) > 0 && k[0] == "boundary" {
			return nil, &KeyError{Key: k.String(), Err: errors.New("unknown key (the keys are level, network, allow, deny_paths, env_allow, shared_caches, pass_env, pass_paths and the tables [boundary.worlds.NAME], [boundary.agents.NAME])")}
		}
	}
	return &doc.Boundary, nil
}

// Host is what the checks need to know about the machine.
type Host struct {
	Home      string // the user's home, absolute
	StateRoot string // strata's state root, absolute
}

// Check validates every layer of c against host: levels, network modes,
// allow-list entries, and the paths a World would write or be granted.
func (c *Config) Check(h Host) error {
	if err := c.check("boundary", h, ""); err != nil {
		return err
	}
	for _, name := range sortedKeys(c.Worlds) {
		if err := c.Worlds[name].check("boundary.worlds."+name, h, ""); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(c.Agents) {
		if err := c.Agents[name].check("boundary.agents."+name, h, ""); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]Policy) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// check validates one layer; source, when known, is the World's source.
func (p Policy) check(prefix string, h Host, source string) error {
	if _, err := ParseLevel(p.Level); err != nil {
		return &KeyError{Key: prefix + ".level", Err: err}
	}
	if _, err := ParseNetwork(p.Network); err != nil {
		return &KeyError{Key: prefix + ".network", Err: err}
	}
	if _, err := ParseAllowlist(p.Allow); err != nil {
		return &KeyError{Key: prefix + ".allow", Err: err}
	}
	for _, e := range append(append([]string{}, p.EnvAllow...), p.PassEnv...) {
		if e == "" || strings.ContainsAny(e, "= ") {
			return &KeyError{Key: prefix + ".env_allow", Err: fmt.Errorf("%q: want a variable name or a NAME_* prefix", e)}
		}
	}
	for _, d := range p.DenyPaths {
		if _, err := expandHome(d, h.Home); err != nil {
			return &KeyError{Key: prefix + ".deny_paths", Err: err}
		}
	}
	creds := credentialPaths(h.Home, p.DenyPaths)
	for _, s := range p.SharedCaches {
		if err := checkWritable(s, h, source, creds); err != nil {
			return &KeyError{Key: prefix + ".shared_caches", Err: err}
		}
	}
	for _, g := range p.PassPaths {
		abs, err := expandHome(g, h.Home)
		if err == nil && !contains(creds, abs) {
			err = fmt.Errorf("%q: %w: not a hidden credential path (pass_paths un-hides one of deny_paths or the default list, e.g. \"~/.config/gh\")", g, ErrRefusedPath)
		}
		if err != nil {
			return &KeyError{Key: prefix + ".pass_paths", Err: err}
		}
	}
	return nil
}

// expandHome makes a config path absolute: "~" and "~/x" are under home.
func expandHome(p, home string) (string, error) {
	switch {
	case p == "~":
		p = home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(home, p[2:])
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q: want an absolute path or one under ~/", p)
	}
	return filepath.Clean(p), nil
}

// credentialPaths is the hidden list: the defaults and the user's additions.
func credentialPaths(home string, extra []string) []string {
	out := make([]string, 0, len(DefaultCredentialPaths)+len(extra))
	for _, rel := range DefaultCredentialPaths {
		out = append(out, filepath.Join(home, rel))
	}
	for _, e := range extra {
		if abs, err := expandHome(e, home); err == nil && !contains(out, abs) {
			out = append(out, abs)
		}
	}
	return out
}

// within tells whether p is base or lies under it.
func within(p, base string) bool {
	if base == "/" {
		return true
	}
	return p == base || strings.HasPrefix(p, base+"/")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkWritable refuses a shared cache (or any path a World would write in
// place) that undoes the boundary: /, strata's state or an ancestor of it, the
// source or anything around it, a credential path or a directory holding one.
// The path's symlinks are resolved too (a cache linked to / is /).
func checkWritable(s string, h Host, source string, creds []string) error {
	abs, err := expandHome(s, h.Home)
	if err != nil {
		return err
	}
	candidates := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		candidates = append(candidates, real)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%q: %w", s, err)
	}
	for _, p := range candidates {
		shown := fmt.Sprintf("%q", s)
		if p != abs {
			shown = fmt.Sprintf("%q (a link to %s)", s, p)
		}
		refuse := func(why string) error {
			return fmt.Errorf("%s: %w: %s", shown, ErrRefusedPath, why)
		}
		switch {
		case p == "/":
			return refuse("it would make the whole host writable; name the cache directory itself")
		case h.StateRoot != "" && (within(h.StateRoot, p) || within(p, h.StateRoot)):
			return refuse(fmt.Sprintf("it would expose strata's state %s (Worlds, snapshots) to the command", h.StateRoot))
		case source != "" && (within(source, p) || within(p, source)):
			return refuse(fmt.Sprintf("it overlaps the source %s, whose changes must go through the World and review", source))
		case h.Home != "" && p == h.Home:
			return refuse("it is the whole home; each World already has a private layer over it, name a cache under it (~/.cache/go-build)")
		}
		for _, c := range creds {
			if within(p, c) {
				return refuse(fmt.Sprintf("it is the credential path %s, hidden from Worlds (use pass_paths to grant it read-only)", c))
			}
			if within(c, p) {
				return refuse(fmt.Sprintf("it holds the credential path %s, which would become readable and writable", c))
			}
		}
	}
	return nil
}

// CheckTreePath refuses p as an extra tree of a World (`new --mount`):
// "/", the home, strata's state, a credential path or a dir holding one;
// a tree is attached over the host at its path, after the credential masks
// of the plan would be, so none of these may be one.
func CheckTreePath(p string, h Host, denyPaths []string) error {
	return checkWritable(p, h, "", credentialPaths(h.Home, denyPaths))
}
