package mount

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay"
)

func skipUnlessRootForMount(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
}

func TestProbeAllBackendsWorkHere(t *testing.T) {
	skipUnlessRootForMount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results := Probe(ctx, t.TempDir())
	if len(results) != 3 {
		t.Fatalf("probe returned %d results, want 3: %+v", len(results), results)
	}
	for i, want := range []overlay.Backend{overlay.BackendKernel, overlay.BackendFuseOverlayfs, overlay.BackendUnionfs} {
		r := results[i]
		if r.Backend != want {
			t.Errorf("result %d is %s, want %s", i, r.Backend, want)
		}
		if !r.OK {
			if want != overlay.BackendKernel {
				if _, err := exec.LookPath(fuseToolNames[want].names[0]); err != nil {
					t.Logf("%s not installed: %s", want, r.Reason)
					continue
				}
			}
			t.Errorf("%s: probe failed: %s", r.Backend, r.Reason)
		}
		if r.OK && r.Reason != "" {
			t.Errorf("%s: OK with a reason %q", r.Backend, r.Reason)
		}
		if r.Duration <= 0 {
			t.Errorf("%s: duration %v not measured", r.Backend, r.Duration)
		}
		t.Logf("%s: ok=%v in %v", r.Backend, r.OK, r.Duration)
	}
	got, err := PickBackend(results, overlay.BackendAuto)
	if err != nil || got != overlay.BackendKernel {
		t.Errorf("PickBackend(auto) = %q, %v; want kernel", got, err)
	}
}

func TestProbeReportsWhyABackendCannotWork(t *testing.T) {
	noTools := func(file string) (string, error) { return "", exec.ErrNotFound }
	results := ProbeWith(context.Background(), t.TempDir(), ProbeOptions{
		Backends: []overlay.Backend{overlay.BackendFuseOverlayfs, overlay.BackendUnionfs},
		LookPath: noTools,
	})
	want := map[overlay.Backend]string{
		overlay.BackendFuseOverlayfs: "fuse-overlayfs not found on PATH (apt-get install fuse-overlayfs)",
		overlay.BackendUnionfs:       "unionfs not found on PATH (apt-get install unionfs-fuse)",
	}
	if len(results) != 2 {
		t.Fatalf("got %d results, want 2", len(results))
	}
	for _, r := range results {
		if r.OK || r.Reason != want[r.Backend] {
			t.Errorf("%s: ok=%v reason %q; want reason %q", r.Backend, r.OK, r.Reason, want[r.Backend])
		}
	}

	// The tool is there but the FUSE device is not.
	results = ProbeWith(context.Background(), t.TempDir(), ProbeOptions{
		Backends: []overlay.Backend{overlay.BackendFuseOverlayfs},
		LookPath: func(file string) (string, error) { return "/usr/bin/" + file, nil },
		DevFuse:  "/nonexistent/fuse",
	})
	if r := results[0]; r.OK || !strings.Contains(r.Reason, "/nonexistent/fuse missing") {
		t.Errorf("probe without /dev/fuse: ok=%v reason %q", r.OK, r.Reason)
	}
}

func TestPickBackend(t *testing.T) {
	all := []ProbeResult{
		{Backend: overlay.BackendKernel, Reason: "not root and not in a user namespace"},
		{Backend: overlay.BackendFuseOverlayfs, OK: true},
		{Backend: overlay.BackendUnionfs, OK: true},
	}
	if got, err := PickBackend(all, overlay.BackendAuto); err != nil || got != overlay.BackendFuseOverlayfs {
		t.Errorf("auto with kernel failing = %q, %v; want fuse-overlayfs", got, err)
	}
	if got, err := PickBackend(all, ""); err != nil || got != overlay.BackendFuseOverlayfs {
		t.Errorf("empty want = %q, %v; want fuse-overlayfs", got, err)
	}
	if got, err := PickBackend(all, overlay.BackendUnionfs); err != nil || got != overlay.BackendUnionfs {
		t.Errorf("want unionfs = %q, %v", got, err)
	}
	_, err := PickBackend(all, overlay.BackendKernel)
	if !errors.Is(err, ErrNoBackend) || !strings.Contains(err.Error(), "not root and not in a user namespace") {
		t.Errorf("wanted backend failing: %v; want ErrNoBackend with its reason", err)
	}
	none := []ProbeResult{
		{Backend: overlay.BackendUnionfs, Reason: "unionfs not found"},
		{Backend: overlay.BackendKernel, Reason: "EPERM"},
	}
	_, err = PickBackend(none, overlay.BackendAuto)
	if !errors.Is(err, ErrNoBackend) {
		t.Fatalf("no backend works: %v", err)
	}
	for _, want := range []string{"kernel: EPERM", "fuse-overlayfs: not probed", "unionfs-fuse: unionfs not found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := PickBackend(none, overlay.BackendFuseOverlayfs); !errors.Is(err, ErrNoBackend) {
		t.Errorf("unprobed wanted backend: %v", err)
	}
}

// TestProbeCatchesABrokenBackend gives the probe a "fuse-overlayfs" that
// mounts an empty tmpfs instead: it mounts fine, but the probe must see the
// lower is not there.
func TestProbeCatchesABrokenBackend(t *testing.T) {
	skipUnlessRootForMount(t)
	fake := filepath.Join(t.TempDir(), "fuse-overlayfs")
	script := "#!/bin/sh\n# called as: fuse-overlayfs -o OPTIONS TARGET\nexec mount -t tmpfs strata-fake \"$3\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	results := ProbeWith(context.Background(), scratch, ProbeOptions{
		Backends: []overlay.Backend{overlay.BackendFuseOverlayfs},
		LookPath: func(string) (string, error) { return fake, nil },
	})
	r := results[0]
	if r.OK || !strings.Contains(r.Reason, "read a lower file through the mount") {
		t.Errorf("broken backend: ok=%v reason %q", r.OK, r.Reason)
	}
	leftovers, _ := os.ReadDir(scratch)
	if len(leftovers) != 0 {
		t.Errorf("probe left %v behind (still mounted?)", leftovers)
	}
}
