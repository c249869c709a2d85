package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/cube/cubetest"
)

// The main goroutine keeps the main thread, so that none of the fake's
// sandbox threads (each in a mount namespace of its own) can end up parked
// on it: /proc/self/mountinfo is the main thread's.
func init() { runtime.LockOSThread() }

// newCubeEnv is an installation whose config.toml points at a fake
// CubeSandbox (running in this test process) that wants an API key, read
// from the environment variable the config names.
func newCubeEnv(t *testing.T, extraConfig string) (*env, *cubetest.Server) {
	t.Helper()
	e := newEnv(t)
	srv := cubetest.New(t, cubetest.Options{APIKey: "e2e-key", Templates: []string{"base", "small", "large"}})
	cfg := "[cube]\nendpoint = \"" + srv.URL() + "\"\nproxy_addr = \"" + srv.ProxyAddr() + "\"\ndomain = \"" + srv.Domain() + "\"\n" +
		"api_key_env = \"STRATA_E2E_CUBE_KEY\"\n" + extraConfig
	must(t, os.WriteFile(filepath.Join(filepath.Dir(e.home), "config.toml"), []byte(cfg), 0o644))
	e.vars = append(e.vars, "STRATA_E2E_CUBE_KEY=e2e-key")
	return e, srv
}

type cubeWorldJSON struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	Status       string `json:"status"`
	MountBackend string `json:"mount_backend"`
	Dialect      string `json:"dialect"`
	Cube         *struct {
		SandboxID string `json:"sandbox_id"`
		Template  string `json:"template"`
		Request   string `json:"request"`
		Driver    string `json:"driver"`
	} `json:"cube"`
}

func (e *env) cubeWorld(args ...string) cubeWorldJSON {
	e.t.Helper()
	var w cubeWorldJSON
	if err := json.Unmarshal([]byte(e.ok(args...)), &w); err != nil {
		e.t.Fatal(err)
	}
	if w.Cube == nil {
		e.t.Fatalf("strata %v: no cube table", args)
	}
	return w
}

func TestE2ECubeFullFlow(t *testing.T) {
	t.Parallel()
	e, srv := newCubeEnv(t, "template = \"base\"\n")
	w := e.cubeWorld("new", "w", "--backend", "cube", "--json")
	if w.State != "ready" || w.Cube.SandboxID == "" || w.Cube.Driver != "kernel" || w.Dialect != "kernel" {
		t.Fatalf("new: %+v %+v", w, w.Cube)
	}
	if out := e.ok("exec", "w", "--", "cat", filepath.Join(e.source, "a.txt")); out != "hello\n" {
		t.Fatalf("read the source through the guest overlay: %q", out)
	}
	if out := e.ok("exec", "w", "--", "pwd"); strings.TrimSpace(out) != e.source {
		t.Errorf("cwd in the guest %q, want %s", out, e.source)
	}
	errs := e.fails(7, "to stderr", "exec", "w", "--", "sh", "-c", "echo to stderr >&2; exit 7")
	if strings.Contains(errs, "strata-start") {
		t.Errorf("the start marker leaked: %q", errs)
	}
	e.ok("exec", "w", "--", "sh", "-c", "echo changed >> a.txt && echo new > c.txt && rm sub/b.txt")
	if e.readSource("a.txt") != "hello\n" || e.readSource("sub/b.txt") != "bye\n" {
		t.Fatal("the source changed")
	}
	got := map[string]string{}
	for _, c := range e.status("w").Changes {
		got[c.Path] = c.Kind
	}
	if got["a.txt"] != "modified" || got["c.txt"] != "added" || got["sub/b.txt"] != "deleted" || len(got) != 3 {
		t.Fatalf("status: %v", got)
	}

	// --detach: the runner holds the stream after the caller is gone.
	id := strings.TrimSpace(e.ok("exec", "w", "--detach", "--", "sh", "-c", "sleep 0.5; echo late"))
	if out := e.ok("logs", "w", id, "-f"); out != "late\n" {
		t.Errorf("logs -f of a detached cube session: %q", out)
	}
	var ss []struct {
		ID        string `json:"id"`
		State     string `json:"state"`
		ExitCode  int    `json:"exit_code"`
		Signal    string `json:"signal"`
		Runtime   string `json:"runtime"`
		Isolation string `json:"isolation"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
	if last := ss[len(ss)-1]; last.ID != id || last.State != "exited" || last.Runtime != "cube" || last.Isolation != "" {
		t.Errorf("sessions: %+v", last)
	}
	// kill reaches the command in the sandbox.
	id = strings.TrimSpace(e.ok("exec", "w", "--detach", "--", "sleep", "30"))
	e.ok("kill", "w", id)
	deadline := time.Now().Add(15 * time.Second)
	for {
		must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
		if last := ss[len(ss)-1]; last.State == "killed" && last.Signal == "SIGTERM" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed session: %+v", ss[len(ss)-1])
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Snapshot, rollback, fork.
	var snap struct {
		ID   string `json:"id"`
		Cube string `json:"cube_snapshot"`
	}
	must(t, json.Unmarshal([]byte(e.ok("snap", "w", "--json")), &snap))
	if !strings.HasPrefix(snap.Cube, "snap-") {
		t.Errorf("snap: %+v", snap)
	}
	e.ok("exec", "w", "--", "sh", "-c", "echo later > c.txt && echo vm > /tmp/vm")
	e.ok("rollback", "w", snap.ID)
	if out := e.ok("exec", "w", "--", "sh", "-c", "cat c.txt; test -e /tmp/vm || echo no-vm-file"); out != "new\nno-vm-file\n" {
		t.Errorf("after rollback: %q", out)
	}
	e.ok("fork", "w", "--snap", snap.ID, "-n", "1", "--prefix", "f")
	if out := e.ok("exec", "f-1", "--", "cat", "c.txt"); out != "new\n" {
		t.Errorf("fork: %q", out)
	}

	e.ok("apply", "w")
	if e.readSource("a.txt") != "hello\nchanged\n" || e.readSource("c.txt") != "new\n" {
		t.Errorf("apply: a.txt %q c.txt %q", e.readSource("a.txt"), e.readSource("c.txt"))
	}
	var doc struct {
		Cube struct{ Status, Detail string } `json:"cube"`
	}
	out, _, _ := e.run("doctor", "--json")
	must(t, json.Unmarshal([]byte(out), &doc))
	if doc.Cube.Status != "ok" || !strings.Contains(doc.Cube.Detail, "host mount ok") {
		t.Errorf("doctor: %+v", doc.Cube)
	}

	e.ok("rm", "w", "--force")
	e.ok("rm", "f-1", "--force")
	if ids := srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left after strata rm: %v", ids)
	}
	// The API key came from the environment and reached Cube, never a file.
	for _, r := range srv.Requests() {
		if r.Server == "api" && r.Path != "/health" && r.Header.Get("X-Api-Key") != "e2e-key" {
			t.Errorf("%s %s without the key", r.Method, r.Path)
		}
	}
}

func TestE2ECubePlannedThenUp(t *testing.T) {
	t.Parallel()
	e, srv := newCubeEnv(t, "template = \"base\"\n")
	srv.Down()
	out := e.ok("new", "p", "--backend", "cube")
	if !strings.Contains(out, "planned") {
		t.Errorf("new with Cube down: %q", out)
	}
	w := e.cubeWorld("show", "p", "--json")
	if w.Status != "planned" || !strings.Contains(w.Cube.Request, `"templateID":"base"`) || !strings.Contains(w.Cube.Request, e.source) {
		t.Fatalf("show --json of a planned world: %+v %+v", w, w.Cube)
	}
	if len(e.status("p").Changes) != 0 {
		t.Error("status of a planned world")
	}
	e.fails(1, "strata up p", "exec", "p", "--", "true")
	must(t, srv.Up())
	if out := e.ok("up", "p"); !strings.Contains(out, "is up") {
		t.Errorf("up: %q", out)
	}
	if out := e.ok("exec", "p", "--", "cat", "a.txt"); out != "hello\n" {
		t.Errorf("exec after up: %q", out)
	}
	e.ok("stop", "p")
	if w := e.cubeWorld("show", "p", "--json"); w.Status != "stopped" {
		t.Errorf("after stop: %s", w.Status)
	}
	e.ok("up", "p")
	e.ok("rm", "p")
	if ids := srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
}

func TestE2ECubeTemplates(t *testing.T) {
	t.Parallel()
	e, srv := newCubeEnv(t, `
[[cube.templates]]
id = "large"
cpu = 8000
memory_mb = 16384
disk_mb = 40960

[[cube.templates]]
id = "small"
cpu = 1000
memory_mb = 2048
disk_mb = 10240
`)
	errs := e.fails(1, "no cube template fits", "new", "huge", "--backend", "cube", "--cpu", "16000", "--memory", "4096")
	if !strings.Contains(errs, "closest: large (cpu 8000m, memory 16384 MB, disk 40960 MB)") {
		t.Errorf("no fit: %q", errs)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent for a request no template fits", n)
	}
	if w := e.cubeWorld("new", "mid", "--backend", "cube", "--cpu=2000", "--memory", "4096", "--json"); w.Cube.Template != "large" {
		t.Errorf("2 cpu 4 GiB: template %q, want large", w.Cube.Template)
	}
	if w := e.cubeWorld("new", "tiny", "--backend", "cube", "--json"); w.Cube.Template != "small" {
		t.Errorf("no size: template %q, want the smallest", w.Cube.Template)
	}
	if w := e.cubeWorld("new", "pick", "--backend", "cube", "--template", "base", "--json"); w.Cube.Template != "base" {
		t.Errorf("--template: %q", w.Cube.Template)
	}
	e.fails(2, "not both", "new", "both", "--backend", "cube", "--template", "base", "--cpu", "1")
	for _, n := range []string{"mid", "tiny", "pick"} {
		e.ok("rm", n)
	}
	if ids := srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
}

// A person at a terminal runs an interactive command in a cube World with
// --tty, answers it, detaches from a second one and attaches again; a
// session killed with KILL ends killed, not lost.
func TestE2ECubeTTY(t *testing.T) {
	t.Parallel()
	e, _ := newCubeEnv(t, "template = \"base\"\n")
	e.ok("new", "w", "--backend", "cube")
	name := fmt.Sprintf("strata-cube-tty-%d", os.Getpid())
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-L", name}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	screenHas := func(what string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			s := tmux("capture-pane", "-p", "-t", name)
			if strings.Contains(s, what) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q never appeared; screen:\n%s", what, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	shell := fmt.Sprintf("cd %s && exec env %s TERM=xterm-256color sh", e.source, strings.Join(e.vars, " "))
	tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30", shell)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", name, "kill-server").Run() })
	// The caller's terminal is 100x30 before strata reads its size (a
	// detached session's size may settle after it starts).
	for deadline := time.Now().Add(5 * time.Second); ; {
		size := strings.TrimSpace(tmux("display-message", "-p", "-t", name, "#{pane_width}x#{pane_height}"))
		if size == "100x30" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tmux pane is %s, want 100x30", size)
		}
		tmux("resize-window", "-t", name, "-x", "100", "-y", "30")
		time.Sleep(50 * time.Millisecond)
	}

	tmux("send-keys", "-t", name, "-l", strataBin+` exec w --tty -- sh -c 'printf "name? "; read n; echo "hi $n"; stty size; exit 4'; echo "rc=$?"`+"\r")
	screenHas("name? ")
	tmux("send-keys", "-t", name, "-l", "ada\r")
	screenHas("hi ada")
	screenHas("30 100") // the caller's terminal size reached the sandbox's PTY
	screenHas("rc=4")

	tmux("send-keys", "-t", name, "-l", "clear; "+strataBin+` exec w --tty -- sh -c 'read n; echo "second $n"'`+"\r")
	time.Sleep(500 * time.Millisecond)
	tmux("send-keys", "-t", name, "C-]")
	screenHas("detached; the session keeps running")
	var ss []struct {
		ID, State, Attention, Signal string
		TTY                          bool
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
	last := ss[len(ss)-1]
	if !last.TTY || last.State != "running" {
		t.Fatalf("detached session: %+v", last)
	}
	tmux("send-keys", "-t", name, "-l", "clear; "+strataBin+" attach w "+last.ID+"; echo rc=$?\r")
	screenHas("attached to w/")
	tmux("send-keys", "-t", name, "-l", "bob\r")
	screenHas("second bob")
	screenHas("rc=0")

	// strata shell: the sandbox's own shell, whatever $SHELL is here.
	tmux("send-keys", "-t", name, "-l", "clear; SHELL=/no/such/shell "+strataBin+" shell w; echo shell-rc=$?\r")
	time.Sleep(500 * time.Millisecond)
	tmux("send-keys", "-t", name, "-l", "echo inside-$((6*7)); exit 3\r")
	screenHas("inside-42")
	screenHas("shell-rc=3")

	id := strings.TrimSpace(e.ok("exec", "w", "--detach", "--", "sleep", "30"))
	e.ok("kill", "w", id, "--signal", "KILL")
	deadline := time.Now().Add(15 * time.Second)
	for {
		must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
		if last := ss[len(ss)-1]; last.ID == id && last.State == "killed" && last.Signal == "SIGKILL" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session killed with KILL: %+v", ss[len(ss)-1])
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.ok("rm", "w", "--force")
}
