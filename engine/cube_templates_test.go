package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/cube/cubetest"
	"github.com/stratahq/strata/engine/cuberun"
)

// The template a new cube World names is checked against the deployment's
// GET /templates (an alias resolved through GET /templates/aliases), not
// trusted from config: an unknown one fails before any sandbox is made and
// says what exists.
func TestCubeTemplateCheckedAgainstAPI(t *testing.T) {
	ce := newCubeEnv(t, cubetest.Options{Templates: []string{"base", "big"}})
	ce.srv.AddAlias("py", "big")
	ctx := context.Background()
	_, err := ce.e.Create(ctx, CreateOptions{Name: "w", Source: ce.src, Backend: RuntimeCube, Template: "nope"})
	if !errors.Is(err, ErrCubeTemplateUnknown) || !strings.Contains(err.Error(), "base, big") || !strings.Contains(err.Error(), "--template") {
		t.Fatalf("unknown template: %v; want ErrCubeTemplateUnknown listing base, big", err)
	}
	if _, err := os.Stat(ce.e.Paths.World("w")); !os.IsNotExist(err) {
		t.Errorf("a World was left behind: %v", err)
	}
	if n := len(requestsMatching(ce.srv, "POST /sandboxes")); n != 0 {
		t.Errorf("%d sandbox creates for an unknown template", n)
	}
	w := ce.create("w", CreateOptions{Template: "py"})
	if w.Cube.Template != "big" {
		t.Errorf("alias py: template %q, want big", w.Cube.Template)
	}
	creates := requestsMatching(ce.srv, "POST /sandboxes")
	if len(creates) != 1 || !strings.Contains(string(creates[0].Body), `"templateID":"big"`) {
		t.Errorf("create requests %d, body %s", len(creates), bodyOf(creates))
	}
}

func bodyOf(rs []cubetest.Request) string {
	if len(rs) == 0 {
		return ""
	}
	return string(rs[len(rs)-1].Body)
}

// When no template fits the size asked for, strata builds one from
// cube.base_image through the templates API (polling its status, progress
// lines), records it in the state root and reuses it for the next World of
// that size.
func TestCubeTemplateBuiltWhenNoneFits(t *testing.T) {
	old := cuberun.CubeBuildPoll
	cuberun.CubeBuildPoll = 10 * time.Millisecond
	defer func() { cuberun.CubeBuildPoll = old }()
	ce := newCubeEnv(t, cubetest.Options{BuildSteps: 3}, func(cc *CubeConfig) {
		cc.Templates = []CubeTemplate{{ID: "base", CPU: 1000, MemoryMB: 1024}}
		cc.BaseImage = "ubuntu:24.04"
	})
	var mu sync.Mutex
	var lines []string
	progress := func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }
	w := ce.create("w", CreateOptions{CPU: 4000, MemoryMB: 8192, Progress: progress})
	if !strings.HasPrefix(w.Cube.Template, "strata-4000m-8192mb-0mb-") {
		t.Fatalf("template %q, want a built strata-4000m-8192mb-0mb-…", w.Cube.Template)
	}
	builds := requestsMatching(ce.srv, "POST /templates")
	if len(builds) != 1 {
		t.Fatalf("%d template builds, want 1", len(builds))
	}
	var body map[string]any
	_ = json.Unmarshal(builds[0].Body, &body)
	if body["templateID"] != w.Cube.Template || body["image"] != "ubuntu:24.04" || body["cpu"] != float64(4000) || body["memory"] != float64(8192) {
		t.Errorf("build request %s", builds[0].Body)
	}
	if polls := len(requestsMatching(ce.srv, "GET /templates/*/builds/*/status")); polls < 3 {
		t.Errorf("%d status polls, want the build followed to READY", polls)
	}
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "building "+w.Cube.Template+" from ubuntu:24.04") || !strings.Contains(all, "READY 100%") || !strings.Contains(all, "BUILDING") {
		t.Errorf("progress lines:\n%s", all)
	}
	data, err := os.ReadFile(ce.e.cubeTemplatesFile())
	if err != nil || !strings.Contains(string(data), w.Cube.Template) {
		t.Fatalf("built template not recorded: %v %s", err, data)
	}
	w2 := ce.create("w2", CreateOptions{CPU: 2000, MemoryMB: 4096})
	if w2.Cube.Template != w.Cube.Template {
		t.Errorf("a smaller World got %q, want the recorded %q reused", w2.Cube.Template, w.Cube.Template)
	}
	if n := len(requestsMatching(ce.srv, "POST /templates")); n != 1 {
		t.Errorf("%d template builds after reuse, want 1", n)
	}
}

// A failed build says why (its status message and its log); a build that
// outlives cube.build_timeout says which setting bounds it. No World is left.
func TestCubeTemplateBuildFailsClearly(t *testing.T) {
	old := cuberun.CubeBuildPoll
	cuberun.CubeBuildPoll = 10 * time.Millisecond
	defer func() { cuberun.CubeBuildPoll = old }()
	ce := newCubeEnv(t, cubetest.Options{BuildSteps: 2}, func(cc *CubeConfig) { cc.BaseImage = "fail" })
	var lines []string
	_, err := ce.e.Create(context.Background(), CreateOptions{Name: "w", Source: ce.src, Backend: RuntimeCube, CPU: 64000, Progress: func(l string) { lines = append(lines, l) }})
	if !errors.Is(err, ErrNoTemplateFits) || !strings.Contains(err.Error(), "pull image fail") {
		t.Fatalf("failed build: %v", err)
	}
	if all := strings.Join(lines, "\n"); !strings.Contains(all, "| pulling fail") {
		t.Errorf("the build log is not shown:\n%s", all)
	}
	if _, err := os.Stat(ce.e.Paths.World("w")); !os.IsNotExist(err) {
		t.Errorf("a World was left behind: %v", err)
	}

	slow := newCubeEnv(t, cubetest.Options{BuildSteps: 100000}, func(cc *CubeConfig) { cc.BaseImage = "ubuntu"; cc.BuildTimeout = 1 })
	_, err = slow.e.Create(context.Background(), CreateOptions{Name: "w", Source: slow.src, Backend: RuntimeCube, CPU: 64000})
	if err == nil || !strings.Contains(err.Error(), "cube.build_timeout") {
		t.Fatalf("slow build: %v; want the timeout named", err)
	}
}
