package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

// The cube client is the Engine's to be given: an injected client is the one
// every in-process call uses, whatever the config's [cube] table says (here
// an endpoint where nothing listens, which would leave the World planned).
func TestCubeClientOption(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the cube fake runs sandboxes in mount namespaces: run as root")
	}
	srv := cubetest.New(t, cubetest.Options{})
	c, err := cube.New(cube.Config{Endpoint: srv.URL(), ProxyAddr: srv.ProxyAddr()})
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "a.txt"), "hello\n")
	cfg := (&Config{Cube: CubeConfig{Endpoint: "http://127.0.0.1:1", Domain: srv.Domain(), Template: "base"}}).withDefaults()
	e, err := Open(context.Background(), Options{StateRoot: filepath.Join(base, "state"), Config: cfg, Cube: c})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.Create(context.Background(), CreateOptions{Name: "w", Source: src, Backend: RuntimeCube})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.runtimeFor(w).Destroy(context.Background(), w) })
	if w.State != StateReady || w.Cube == nil || w.Cube.SandboxID == "" {
		t.Fatalf("created with an injected client: state %s, cube %+v; want a ready World with a sandbox", w.State, w.Cube)
	}
	if got, err := e.cubeClient(); err != nil || got != c {
		t.Errorf("cubeClient: %p, %v; want the injected %p", got, err, c)
	}

	// Without one, each Engine makes its own from its config: two Engines of
	// one process never share a client for different deployments.
	e2, err := Open(context.Background(), Options{StateRoot: filepath.Join(base, "state2"), Config: (&Config{Cube: CubeConfig{Endpoint: srv.URL()}}).withDefaults()})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := e2.cubeClient()
	if err != nil || c2 == c {
		t.Fatalf("cubeClient from config: %p, %v", c2, err)
	}
	if again, _ := e2.cubeClient(); again != c2 {
		t.Errorf("cubeClient made a second client for the same deployment")
	}
}

// Every runtime's static facts agree with the layout the engine and the
// session init expect, and an unknown kind never yields a nil runtime.
func TestRuntimeSeamStatic(t *testing.T) {
	for _, k := range Runtimes() {
		rt := runtimeOf(nil, k)
		if rt.Kind() != k {
			t.Errorf("runtimeOf(%s).Kind() = %s", k, rt.Kind())
		}
		up, _ := filepath.Rel("/w", rt.UpperIn("/w"))
		found := false
		for _, d := range rt.LayerDirs() {
			found = found || d == filepath.ToSlash(up)
		}
		if !found {
			t.Errorf("%s: upper %s is not among the dirs a new World gets, %v", k, up, rt.LayerDirs())
		}
	}
	if rt := runtimeOf(nil, "bogus"); rt == nil || rt.Kind() != RuntimeLocal {
		t.Errorf("runtimeOf(bogus): %v", rt)
	}
	if runtimeOf(nil, RuntimeLocal).HostView() == runtimeOf(nil, RuntimeCube).HostView() {
		t.Error("local and cube both claim (or both deny) a host-mounted view")
	}
}

// Up and Stop ask the World's runtime: a local World has nothing to bring
// up or pause, and says what to do instead; the World is untouched.
func TestUpStopLocalWorld(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "a.txt"), "hello\n")
	e, err := Open(context.Background(), Options{StateRoot: filepath.Join(base, "state"), Config: (&Config{}).withDefaults()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(context.Background(), CreateOptions{Name: "w", Source: src, Backend: RuntimeLocal}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Up(context.Background(), "w"); err == nil || !strings.Contains(err.Error(), `up world "w": it runs on the local backend, which needs no bringing up`) {
		t.Errorf("up a local World: %v", err)
	}
	if _, err := e.Stop(context.Background(), "w", StopOptions{Kill: true}); err == nil || !strings.Contains(err.Error(), `stop world "w": it runs on the local backend; stop its sessions with strata kill`) {
		t.Errorf("stop a local World: %v", err)
	}
	if _, err := e.Up(context.Background(), "nope"); !errors.Is(err, ErrWorldNotFound) {
		t.Errorf("up a missing World: %v, want ErrWorldNotFound", err)
	}
	w, err := e.World("w")
	if err != nil || w.State != StateReady {
		t.Errorf("the World after up and stop: %v, %v", w, err)
	}
}
