package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

// newCubeEnvOpts is newCubeEnv over a fake made with opts.
func newCubeEnvOpts(t *testing.T, opts cubetest.Options, extraConfig string) (*env, *cubetest.Server) {
	t.Helper()
	e := newEnv(t)
	opts.APIKey = "e2e-key"
	if opts.Templates == nil {
		opts.Templates = []string{"base", "small", "large"}
	}
	srv := cubetest.New(t, opts)
	cfg := "[cube]\nendpoint = \"" + srv.URL() + "\"\nproxy_addr = \"" + srv.ProxyAddr() + "\"\ndomain = \"" + srv.Domain() + "\"\n" +
		"api_key_env = \"STRATA_E2E_CUBE_KEY\"\n" + extraConfig
	must(t, os.WriteFile(filepath.Join(filepath.Dir(e.home), "config.toml"), []byte(cfg), 0o644))
	e.vars = append(e.vars, "STRATA_E2E_CUBE_KEY=e2e-key")
	return e, srv
}

// doctor lists the templates the deployment has and its nodes' capacity;
// top shows the nodes under the Worlds; fork -n N says where each clone's
// sandbox went and what state it carries.
func TestE2ECubeClusterDoctorTopFork(t *testing.T) {
	t.Parallel()
	node := cube.Node{
		NodeID: "node-a", HostIP: "10.0.0.7", Healthy: true,
		Capacity: cube.NodeResources{CPUCores: 16, MemoryMB: 65536}, Allocatable: cube.NodeResources{CPUCores: 12, MemoryMB: 49152},
		CPUSaturation: 25, MemorySaturation: 25, MaxMvmSlots: 200,
	}
	e, _ := newCubeEnvOpts(t, cubetest.Options{Nodes: []cube.Node{node}}, "template = \"base\"\n")
	out, _, _ := e.run("doctor")
	for _, want := range []string{"cube templates (GET /templates):", "  base", "  large", "cube nodes:", "node-a", "10.0.0.7", "12/16 cores", "1 of 1 node healthy"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
	e.ok("new", "w", "--backend", "cube")
	e.ok("exec", "w", "--", "sh", "-c", "echo x > made.txt")
	if top := e.ok("top", "--count", "1", "--interval", "50ms"); !strings.Contains(top, "node-a") || !strings.Contains(top, "12/16 cores") {
		t.Errorf("top lacks the node:\n%s", top)
	}
	fork := e.ok("fork", "w", "-n", "2")
	for _, clone := range []string{"w-1", "w-2"} {
		if !strings.Contains(fork, "  "+clone+": sandbox ") || !strings.Contains(fork, "node node-a") {
			t.Errorf("fork does not say where %s went:\n%s", clone, fork)
		}
	}
	if !strings.Contains(fork, "carries memory and rootfs") {
		t.Errorf("fork does not say the clones carry memory:\n%s", fork)
	}

	bare, _ := newCubeEnvOpts(t, cubetest.Options{}, "template = \"base\"\n")
	out, _, _ = bare.run("doctor")
	if !strings.Contains(out, "this CubeSandbox does not expose node capacity") {
		t.Errorf("doctor without the cluster API:\n%s", out)
	}
	if top := bare.ok("top", "--count", "1", "--interval", "50ms"); !strings.Contains(top, "this CubeSandbox does not expose node capacity") {
		t.Errorf("top without the cluster API:\n%s", top)
	}
}

// new checks the template against the deployment; a size no template fits
// builds one from cube.base_image (progress on stderr), which doctor then
// lists as strata's.
func TestE2ECubeTemplateCheckAndBuild(t *testing.T) {
	t.Parallel()
	e, srv := newCubeEnvOpts(t, cubetest.Options{BuildSteps: 2}, "template = \"base\"\nbase_image = \"ubuntu:24.04\"\n")
	errs := e.fails(1, "no such template or alias", "new", "x", "--backend", "cube", "--template", "nope")
	if !strings.Contains(errs, "base, large, small") {
		t.Errorf("unknown template error does not list what exists: %q", errs)
	}
	_, stderr, code := e.run("new", "big", "--backend", "cube", "--cpu", "64000")
	if code != 0 || !strings.Contains(stderr, "building strata-64000m-") || !strings.Contains(stderr, "READY 100%") {
		t.Fatalf("build on new: exit %d, stderr %q", code, stderr)
	}
	if n := len(requestsTo(srv, "POST", "/templates")); n != 1 {
		t.Errorf("%d builds", n)
	}
	out, _, _ := e.run("doctor")
	if !strings.Contains(out, "built by strata from ubuntu:24.04 for cpu 64000m") {
		t.Errorf("doctor does not list the built template:\n%s", out)
	}
}

func requestsTo(srv *cubetest.Server, method, path string) []cubetest.Request {
	var out []cubetest.Request
	for _, r := range srv.Requests() {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// A cube session whose runner was killed is found again by `strata
// sessions` and its transcript continues; `logs -f` then follows it to
// the command's own end.
func TestE2ECubeReattachAfterRunnerKilled(t *testing.T) {
	t.Parallel()
	e, _ := newCubeEnvOpts(t, cubetest.Options{}, "template = \"base\"\n")
	e.ok("new", "w", "--backend", "cube")
	id := strings.TrimSpace(e.ok("exec", "w", "--detach", "--", "sh", "-c", "echo one; while [ ! -e go ]; do sleep 0.05; done; echo two; exit 3"))
	var sess struct {
		InitPID int    `json:"init_pid"`
		State   string `json:"state"`
	}
	readMeta := func() {
		data, err := os.ReadFile(filepath.Join(e.home, "worlds", "w", "sessions", id, "meta.json"))
		must(t, err)
		must(t, json.Unmarshal(data, &sess))
	}
	readMeta()
	if sess.InitPID <= 0 {
		t.Fatalf("session %s: no runner pid recorded", id)
	}
	must(t, syscall.Kill(sess.InitPID, syscall.SIGKILL))
	time.Sleep(200 * time.Millisecond)
	if ls := e.ok("sessions", "w"); !strings.Contains(ls, "running") {
		t.Fatalf("sessions after the runner died:\n%s", ls)
	}
	e.ok("exec", "w", "--", "touch", "go")
	stdout, stderr, code := e.run("logs", "w", id, "-f")
	if code != 0 && code != 3 || !strings.Contains(stdout, "two") {
		t.Errorf("logs -f after re-attach: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	readMeta()
	if sess.State != "failed" {
		t.Errorf("session ended %s, want failed (exit 3)", sess.State)
	}
}
