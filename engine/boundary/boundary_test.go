package boundary

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixture is a machine with a home holding credentials, a state root and a
// source, all under one temp dir.
type fixture struct {
	root, home, state, source string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{root: root, home: filepath.Join(root, "home"), state: filepath.Join(root, "var/lib/strata"), source: filepath.Join(root, "src/app")}
	for _, d := range []string{f.state, f.source, filepath.Join(f.home, ".ssh"), filepath.Join(f.home, ".config/gh"), filepath.Join(f.home, ".cache/go-build"), filepath.Join(f.home, ".aws")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{".ssh/id_ed25519", ".netrc"} {
		if err := os.WriteFile(filepath.Join(f.home, p), []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f fixture) world(name string) World {
	return World{
		Name: name, Source: f.source, StateRoot: f.state, Home: f.home,
		HideDirs:  []string{filepath.Join(f.state, "worlds", name)},
		HomeUpper: filepath.Join(f.state, "worlds", name, "home/upper"),
		HomeWork:  filepath.Join(f.state, "worlds", name, "home/work"),
	}
}

// A shared cache or grant that would undo the boundary is refused, naming the
// key and why; the ones a person means are accepted.
func TestCheckRefusesPathsThatUndoTheBoundary(t *testing.T) {
	f := newFixture(t)
	if err := os.Symlink("/", filepath.Join(f.root, "rootlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.home, ".ssh"), filepath.Join(f.root, "sshlink")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, toml, key, why string
	}{
		{"root", `shared_caches = ["/"]`, "boundary.shared_caches", "whole host writable"},
		{"state root", `shared_caches = ["` + f.state + `"]`, "boundary.shared_caches", "strata's state"},
		{"ancestor of state root", `shared_caches = ["` + filepath.Join(f.root, "var") + `"]`, "boundary.shared_caches", "strata's state"},
		{"under state root", `shared_caches = ["` + filepath.Join(f.state, "worlds") + `"]`, "boundary.shared_caches", "strata's state"},
		{"whole home", `shared_caches = ["~"]`, "boundary.shared_caches", "whole home"},
		{"credential dir", `shared_caches = ["~/.ssh"]`, "boundary.shared_caches", "credential path"},
		{"under credential", `shared_caches = ["~/.aws/cli/cache"]`, "boundary.shared_caches", "credential path"},
		{"holds credential", `shared_caches = ["~/.config"]`, "boundary.shared_caches", "holds the credential path"},
		{"user's credential", "deny_paths = [\"~/.cache/secret\"]\nshared_caches = [\"~/.cache\"]", "boundary.shared_caches", "holds the credential path"},
		{"link to root", `shared_caches = ["` + filepath.Join(f.root, "rootlink") + `"]`, "boundary.shared_caches", "a link to /"},
		{"link to ssh", `shared_caches = ["` + filepath.Join(f.root, "sshlink") + `"]`, "boundary.shared_caches", "credential path"},
		{"relative", `shared_caches = ["cache"]`, "boundary.shared_caches", "absolute path"},
		{"per world", "[worlds.w]\nshared_caches = [\"/\"]", "boundary.worlds.w.shared_caches", "whole host"},
		{"per agent", "[agents.claude]\npass_paths = [\"~/.bashrc\"]", "boundary.agents.claude.pass_paths", "not a hidden credential path"},
		{"bad level", `level = "open"`, "boundary.level", "want sandbox"},
		{"bad network", `network = "wide"`, "boundary.network", "want proxy"},
		{"bad host", `allow = ["https://evil.example/"]`, "boundary.allow", "not a URL"},
		{"bad env", `env_allow = ["A=B"]`, "boundary.env_allow", "variable name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(prefixTable(tc.toml))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Check(Host{Home: f.home, StateRoot: f.state})
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("Check = %v, want a *KeyError for %s", err, tc.key)
			}
			if ke.Key != tc.key || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Check = %q (key %q), want key %q and %q", err, ke.Key, tc.key, tc.why)
			}
		})
	}
	ok := `level = "sandbox"
shared_caches = ["~/.cache/go-build", "/opt/ccache"]
pass_paths = ["~/.config/gh"]
allow = ["*.internal.example:8443", "registry.local"]
env_allow = ["GOFLAGS", "CARGO_*"]`
	c, err := Parse(prefixTable(ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(Host{Home: f.home, StateRoot: f.state}); err != nil {
		t.Fatalf("Check of a sane config: %v", err)
	}
}

// prefixTable turns a fragment into a config.toml with its [boundary] table,
// with a table of another owner around it.
func prefixTable(fragment string) string {
	fragment = strings.ReplaceAll(fragment, "[worlds.", "[boundary.worlds.")
	fragment = strings.ReplaceAll(fragment, "[agents.", "[boundary.agents.")
	return "theme = \"dark\"\n[keys]\nquit = \"q\"\n[boundary]\n" + fragment + "\n"
}

// A World's source is known only at Compute: a cache overlapping it is refused
// there, since writes to it would bypass review.
func TestComputeRefusesCacheOverlappingSource(t *testing.T) {
	f := newFixture(t)
	for _, cache := range []string{f.source, filepath.Join(f.source, "node_modules"), filepath.Join(f.root, "src")} {
		c := &Config{Policy: Policy{SharedCaches: []string{cache}}}
		_, err := Compute(c, f.world("w"), nil, Request{})
		if !errors.Is(err, ErrRefusedPath) || !strings.Contains(err.Error(), "overlaps the source") {
			t.Errorf("cache %s: Compute = %v, want a refusal naming the source", cache, err)
		}
	}
}

func TestParseRefusesUnknownKey(t *testing.T) {
	_, err := Parse("[boundary]\nnetwrok = \"none\"\n") //nolint:misspell // the misspelt key is the test
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "boundary.netwrok" || !strings.Contains(err.Error(), "the keys are level, network") {
		t.Fatalf("Parse = %v, want an unknown-key error naming the keys", err)
	}
	c, err := Parse("theme = \"x\"\n[cube]\nurl = \"http://x\"\n")
	if err != nil || c.Level != "" {
		t.Fatalf("a config without [boundary] = %+v, %v; want the zero table", c, err)
	}
}

var hostileEnv = []string{
	"PATH=/usr/bin:/bin", "HOME=/home/u", "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
	"SSH_AUTH_SOCK=/tmp/ssh-x/agent.1", "GITHUB_TOKEN=ghp_x", "FOO_TOKEN=tok", "AWS_SECRET_ACCESS_KEY=k",
	"OPENAI_API_KEY=sk-x", "ANTHROPIC_API_KEY=sk-ant", "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/0/bus",
	"GOFLAGS=-mod=mod", "TMUX=/tmp/tmux-0/default,1,0",
}

func TestComputeLevels(t *testing.T) {
	f := newFixture(t)
	cfg := &Config{
		Policy: Policy{SharedCaches: []string{"~/.cache/go-build"}, EnvAllow: []string{"GOFLAGS"}},
		Worlds: map[string]Policy{"w": {PassEnv: []string{"ANTHROPIC_API_KEY"}, PassPaths: []string{"~/.config/gh"}, Allow: []string{"registry.local:4873"}}},
	}
	sandbox, err := Compute(cfg, f.world("w"), hostileEnv, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if sandbox.Level != LevelSandbox || sandbox.Network != NetworkProxy || !sandbox.ReadOnlyHost || !sandbox.PrivateRun {
		t.Fatalf("default = level %s network %s ro %v run %v; want sandbox, proxy, read-only host, private /run", sandbox.Level, sandbox.Network, sandbox.ReadOnlyHost, sandbox.PrivateRun)
	}
	wantWritable := []string{f.source, "/tmp", "/var/tmp", "/dev/shm", f.home, filepath.Join(f.home, ".cache/go-build")}
	if got := paths(sandbox.Writable); !slices.Equal(got, wantWritable) {
		t.Fatalf("writable = %v, want %v", got, wantWritable)
	}
	if sandbox.HomeUpper == "" || !strings.HasPrefix(sandbox.HomeUpper, f.state) {
		t.Fatalf("home upper %q: want the World's layer inside the state root", sandbox.HomeUpper)
	}
	hidden := paths(sandbox.Hidden)
	for _, p := range []string{f.state, filepath.Join(f.home, ".ssh"), filepath.Join(f.home, ".netrc"), filepath.Join(f.home, ".aws"), filepath.Join(f.home, ".docker/config.json")} {
		if !slices.Contains(hidden, p) {
			t.Errorf("%s not hidden (hidden: %v)", p, hidden)
		}
	}
	if slices.Contains(hidden, filepath.Join(f.home, ".config/gh")) || !slices.Contains(paths(sandbox.Granted), filepath.Join(f.home, ".config/gh")) {
		t.Errorf("granted ~/.config/gh: hidden %v granted %v", hidden, sandbox.Granted)
	}
	wantEnv := []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "ANTHROPIC_API_KEY=sk-ant", "GOFLAGS=-mod=mod"}
	if !slices.Equal(sandbox.Env, wantEnv) {
		t.Fatalf("env = %v, want %v", sandbox.Env, wantEnv)
	}
	for _, name := range []string{"SSH_AUTH_SOCK", "GITHUB_TOKEN", "FOO_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "DBUS_SESSION_BUS_ADDRESS", "TMUX"} {
		if !slices.Contains(sandbox.DroppedEnv, name) {
			t.Errorf("%s not dropped (dropped: %v)", name, sandbox.DroppedEnv)
		}
	}
	if !sandbox.Allow.Allows("api.anthropic.com", 443) || !sandbox.Allow.Allows("registry.local", 4873) || sandbox.Allow.Allows("registry.local", 80) || sandbox.Allow.Allows("evil.example", 443) {
		t.Errorf("allow-list %v: want defaults plus registry.local:4873 only", sandbox.Allow.Strings())
	}
	if sandbox.AllowKey != "boundary.worlds.w.allow" {
		t.Errorf("allow key %q", sandbox.AllowKey)
	}

	// Another World does not get w's grants.
	other, err := Compute(cfg, f.world("v"), hostileEnv, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(other.Env, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") }) || len(other.Granted) != 0 {
		t.Errorf("World v got w's grants: env %v granted %v", other.Env, other.Granted)
	}
	// ... unless the session names the variable.
	named, _ := Compute(cfg, f.world("v"), hostileEnv, Request{PassEnv: []string{"OPENAI_API_KEY"}})
	if !slices.Contains(named.Env, "OPENAI_API_KEY=sk-x") {
		t.Errorf("a named variable is not passed: %v", named.Env)
	}

	strict, err := Compute(cfg, f.world("w"), hostileEnv, Request{Level: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	if strict.Network != NetworkNone || strict.HomeUpper != "" || slices.Contains(paths(strict.Writable), f.home) {
		t.Fatalf("strict: network %s home upper %q writable %v; want none and a read-only home", strict.Network, strict.HomeUpper, paths(strict.Writable))
	}
	strictNet, _ := Compute(cfg, f.world("w"), nil, Request{Level: "strict", Network: "proxy"})
	if strictNet.Network != NetworkProxy {
		t.Errorf("strict with --network proxy = %s", strictNet.Network)
	}

	tree, err := Compute(cfg, f.world("w"), hostileEnv, Request{Level: "tree"})
	if err != nil {
		t.Fatal(err)
	}
	if tree.ReadOnlyHost || tree.Network != NetworkHost || !slices.Equal(tree.Env, hostileEnv) || len(tree.Hidden) != 2 {
		t.Fatalf("tree: ro %v network %s hidden %v; want today's behaviour (host writable, host network, env as is, state hidden)", tree.ReadOnlyHost, tree.Network, tree.Hidden)
	}
	if !strings.Contains(tree.Describe(), "warning") {
		t.Errorf("tree's description carries no warning:\n%s", tree.Describe())
	}
}

func paths(ps []Path) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Path
	}
	return out
}

func TestDescribe(t *testing.T) {
	f := newFixture(t)
	b, err := Compute(&Config{Policy: Policy{SharedCaches: []string{"~/.cache/go-build"}}}, f.world("w"), hostileEnv, Request{})
	if err != nil {
		t.Fatal(err)
	}
	got := b.Describe()
	for _, want := range []string{
		"level    sandbox (default)\n",
		"writes   " + f.source + " (the World's view), /tmp (private), /var/tmp (private), /dev/shm (private), ~ (the World's own layer), ~/.cache/go-build (shared cache)\n",
		"reads    everything else, read-only",
		"4 credential paths here: ~/.ssh ~/.aws ~/.netrc ~/.config/gh\n",
		"; 9 dropped: ANTHROPIC_API_KEY AWS_SECRET_ACCESS_KEY DBUS_SESSION_BUS_ADDRESS FOO_TOKEN GITHUB_TOKEN GOFLAGS OPENAI_API_KEY SSH_AUTH_SOCK TMUX\n",
		fmt.Sprintf("network  proxy: %d allowed hosts (add more at boundary.worlds.w.allow)\n", len(DefaultAllow)),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "warning") {
		t.Errorf("the default level warns:\n%s", got)
	}
}

func TestHostPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		host    string
		port    int
		want    bool
	}{
		{"pypi.org", "pypi.org", 443, true},
		{"pypi.org", "PyPI.org.", 80, true},
		{"pypi.org", "evilpypi.org", 443, false},
		{"pypi.org", "pypi.org.evil.example", 443, false},
		{"*.github.com", "codeload.github.com", 443, true},
		{"*.github.com", "github.com", 443, false},
		{"*.github.com", "evilgithub.com", 443, false},
		{"registry.local:4873", "registry.local", 4873, true},
		{"registry.local:4873", "registry.local", 443, false},
		{"127.0.0.1:8080", "127.0.0.1", 8080, true},
		{"[::1]:8080", "::1", 8080, true},
		{"::1", "[::1]", 9, true},
	} {
		p, err := ParseHostPattern(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		if got := p.Match(tc.host, tc.port); got != tc.want {
			t.Errorf("%s matches %s:%d = %v, want %v", tc.pattern, tc.host, tc.port, got, tc.want)
		}
	}
	for _, bad := range []string{"", "http://x", "a*.b", "*", "*.", "x:0", "x:99999", "x/y", "*.10.0.0.1", "bad host"} {
		if _, err := ParseHostPattern(bad); err == nil {
			t.Errorf("ParseHostPattern(%q) accepted", bad)
		}
	}
}

func TestScrubEnvPrefixes(t *testing.T) {
	kept, dropped := ScrubEnv([]string{"LC_ALL=C", "LCX=1", "CARGO_HOME=/c", "CARGO_REGISTRY_TOKEN=t"}, []string{"LC_*", "CARGO_HOME"})
	if !slices.Equal(kept, []string{"LC_ALL=C", "CARGO_HOME=/c"}) || !slices.Equal(dropped, []string{"CARGO_REGISTRY_TOKEN", "LCX"}) {
		t.Fatalf("kept %v dropped %v", kept, dropped)
	}
}

// The message a person reads for the commonest mistake.
func TestCheckMessage(t *testing.T) {
	c, err := Parse("[boundary]\nshared_caches = [\"/\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	err = c.Check(Host{Home: "/home/u", StateRoot: "/home/u/.local/share/strata"})
	want := `boundary.shared_caches: "/": refused path: it would make the whole host writable; name the cache directory itself`
	if err == nil || err.Error() != want || !errors.Is(err, ErrRefusedPath) {
		t.Fatalf("Check = %v, want %q", err, want)
	}
}

// Without a home, no credential would be found: refused, not silently open.
func TestComputeRefusesUnknownHome(t *testing.T) {
	f := newFixture(t)
	for _, home := range []string{"", "relative", "/"} {
		w := f.world("w")
		w.Home = home
		if _, err := Compute(nil, w, nil, Request{}); err == nil || !strings.Contains(err.Error(), "is HOME set?") {
			t.Errorf("home %q: Compute = %v, want a refusal", home, err)
		}
		if _, err := Compute(nil, w, nil, Request{Level: "tree"}); err != nil {
			t.Errorf("home %q at tree: %v", home, err)
		}
	}
}

// A HOME that is not a directory on the host cannot carry the home layer:
// a clear refusal before any mount (it was the kernel's "failed to resolve"
// from deep in the session init); a HOME in the World's private /tmp needs
// no layer and works.
func TestComputeHomeLayerNeedsAHome(t *testing.T) {
	f := newFixture(t)
	w := f.world("w")
	w.Home = "/nonexistent-strata-test-home"
	if _, err := Compute(nil, w, nil, Request{}); err == nil || !strings.Contains(err.Error(), "not a directory on this host") {
		t.Fatalf("missing home: Compute = %v, want a refusal naming it", err)
	}
	w.Home = "/tmp/agent-home-that-does-not-exist"
	b, err := Compute(nil, w, nil, Request{})
	if err != nil {
		t.Fatalf("home under /tmp: %v", err)
	}
	if b.HomeUpper != "" {
		t.Fatalf("home under the private /tmp got a layer: %+v", b)
	}
	w.Home = f.home
	if b, err = Compute(nil, w, nil, Request{}); err != nil || b.HomeUpper == "" {
		t.Fatalf("a real home: layer %q, err %v", b.HomeUpper, err)
	}
}
