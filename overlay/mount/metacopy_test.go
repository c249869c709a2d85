package mount

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
)

// Every kernel mount passes metacopy=off last, so even a caller asking for
// metacopy=on gets a full copy-up on chmod: no upper file ever carries a
// metacopy xattr, which is what lets a World recorded metacopy_off skip the
// per-file xattr read. Both the fsconfig and the legacy mount(2) path.
func TestKernelMountForcesMetacopyOff(t *testing.T) {
	skipWithoutBackend(t, overlay.BackendKernel)
	for _, tc := range []struct {
		name  string
		mount func(MountSpec) error
	}{
		{"Mount", func(s MountSpec) error { return Mount(context.Background(), s) }},
		{"legacy", func(s MountSpec) error { _, err := mountKernelLegacy(s); return err }},
	} {
		for _, opts := range [][]string{nil, {"metacopy=on"}, {"redirect_dir=on", "metacopy=on"}} {
			s := scratchLayers(t, overlay.BackendKernel, "mc")
			overlaytest.Build(t, s.Lower, "file f 0644 \"lower data\"\n")
			s.Options = opts
			if err := tc.mount(s); err != nil {
				t.Fatalf("%s %v: %v", tc.name, opts, err)
			}
			err := os.Chmod(filepath.Join(s.Target, "f"), 0o600)
			if uerr := Unmount(context.Background(), s.Target); uerr != nil {
				t.Fatal(uerr)
			}
			if err != nil {
				t.Fatal(err)
			}
			up := filepath.Join(s.Upper, "f")
			for _, x := range []string{"trusted.overlay.metacopy", "user.overlay.metacopy"} {
				if _, err := unix.Lgetxattr(up, x, nil); err == nil {
					t.Errorf("%s with options %v: chmod left %s on the upper file (a metacopy copy-up)", tc.name, opts, x)
				}
			}
			if data, err := os.ReadFile(up); err != nil || string(data) != "lower data" {
				t.Errorf("%s with options %v: upper file holds %q, %v, want the full data", tc.name, opts, data, err)
			}
		}
	}
}
