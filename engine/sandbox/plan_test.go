package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine/boundary"
)

type machine struct {
	home, state, source, merged string
}

// newMachine makes a home with credentials, strata's state under the home
// (~/.local/share/strata, the XDG default) and a source under the home: the
// layout where a wrong order undoes the boundary.
func newMachine(t *testing.T) machine {
	t.Helper()
	root := t.TempDir()
	m := machine{home: filepath.Join(root, "home/u")}
	m.state = filepath.Join(m.home, ".local/share/strata")
	m.source = filepath.Join(m.home, "src/app")
	m.merged = filepath.Join(m.state, "worlds/w/merged")
	for _, d := range []string{m.state, m.source, m.merged, filepath.Join(m.home, ".ssh"), filepath.Join(m.home, ".config/gh"), filepath.Join(m.home, ".cache/ccache")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(m.home, ".netrc"), []byte("machine x password y"), 0o600); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m machine) boundary(t *testing.T, cfg *boundary.Config, r boundary.Request) *boundary.Boundary {
	t.Helper()
	b, err := boundary.Compute(cfg, boundary.World{
		Name: "w", Source: m.source, StateRoot: m.state, Home: m.home,
		HomeUpper: filepath.Join(m.state, "worlds/w/home/upper"), HomeWork: filepath.Join(m.state, "worlds/w/home/work"),
	}, nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// must returns the index of op at target in plan, failing when absent.
func must(t *testing.T, plan []Step, op Op, target string) int {
	t.Helper()
	i := Find(plan, op, target)
	if i < 0 {
		t.Fatalf("plan has no %s %s:\n%s", op, target, render(plan))
	}
	return i
}

func render(plan []Step) string {
	var b strings.Builder
	for i, s := range plan {
		b.WriteString(strings.Repeat(" ", 2))
		b.WriteString(s.String())
		if i < len(plan)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func before(t *testing.T, plan []Step, i, j int, why string) {
	t.Helper()
	if i >= j {
		t.Errorf("%s: %s must come before %s:\n%s", why, plan[i], plan[j], render(plan))
	}
}

func TestPlanSandbox(t *testing.T) {
	m := newMachine(t)
	cfg := &boundary.Config{Policy: boundary.Policy{SharedCaches: []string{"~/.cache/ccache"}, PassPaths: []string{"~/.config/gh"}}}
	b := m.boundary(t, cfg, boundary.Request{})
	plan := Plan(b, Input{Merged: m.merged})

	if plan[0].Op != OpPrivate {
		t.Fatalf("the plan starts with %s, want mounts made private first", plan[0])
	}
	// Every tree bound later is cloned before anything covers it.
	cloneWorld := must(t, plan, OpClone, m.source)
	if plan[cloneWorld].Source != m.merged {
		t.Errorf("the World is cloned from %q, want %q", plan[cloneWorld].Source, m.merged)
	}
	overlay := must(t, plan, OpOverlay, m.home)
	if s := plan[overlay]; s.Upper != b.HomeUpper || s.Work != b.HomeWork || s.Source != m.home {
		t.Errorf("home overlay = %+v, want lower %s upper %s", s, m.home, b.HomeUpper)
	}
	hideState := must(t, plan, OpHide, m.state)
	ro := must(t, plan, OpReadOnly, "/")
	writableHome := must(t, plan, OpWritable, m.home)
	before(t, plan, cloneWorld, overlay, "the World's view lives in the state root")
	before(t, plan, overlay, hideState, "the home's upper is in the state root, and a state root under the home must be hidden in the overlay too")
	before(t, plan, hideState, ro, "hiding needs a writable mount point")
	before(t, plan, ro, writableHome, "the home overlay is made writable after the host is made read-only")

	// /tmp and /run are private, so host unix sockets are unreachable.
	for _, d := range []string{"/tmp", "/var/tmp", "/run", "/var/run"} {
		before(t, plan, ro, must(t, plan, OpTmpfs, d), "a private "+d+" is writable")
	}
	if must(t, plan, OpDev, "/dev") < ro {
		t.Errorf("/dev made before the read-only remount would be read-only")
	}

	// The World and the shared cache after the home overlay (both are under
	// the home here), read-write; the grant read-only.
	world := must(t, plan, OpBind, m.source)
	before(t, plan, overlay, world, "a source under the home must not be covered by the home overlay")
	before(t, plan, ro, world, "the World stays writable")
	cache := must(t, plan, OpBind, filepath.Join(m.home, ".cache/ccache"))
	before(t, plan, writableHome, cache, "a shared cache is written in place, not in the home layer")
	if plan[cache].ReadOnly {
		t.Errorf("shared cache bound read-only")
	}
	grant := must(t, plan, OpBind, filepath.Join(m.home, ".config/gh"))
	if !plan[grant].ReadOnly {
		t.Errorf("granted credential bound writable")
	}
	before(t, plan, overlay, grant, "the grant shows the real file over the home layer")
	must(t, plan, OpClone, filepath.Join(m.home, ".config/gh"))

	// ~/.ssh is covered by an empty read-only tmpfs, ~/.netrc by an empty
	// file, both after everything that could cover the masks.
	ssh := must(t, plan, OpHide, filepath.Join(m.home, ".ssh"))
	netrc := must(t, plan, OpMaskFile, filepath.Join(m.home, ".netrc"))
	for _, later := range []int{overlay, writableHome, world, cache, grant} {
		before(t, plan, later, ssh, "nothing mounts over a credential's mask")
		before(t, plan, later, netrc, "nothing mounts over a credential's mask")
	}
	if Find(plan, OpHide, filepath.Join(m.home, ".config/gh")) >= 0 {
		t.Errorf("the granted ~/.config/gh is hidden")
	}
	if Find(plan, OpHide, filepath.Join(m.home, ".aws")) >= 0 {
		t.Errorf("a credential path that does not exist is masked (its mount point would be created in the home)")
	}
	proc := must(t, plan, OpProc, "/proc")
	before(t, plan, netrc, proc, "/proc last")
	for _, k := range ProcKnobs {
		before(t, plan, proc, must(t, plan, OpProtect, k), "knobs protected on the session's /proc")
	}
	if s := plan[must(t, plan, OpCgroup, "/sys/fs/cgroup")]; !s.ReadOnly {
		t.Errorf("cgroupfs writable")
	}
	if Find(plan, OpClone, "/run/systemd/resolve") >= 0 {
		t.Errorf("proxy network keeps the host resolver")
	}
}

func TestPlanStrictKeepsHomeReadOnly(t *testing.T) {
	m := newMachine(t)
	plan := Plan(m.boundary(t, nil, boundary.Request{Level: "strict"}), Input{Merged: m.merged})
	if Find(plan, OpOverlay, m.home) >= 0 || Find(plan, OpWritable, m.home) >= 0 {
		t.Fatalf("strict gives the home a writable layer:\n%s", render(plan))
	}
	must(t, plan, OpReadOnly, "/")
	must(t, plan, OpHide, filepath.Join(m.home, ".ssh"))
	before(t, plan, must(t, plan, OpReadOnly, "/"), must(t, plan, OpBind, m.source), "the World stays writable")
}

func TestPlanTreeIsTodays(t *testing.T) {
	m := newMachine(t)
	plan := Plan(m.boundary(t, nil, boundary.Request{Level: "tree"}), Input{Merged: m.merged})
	for _, op := range []Op{OpReadOnly, OpTmpfs, OpOverlay, OpMaskFile, OpCgroup} {
		for _, s := range plan {
			if s.Op == op {
				t.Errorf("tree has %s:\n%s", s, render(plan))
			}
		}
	}
	if Find(plan, OpHide, filepath.Join(m.home, ".ssh")) >= 0 {
		t.Errorf("tree hides credentials (it is documented not to)")
	}
	must(t, plan, OpHide, m.state)
	must(t, plan, OpBind, m.source)
	must(t, plan, OpProtect, "/proc/sys")
}

func TestPlanHostNetworkKeepsResolver(t *testing.T) {
	m := newMachine(t)
	plan := Plan(m.boundary(t, nil, boundary.Request{Network: "host"}), Input{Merged: m.merged})
	run := must(t, plan, OpTmpfs, "/run")
	res := must(t, plan, OpBind, "/run/systemd/resolve")
	before(t, plan, must(t, plan, OpClone, "/run/systemd/resolve"), run, "cloned before /run is covered")
	before(t, plan, run, res, "bound back over the private /run")
	if !plan[res].ReadOnly || !plan[res].IfExists {
		t.Errorf("resolver bind = %+v, want read-only, if it exists", plan[res])
	}
}

func TestPlanHostDev(t *testing.T) {
	m := newMachine(t)
	plan := Plan(m.boundary(t, nil, boundary.Request{}), Input{Merged: m.merged, HostDev: true})
	if Find(plan, OpDev, "/dev") >= 0 {
		t.Fatal("HostDev still makes a private /dev")
	}
	before(t, plan, must(t, plan, OpReadOnly, "/"), must(t, plan, OpTmpfs, "/dev/shm"), "/dev/shm private and writable")
}
