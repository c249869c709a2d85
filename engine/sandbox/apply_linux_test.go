package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stratahq/strata/engine/boundary"
)

// The apply helper: the test binary re-executed in new mount, pid, cgroup and
// uts namespaces applies the plan in its environment, then tries what a
// hostile command would and prints the results.
func TestMain(m *testing.M) {
	if planJSON := os.Getenv("STRATA_SANDBOX_HELPER_PLAN"); planJSON != "" {
		os.Exit(applyHelper(planJSON, os.Getenv("STRATA_SANDBOX_HELPER_PROBES")))
	}
	os.Exit(m.Run())
}

// probe is one hostile attempt: read a file, write one, list a dir or dial a
// unix socket.
type probe struct {
	Name string `json:"name"`
	Op   string `json:"op"` // read, write, list, dial
	Path string `json:"path"`
}

type outcome struct {
	OK   bool   `json:"ok"`
	Data string `json:"data,omitempty"` // what was read or listed
	Err  string `json:"err,omitempty"`
}

func applyHelper(planJSON, probesJSON string) int {
	var plan []Step
	var probes []probe
	if err := json.Unmarshal([]byte(planJSON), &plan); err != nil {
		fmt.Println(`{"apply":"bad plan"}`)
		return 1
	}
	json.Unmarshal([]byte(probesJSON), &probes)
	out := map[string]outcome{}
	if err := Apply(plan); err != nil {
		out["apply"] = outcome{Err: err.Error()}
	} else {
		out["apply"] = outcome{OK: true}
	}
	for _, p := range probes {
		var o outcome
		var err error
		switch p.Op {
		case "read":
			var b []byte
			b, err = os.ReadFile(p.Path)
			o.Data = string(b)
		case "write":
			err = os.WriteFile(p.Path, []byte("hostile"), 0o644)
		case "list":
			var ents []os.DirEntry
			ents, err = os.ReadDir(p.Path)
			for _, e := range ents {
				o.Data += e.Name() + " "
			}
		case "dial":
			var c net.Conn
			if c, err = net.Dial("unix", p.Path); err == nil {
				c.Close()
			}
		}
		o.OK = err == nil
		if err != nil {
			o.Err = err.Error()
		}
		out[p.Name] = o
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// sandboxHost is a machine laid out where a wrong plan shows: strata's state
// and the source under the home, credentials in it, a host dir outside.
// It lives outside /tmp and /var/tmp, which the plan makes private.
type sandboxHost struct {
	root, home, state, source, merged, outside, cache string
}

func newSandboxHost(t *testing.T) sandboxHost {
	t.Helper()
	root, err := os.MkdirTemp("/var/lib", "strata-sandbox-test-")
	if err != nil {
		t.Skipf("no place outside /tmp for the fixture: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	h := sandboxHost{root: root, home: filepath.Join(root, "home/u"), outside: filepath.Join(root, "outside")}
	h.state = filepath.Join(h.home, ".local/share/strata")
	h.source = filepath.Join(h.home, "src/app")
	h.merged = filepath.Join(h.state, "worlds/w/merged")
	h.cache = filepath.Join(h.home, ".cache/ccache")
	files := map[string]string{
		".ssh/id_ed25519":      "PRIVATE KEY",
		".netrc":               "machine github.com password hunter2",
		".config/gh/hosts.yml": "oauth_token: gho_x",
		".local/share/strata/worlds/other/upper/secret": "other world's secret",
		"src/app/main.go": "package main",
		".local/share/strata/worlds/w/merged/main.go": "package main",
		".bashrc": "# real",
	}
	for rel, data := range files {
		p := filepath.Join(h.home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{h.outside, h.cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func listenUnix(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("cannot serve a host socket at %s: %v", path, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if c, err := net.Dial("unix", path); err != nil {
		t.Fatalf("precondition: the host socket %s is not reachable from the host: %v", path, err)
	} else {
		c.Close()
	}
}

// runPlan executes plan in a helper in fresh namespaces and returns what
// each probe got.
func runPlan(t *testing.T, plan []Step, probes []probe) map[string]outcome {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("applying a mount plan needs root (CAP_SYS_ADMIN in a new mount namespace)")
	}
	pj, _ := json.Marshal(plan)
	prj, _ := json.Marshal(probes)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STRATA_SANDBOX_HELPER_PLAN="+string(pj), "STRATA_SANDBOX_HELPER_PROBES="+string(prj))
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWCGROUP | syscall.CLONE_NEWUTS}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("no namespaces here: %v", err)
	}
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	res := map[string]outcome{}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	if !res["apply"].OK {
		t.Fatalf("Apply: %s", res["apply"].Err)
	}
	return res
}

// The sandbox plan, executed in a real mount namespace, keeps a hostile
// command (here with every capability, so this proves the view; the session
// init's capability drop keeps it from unmounting) away from credentials,
// strata's state, the host and host sockets, while the World, the home layer,
// a shared cache and /tmp stay writable.
func TestApplySandboxPlan(t *testing.T) {
	h := newSandboxHost(t)
	tag := strconv.Itoa(os.Getpid())
	tmpSock, runSock := "/tmp/strata-sandbox-test-"+tag+".sock", "/run/strata-sandbox-test-"+tag+".sock"
	listenUnix(t, tmpSock)
	listenUnix(t, runSock)
	hostTmpFile := "/tmp/strata-sandbox-test-" + tag + ".written"
	t.Cleanup(func() { os.Remove(hostTmpFile) })

	cfg := &boundary.Config{Policy: boundary.Policy{SharedCaches: []string{h.cache}, PassPaths: []string{"~/.config/gh"}}}
	b, err := boundary.Compute(cfg, boundary.World{
		Name: "w", Source: h.source, StateRoot: h.state, Home: h.home,
		HomeUpper: filepath.Join(h.state, "worlds/w/home/upper"), HomeWork: filepath.Join(h.state, "worlds/w/home/work"),
	}, nil, boundary.Request{})
	if err != nil {
		t.Fatal(err)
	}
	home := func(rel string) string { return filepath.Join(h.home, rel) }
	res := runPlan(t, Plan(b, Input{Merged: h.merged}), []probe{
		{"read-ssh-key", "read", home(".ssh/id_ed25519")},
		{"list-ssh", "list", home(".ssh")},
		{"write-ssh", "write", home(".ssh/authorized_keys")},
		{"read-netrc", "read", home(".netrc")},
		{"write-netrc", "write", home(".netrc")},
		{"read-granted", "read", home(".config/gh/hosts.yml")},
		{"write-granted", "write", home(".config/gh/hosts.yml")},
		{"read-other-world", "read", filepath.Join(h.state, "worlds/other/upper/secret")},
		{"write-outside", "write", filepath.Join(h.outside, "probe")},
		{"write-etc", "write", "/etc/strata-sandbox-probe-" + tag},
		{"write-home", "write", home(".bashrc")},
		{"write-world", "write", filepath.Join(h.source, "new.go")},
		{"write-cache", "write", filepath.Join(h.cache, "obj-"+tag)},
		{"write-tmp", "write", hostTmpFile},
		{"dial-tmp-socket", "dial", tmpSock},
		{"dial-run-socket", "dial", runSock},
		{"write-cgroup", "write", "/sys/fs/cgroup/cgroup.procs"},
		{"write-proc-sys", "write", "/proc/sys/kernel/hostname"},
		{"write-dev-null", "write", "/dev/null"},
	})
	denied := func(name, why string) {
		t.Helper()
		// A read or a listing may succeed empty (a mask); a write or a
		// dial must fail.
		mustFail := strings.HasPrefix(name, "write") || strings.HasPrefix(name, "dial")
		if o := res[name]; o.OK && (o.Data != "" || mustFail) {
			t.Errorf("%s: succeeded (%q): %s", name, o.Data, why)
		}
	}
	allowed := func(name string) {
		t.Helper()
		if o := res[name]; !o.OK {
			t.Errorf("%s: %s", name, o.Err)
		}
	}
	denied("read-ssh-key", "~/.ssh is readable")
	denied("list-ssh", "~/.ssh lists")
	denied("write-ssh", "~/.ssh is writable")
	if o := res["read-netrc"]; o.Data != "" {
		t.Errorf("~/.netrc reads %q", o.Data)
	}
	denied("write-netrc", "~/.netrc is writable")
	if o := res["read-granted"]; o.Data != "oauth_token: gho_x" {
		t.Errorf("granted ~/.config/gh/hosts.yml reads %q (%s)", o.Data, o.Err)
	}
	denied("write-granted", "a grant is read-only")
	denied("read-other-world", "strata's state is readable")
	denied("write-outside", "the host outside the World is writable")
	denied("write-etc", "/etc is writable")
	denied("dial-tmp-socket", "a host socket in /tmp is reachable")
	denied("dial-run-socket", "a host socket in /run is reachable")
	denied("write-cgroup", "cgroupfs is writable")
	denied("write-proc-sys", "/proc/sys is writable")
	for _, name := range []string{"write-home", "write-world", "write-cache", "write-tmp", "write-dev-null"} {
		allowed(name)
	}

	// Where the writes landed: the home's in the World's layer, the World's
	// in its view, the cache in place; nothing in the host's home, source,
	// /tmp, /etc or outside dir.
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
	if got := read(home(".bashrc")); got != "# real" {
		t.Errorf("the real ~/.bashrc became %q", got)
	}
	if got := read(filepath.Join(b.HomeUpper, ".bashrc")); got != "hostile" {
		t.Errorf("the home layer's .bashrc = %q, want the World's write", got)
	}
	if got := read(filepath.Join(h.merged, "new.go")); got != "hostile" {
		t.Errorf("the World's view lacks the write (%q)", got)
	}
	for _, p := range []string{filepath.Join(h.source, "new.go"), hostTmpFile, filepath.Join(h.outside, "probe"), "/etc/strata-sandbox-probe-" + tag, home(".ssh/authorized_keys")} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written on the host", p)
		}
	}
	if got := read(filepath.Join(h.cache, "obj-"+tag)); got != "hostile" {
		t.Errorf("the shared cache lacks the write (%q)", got)
	}
	if got := read(home(".netrc")); got != "machine github.com password hunter2" {
		t.Errorf("the real ~/.netrc became %q", got)
	}
}

// Strict: the home is read-only and credentials stay hidden.
func TestApplyStrictPlan(t *testing.T) {
	h := newSandboxHost(t)
	b, err := boundary.Compute(nil, boundary.World{
		Name: "w", Source: h.source, StateRoot: h.state, Home: h.home,
		HomeUpper: filepath.Join(h.state, "worlds/w/home/upper"), HomeWork: filepath.Join(h.state, "worlds/w/home/work"),
	}, nil, boundary.Request{Level: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	res := runPlan(t, Plan(b, Input{Merged: h.merged}), []probe{
		{"write-home", "write", filepath.Join(h.home, ".bashrc")},
		{"read-ssh-key", "read", filepath.Join(h.home, ".ssh/id_ed25519")},
		{"write-world", "write", filepath.Join(h.source, "new.go")},
	})
	if res["write-home"].OK || !strings.Contains(res["write-home"].Err, "read-only") {
		t.Errorf("strict home write = %+v, want EROFS", res["write-home"])
	}
	if res["read-ssh-key"].OK {
		t.Errorf("strict reads ~/.ssh/id_ed25519")
	}
	if !res["write-world"].OK {
		t.Errorf("strict World write: %s", res["write-world"].Err)
	}
}

// A source and a shared cache under /tmp (where tests and scratch checkouts
// live) are cloned before the private /tmp covers them and attached in it.
func TestApplySourceAndCacheUnderTmp(t *testing.T) {
	h := newSandboxHost(t)
	source, cache := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(source, "real.go"), []byte("real"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := boundary.Compute(&boundary.Config{Policy: boundary.Policy{SharedCaches: []string{cache}}}, boundary.World{
		Name: "w", Source: source, StateRoot: h.state, Home: h.home,
		HomeUpper: filepath.Join(h.state, "worlds/w/home/upper"), HomeWork: filepath.Join(h.state, "worlds/w/home/work"),
	}, nil, boundary.Request{})
	if err != nil {
		t.Fatal(err)
	}
	res := runPlan(t, Plan(b, Input{Merged: h.merged}), []probe{
		{"read-world", "read", filepath.Join(source, "main.go")},
		{"read-real", "read", filepath.Join(source, "real.go")},
		{"write-world", "write", filepath.Join(source, "new.go")},
		{"write-cache", "write", filepath.Join(cache, "obj")},
	})
	if o := res["read-world"]; o.Data != "package main" {
		t.Errorf("the source path shows %q (%s), want the World's view", o.Data, o.Err)
	}
	if res["read-real"].OK {
		t.Errorf("the real source shows through the World's view")
	}
	if !res["write-world"].OK || !res["write-cache"].OK {
		t.Fatalf("writes: world %s, cache %s", res["write-world"].Err, res["write-cache"].Err)
	}
	if _, err := os.Stat(filepath.Join(source, "new.go")); err == nil {
		t.Errorf("the World's write reached the real source")
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "obj")); string(b) != "hostile" {
		t.Errorf("the shared cache under /tmp lacks the write (%q)", b)
	}
}

// A home in a dir the plan makes private (HOME=/tmp/x, which the host has):
// the session sees it through the World's layer, writable, its writes in
// the layer's upper, its credentials hidden; not an empty private /tmp
// without it.
func TestApplyHomeUnderTmp(t *testing.T) {
	h := newSandboxHost(t)
	home := t.TempDir()
	for rel, data := range map[string]string{".bashrc": "# real", ".ssh/id_ed25519": "PRIVATE KEY"} {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The source under that home, as a rootless user's often is: the
	// World's view, not the home layer's, at the source path.
	source := filepath.Join(home, "src")
	if err := os.MkdirAll(source, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(source, "main.go"), []byte("the real source"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := boundary.Compute(nil, boundary.World{
		Name: "w", Source: source, StateRoot: h.state, Home: home,
		HomeUpper: filepath.Join(h.state, "worlds/w/home/upper"), HomeWork: filepath.Join(h.state, "worlds/w/home/work"),
	}, nil, boundary.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if b.HomeUpper == "" {
		t.Fatal("precondition: a home layer over a home the host has")
	}
	res := runPlan(t, Plan(b, Input{Merged: h.merged}), []probe{
		{"read-bashrc", "read", filepath.Join(home, ".bashrc")},
		{"write-home", "write", filepath.Join(home, "new")},
		{"read-key", "read", filepath.Join(home, ".ssh/id_ed25519")},
		{"write-key", "write", filepath.Join(home, ".ssh/planted")},
		{"write-tmp", "write", "/tmp/beside"},
		{"read-world", "read", filepath.Join(source, "main.go")},
		{"write-world", "write", filepath.Join(source, "new.go")},
	})
	if o := res["read-bashrc"]; o.Data != "# real" {
		t.Errorf("~/.bashrc in a home under /tmp reads %q (%s), want the host's through the layer", o.Data, o.Err)
	}
	if !res["write-home"].OK {
		t.Errorf("writing the home under /tmp: %s", res["write-home"].Err)
	}
	if data, err := os.ReadFile(filepath.Join(b.HomeUpper, "new")); err != nil || string(data) != "hostile" {
		t.Errorf("the home's write is not in the World's layer: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(home, "new")); err == nil {
		t.Error("the home's write reached the host's home")
	}
	if o := res["read-key"]; o.OK && o.Data != "" {
		t.Errorf("read ~/.ssh/id_ed25519 in a home under /tmp: %q", o.Data)
	}
	if res["write-key"].OK {
		t.Error("wrote into the hidden ~/.ssh")
	}
	if !res["write-tmp"].OK {
		t.Errorf("the private /tmp beside the home: %s", res["write-tmp"].Err)
	}
	if _, err := os.Stat("/tmp/beside"); err == nil {
		os.Remove("/tmp/beside")
		t.Error("the private /tmp's write reached the host's /tmp")
	}
	if o := res["read-world"]; o.Data != "package main" {
		t.Errorf("the source path under the home reads %q (%s), want the World's view", o.Data, o.Err)
	}
	if data, err := os.ReadFile(filepath.Join(h.merged, "new.go")); !res["write-world"].OK || err != nil || string(data) != "hostile" {
		t.Errorf("a write at the source path under the home is not the World's: %s, %q, %v", res["write-world"].Err, data, err)
	}
	if _, err := os.Stat(filepath.Join(b.HomeUpper, "src", "new.go")); err == nil {
		t.Error("a write at the source path went to the home layer")
	}
}
