package boundary

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// World is what Compute needs to know about a World and its machine.
type World struct {
	Name      string
	Source    string   // the source path the World is seen at
	StateRoot string   // strata's state root, hidden
	HideDirs  []string // further dirs hidden (the World's own state dir)
	Home      string   // the user's home
	// HomeUpper and HomeWork are the World's private writable layer over the
	// home (an overlay's upper and work dirs, inside the World's state).
	HomeUpper string
	HomeWork  string
	Agent     string // the agent the World runs ("claude"), "" for none
	// HostHomes are the homes of the host's user (its HOME, its passwd
	// entry's, sudo's caller's): their credentials are hidden too when the
	// session's Home is another.
	HostHomes []string
}

// Request is what one session asks on top of the config (`strata exec`'s
// flags): a level or network mode, and names of variables to pass.
type Request struct {
	Level   string
	Network string
	PassEnv []string
}

// PathKind says why a path is in the boundary.
type PathKind string

const (
	KindWorld       PathKind = "world"        // the World's view of the source
	KindPrivate     PathKind = "private"      // a private tmpfs
	KindHomeLayer   PathKind = "home-layer"   // the World's layer over the home
	KindSharedCache PathKind = "shared-cache" // written in place by every World
	KindHost        PathKind = "host"         // the host itself (tree)
	KindState       PathKind = "state"        // strata's state, hidden
	KindCredential  PathKind = "credential"   // a credential, hidden
	KindGranted     PathKind = "granted"      // a credential passed read-only
)

// Path is one entry of a boundary.
type Path struct {
	Path   string   `json:"path"`
	Kind   PathKind `json:"kind"`
	Exists bool     `json:"exists"` // at Compute time (stat)
	Dir    bool     `json:"dir"`
}

// Boundary is the effective boundary of one session, as data: what the init
// executes (engine/sandbox.Plan) and what `strata show` describes.
type Boundary struct {
	World  string `json:"world"`
	Level  Level  `json:"level"`
	Source string `json:"source"`
	Home   string `json:"home"`
	// HomeUpper/HomeWork: the home's private layer; "" when the home is
	// read-only (strict) or the host's own (tree).
	HomeUpper string `json:"home_upper,omitempty"`
	HomeWork  string `json:"home_work,omitempty"`
	// Writable lists what the command can write, in mount order.
	Writable []Path `json:"writable"`
	// ReadOnlyHost: everything not in Writable is read-only.
	ReadOnlyHost bool `json:"read_only_host"`
	// PrivateRun: /run and /var/run are private (host daemons' unix sockets
	// unreachable).
	PrivateRun bool `json:"private_run"`
	// Hidden lists what the command cannot see: covered by an empty,
	// read-only tmpfs (a dir) or an empty read-only file.
	Hidden []Path `json:"hidden"`
	// Granted lists credential paths passed read-only.
	Granted []Path `json:"granted,omitempty"`
	// Env is the command's environment; DroppedEnv names what was scrubbed.
	Env        []string `json:"-"`
	EnvAllow   []string `json:"env_allow"`
	DroppedEnv []string `json:"dropped_env,omitempty"`
	Network    Network  `json:"network"`
	// Allow is the egress allow-list (meaningful for NetworkProxy).
	Allow Allowlist `json:"-"`
	// AllowKey is the config key a person adds a denied host to.
	AllowKey string `json:"allow_key"`
}

// Compute works out the effective boundary of a session in World w, whose
// caller's environment is env, from config c and the session's request r.
// It stats paths (to mask only what exists, and say so) and nothing else.
func Compute(c *Config, w World, env []string, r Request) (*Boundary, error) {
	if c == nil {
		c = &Config{}
	}
	p := c.Policy
	layers := []struct {
		key string
		pol Policy
	}{{"boundary", p}}
	if wp, ok := c.Worlds[w.Name]; ok {
		p = merge(p, wp)
		layers = append(layers, struct {
			key string
			pol Policy
		}{"boundary.worlds." + w.Name, wp})
	}
	if w.Agent != "" {
		if ap, ok := c.Agents[w.Agent]; ok {
			p = merge(p, ap)
			layers = append(layers, struct {
				key string
				pol Policy
			}{"boundary.agents." + w.Agent, ap})
		}
	}
	h := Host{Home: w.Home, StateRoot: w.StateRoot}
	for _, l := range layers {
		if err := l.pol.check(l.key, h, w.Source); err != nil {
			return nil, err
		}
	}
	if r.Level != "" {
		p.Level = r.Level
	}
	if r.Network != "" {
		p.Network = r.Network
	}
	level, err := ParseLevel(p.Level)
	if err != nil {
		return nil, &KeyError{Key: "isolation", Err: err}
	}
	network, err := ParseNetwork(p.Network)
	if err != nil {
		return nil, &KeyError{Key: "network", Err: err}
	}
	if network == "" {
		network = level.defaultNetwork()
	}
	allow, err := ParseAllowlist(append(append([]string{}, DefaultAllow...), p.Allow...))
	if err != nil {
		return nil, &KeyError{Key: "boundary.allow", Err: err}
	}
	b := &Boundary{
		World: w.Name, Level: level, Source: w.Source, Home: w.Home,
		Network: network, Allow: allow, AllowKey: "boundary.worlds." + w.Name + ".allow",
	}
	for _, d := range append([]string{w.StateRoot}, w.HideDirs...) {
		if d != "" {
			b.Hidden = append(b.Hidden, statPath(d, KindState))
		}
	}
	b.Writable = append(b.Writable, statPath(w.Source, KindWorld))
	if level == LevelTree {
		// Today's behaviour: the host is the host.
		b.Writable = append(b.Writable, Path{Path: "/", Kind: KindHost, Exists: true, Dir: true})
		b.Env = append([]string{}, env...)
		b.EnvAllow = []string{"*"}
		return b, nil
	}
	if !filepath.IsAbs(w.Home) || filepath.Clean(w.Home) == "/" {
		// Credentials are found under the home: without one, none would be.
		return nil, fmt.Errorf("%s isolation for world %q: the home %q is not an absolute directory (is HOME set?); set HOME or use --isolation tree", level, w.Name, w.Home)
	}
	b.ReadOnlyHost, b.PrivateRun = true, true
	for _, d := range privateDirs {
		b.Writable = append(b.Writable, Path{Path: d, Kind: KindPrivate, Exists: true, Dir: true})
	}
	if level == LevelSandbox && w.Home != "" && w.HomeUpper != "" {
		switch hp := statPath(w.Home, KindHomeLayer); {
		case !hp.Exists && privateDir(w.Home):
			// A home the host does not have, in the World's private /tmp: it
			// is already the World's own and writable; no layer goes over it.
		case !hp.Dir:
			return nil, fmt.Errorf("sandbox isolation for world %q: the home %q is not a directory on this host, and the World's private home layer goes over an existing one; create it, set HOME to an existing directory, or to a path under /tmp (private to the World)", w.Name, w.Home)
		default:
			b.HomeUpper, b.HomeWork = w.HomeUpper, w.HomeWork
			b.Writable = append(b.Writable, hp)
		}
	}
	for _, s := range p.SharedCaches {
		abs, _ := expandHome(s, w.Home) // checked above
		b.Writable = append(b.Writable, statPath(abs, KindSharedCache))
	}
	// The credentials under the session's home, and under the homes the
	// host's user keeps them in when the session's HOME names another
	// (an agent's, or HOME=/elsewhere): each hidden unless granted.
	seen := map[string]bool{}
	for i, home := range append([]string{w.Home}, w.HostHomes...) {
		home = filepath.Clean(home)
		if i > 0 && (!filepath.IsAbs(home) || home == "/" || home == filepath.Clean(w.Home)) {
			continue
		}
		for _, cred := range credentialPaths(home, p.DenyPaths) {
			if seen[cred] {
				continue
			}
			seen[cred] = true
			granted := false
			for _, g := range p.PassPaths {
				if abs, _ := expandHome(g, home); abs == cred {
					granted = true
				}
			}
			if granted {
				b.Granted = append(b.Granted, statPath(cred, KindGranted))
			} else {
				b.Hidden = append(b.Hidden, statPath(cred, KindCredential))
			}
		}
	}
	b.EnvAllow = append(append(append(append([]string{}, DefaultEnvAllow...), p.EnvAllow...), p.PassEnv...), r.PassEnv...)
	b.Env, b.DroppedEnv = ScrubEnv(env, b.EnvAllow)
	return b, nil
}

func merge(base, over Policy) Policy {
	if over.Level != "" {
		base.Level = over.Level
	}
	if over.Network != "" {
		base.Network = over.Network
	}
	add := func(a, b []string) []string { return append(append([]string{}, a...), b...) }
	base.Allow = add(base.Allow, over.Allow)
	base.DenyPaths = add(base.DenyPaths, over.DenyPaths)
	base.EnvAllow = add(base.EnvAllow, over.EnvAllow)
	base.SharedCaches = add(base.SharedCaches, over.SharedCaches)
	base.PassEnv = add(base.PassEnv, over.PassEnv)
	base.PassPaths = add(base.PassPaths, over.PassPaths)
	return base
}

// privateDirs are the directories every sandboxed World gets private.
var privateDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

// privateDir says p is in one of privateDirs.
func privateDir(p string) bool {
	p = filepath.Clean(p)
	for _, d := range privateDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func statPath(p string, k PathKind) Path {
	out := Path{Path: p, Kind: k}
	if fi, err := os.Stat(p); err == nil {
		out.Exists, out.Dir = true, fi.IsDir()
	}
	return out
}

// ProxyEnv is what a command in NetworkProxy gets so that curl, git, npm, pip,
// go and the agents send their traffic to the bridge on 127.0.0.1:port.
func ProxyEnv(port int) []string {
	u := "http://127.0.0.1:" + strconv.Itoa(port)
	return []string{
		"HTTPS_PROXY=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u,
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
	}
}

// Describe says the effective boundary in one glance: a line per aspect, the
// way `strata show` and the TUI print it.
func (b *Boundary) Describe() string {
	var sb strings.Builder
	home := func(p string) string { return HomeRelative(p, b.Home) }
	fmt.Fprintf(&sb, "level    %s", b.Level)
	if b.Level == DefaultLevel {
		sb.WriteString(" (default)")
	}
	sb.WriteString("\n")
	if b.Level == LevelTree {
		sb.WriteString("warning  tree isolation protects only the source: the rest of the host is writable,\n" +
			"         credentials are readable, the environment and the network are the host's\n")
	}
	var writes []string
	for _, w := range b.Writable {
		switch w.Kind {
		case KindWorld:
			writes = append(writes, w.Path+" (the World's view)")
		case KindPrivate:
			writes = append(writes, w.Path+" (private)")
		case KindHomeLayer:
			writes = append(writes, "~ (the World's own layer)")
		case KindSharedCache:
			writes = append(writes, home(w.Path)+" (shared cache)")
		case KindHost:
			writes = append(writes, "the rest of the host")
		}
	}
	fmt.Fprintf(&sb, "writes   %s\n", strings.Join(writes, ", "))
	if b.ReadOnlyHost {
		sb.WriteString("reads    everything else, read-only; /run and host sockets private\n")
	}
	var creds []string
	for _, h := range b.Hidden {
		if h.Kind == KindCredential && h.Exists {
			creds = append(creds, home(h.Path))
		}
	}
	hidden := "strata's state"
	if len(creds) > 0 {
		hidden += fmt.Sprintf(", %d credential path%s here: %s", len(creds), plural(len(creds)), strings.Join(creds, " "))
	} else if b.Level != LevelTree {
		hidden += ", credential paths (none present here)"
	}
	fmt.Fprintf(&sb, "hides    %s\n", hidden)
	if len(b.Granted) > 0 {
		var g []string
		for _, p := range b.Granted {
			g = append(g, home(p.Path))
		}
		fmt.Fprintf(&sb, "grants   %s (read-only)\n", strings.Join(g, " "))
	}
	if b.Level == LevelTree {
		sb.WriteString("env      passed as is\n")
	} else {
		fmt.Fprintf(&sb, "env      %s", strings.Join(b.EnvAllow, " "))
		if n := len(b.DroppedEnv); n > 0 {
			fmt.Fprintf(&sb, "; %d dropped: %s", n, strings.Join(b.DroppedEnv, " "))
		}
		sb.WriteString("\n")
	}
	switch b.Network {
	case NetworkProxy:
		fmt.Fprintf(&sb, "network  proxy: %d allowed host%s (add more at %s)\n", len(b.Allow), plural(len(b.Allow)), b.AllowKey)
	case NetworkNone:
		sb.WriteString("network  none: loopback only\n")
	case NetworkHost:
		sb.WriteString("network  host: the host's network, abstract unix sockets included\n")
	}
	return sb.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// HomeRelative is p relative to home ("~/.ssh") when under it, for messages.
func HomeRelative(p, home string) string {
	if home != "" && within(p, home) {
		return filepath.Join("~", strings.TrimPrefix(p, home))
	}
	return p
}
