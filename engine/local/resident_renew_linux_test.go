package local

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay/mount"
)

// What a fresh private /tmp must get back: the mounts attached on the one
// seen there, not the host's it hides, nor one a later mount covers.
func TestRenewFindsWhatIsAttachedOnThePrivateDir(t *testing.T) {
	info := `1 0 8:1 / / rw - ext4 /dev/sda1 rw
5 1 8:1 / /tmp rw - ext4 /dev/sda1 rw
6 5 0:40 / /tmp/state/worlds/w/merged rw - overlay overlay rw
10 1 0:50 / /tmp rw - tmpfs tmpfs rw
20 10 0:51 / /tmp rw - tmpfs tmpfs rw
21 20 0:40 / /tmp/a/src rw - overlay overlay rw
22 21 0:52 / /tmp/a/src/sub rw - tmpfs tmpfs rw
23 20 0:53 / /tmp/b rw - tmpfs tmpfs rw
24 20 0:54 / /tmp/b/c rw - tmpfs tmpfs rw
25 20 0:55 / /tmp/with\040space rw - tmpfs tmpfs rw
26 20 0:40 / /tmp/a/src rw - overlay overlay rw
`
	mounts, err := mount.ParseMountInfo(strings.NewReader(info))
	if err != nil {
		t.Fatal(err)
	}
	top, ok := topMount(mounts, "/tmp")
	if !ok || top.ID != 20 {
		t.Fatalf("top mount at /tmp: %+v, %v (want the tmpfs stacked last, id 20)", top, ok)
	}
	got := attachedBeneath(mounts, top)
	want := []string{"/tmp/a/src", "/tmp/b", "/tmp/with space"}
	if !slices.Equal(got, want) {
		t.Errorf("attached beneath /tmp: %q, want %q", got, want)
	}
	if _, ok := topMount(mounts, "/var/tmp"); ok {
		t.Error("a top mount at a point with none")
	}
}

func TestRenewSkeletonOnly(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "a", "b", "src")
	file := filepath.Join(dir, "a", "cred")
	if err := os.MkdirAll(filepath.Join(src, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	points := []string{src, file}
	if !skeletonOnly(dir, points) {
		t.Error("only the mount points and the dirs leading to them: want skeleton")
	}
	if !skeletonOnly(t.TempDir(), nil) {
		t.Error("an empty dir: want skeleton")
	}
	for _, left := range []string{filepath.Join(dir, "a", "b", "x"), filepath.Join(dir, "top")} {
		if err := os.WriteFile(left, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if skeletonOnly(dir, points) {
			t.Errorf("%s left there: want not skeleton", left)
		}
		os.Remove(left)
	}
	if err := os.Mkdir(filepath.Join(dir, "a", "newdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if skeletonOnly(dir, points) {
		t.Error("an empty dir left there: want not skeleton")
	}
}
