package mount

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
	"golang.org/x/sys/unix"
)

// scratchLayers makes lower, upper, work and mnt dirs under one temp dir
// whose name may hold characters mount options must escape.
func scratchLayers(t *testing.T, b overlay.Backend, dirName string) MountSpec {
	t.Helper()
	root := filepath.Join(t.TempDir(), dirName)
	s := MountSpec{
		Lower: filepath.Join(root, "lower"), Upper: filepath.Join(root, "upper"),
		Work: filepath.Join(root, "work"), Target: filepath.Join(root, "mnt"), Backend: b,
	}
	if b == overlay.BackendUnionfs {
		s.Work = ""
	}
	for _, d := range []string{s.Lower, s.Upper, s.Work, s.Target} {
		if d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

// skipWithoutBackend skips when the test cannot mount b here at all.
func skipWithoutBackend(t *testing.T, b overlay.Backend) {
	t.Helper()
	skipUnlessRootForMount(t)
	if tool, ok := fuseToolNames[b]; ok {
		if _, err := lookFuseTool(exec.LookPath, b); err != nil {
			t.Skipf("%s not installed: %v", tool.names[0], err)
		}
		if _, err := os.Stat("/dev/fuse"); err != nil {
			t.Skipf("no /dev/fuse: %v", err)
		}
	}
}

// mountForTest mounts s and makes sure it is gone when the test ends, lazily
// if a plain unmount fails.
func mountForTest(t *testing.T, s MountSpec) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Mount(ctx, s); err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() {
		if _, mounted, _ := MountedAt(s.Target); !mounted {
			return
		}
		if err := Unmount(context.Background(), s.Target); err != nil {
			t.Errorf("cleanup unmount: %v", err)
			_ = ForceUnmount(s.Target)
		}
	})
}

func TestParseMountInfoUnescapesPaths(t *testing.T) {
	table := strings.Join([]string{
		`22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw`,
		`44 22 0:39 / /tmp/a\040b\012c\134d rw,relatime - overlay overlay rw,lowerdir+=/x`,
		`45 22 0:40 / /tmp/fuse rw,nosuid shared:5 master:3 - fuse.fuse-overlayfs fuse-overlayfs rw,user_id=0`,
		`46 22 0:41 / /tmp/not\9octal rw - tmpfs tmp\040fs rw`,
	}, "\n") + "\n"
	got, err := ParseMountInfo(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []MountInfo{
		{22, 1, "/", "ext4", "/dev/sda1"},
		{44, 22, "/tmp/a b\nc\\d", "overlay", "overlay"},
		{45, 22, "/tmp/fuse", "fuse.fuse-overlayfs", "fuse-overlayfs"},
		{46, 22, `/tmp/not\9octal`, "tmpfs", "tmp fs"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ParseMountInfo:\n got %+v\nwant %+v", got, want)
	}
	if _, err := ParseMountInfo(strings.NewReader("1 2 3 4 /x no separator\n")); err == nil {
		t.Error("a line without the - separator parsed without error")
	}
}

func TestFuseArgsEscapeOptionsAndRefuseColons(t *testing.T) {
	s := MountSpec{Lower: "/l,o", Upper: `/u\p`, Work: "/w", Target: "/m,t", Backend: overlay.BackendFuseOverlayfs, Options: []string{"allow_other"}}
	args, err := fuseArgs(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-o", `lowerdir=/l\,o,upperdir=/u\\p,workdir=/w,allow_other`, "/m,t"}
	if !slices.Equal(args, want) {
		t.Errorf("fuse-overlayfs args %q, want %q", args, want)
	}
	s.Backend = overlay.BackendUnionfs
	args, err = fuseArgs(s)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"-o", "cow,hide_meta_files,allow_other", `/u\p=RW:/l,o=RO`, "/m,t"}
	if !slices.Equal(args, want) {
		t.Errorf("unionfs args %q, want %q", args, want)
	}
	for _, b := range []overlay.Backend{overlay.BackendFuseOverlayfs, overlay.BackendUnionfs} {
		s := MountSpec{Lower: "/a:b", Upper: "/u", Work: "/w", Target: "/m", Backend: b}
		if _, err := fuseArgs(s); !errors.Is(err, ErrUnsupportedPath) {
			t.Errorf("%s with a colon in lower: err %v, want ErrUnsupportedPath", b, err)
		}
	}
}

// TestKernelMountOddPaths mounts through both kernel paths (fsconfig and the
// legacy mount(2) string) with layer paths that need escaping, and checks
// reads, writes and MountedAt see the right directories.
func TestKernelMountOddPaths(t *testing.T) {
	skipUnlessRootForMount(t)
	for _, legacy := range []bool{false, true} {
		name := "fsconfig"
		if legacy {
			name = "mount2"
		}
		t.Run(name, func(t *testing.T) {
			s := scratchLayers(t, overlay.BackendKernel, "a,b:c\\d e\nf")
			if err := os.WriteFile(filepath.Join(s.Lower, "f"), []byte("lower"), 0o644); err != nil {
				t.Fatal(err)
			}
			if legacy {
				if detail, err := mountKernelLegacy(s); err != nil {
					t.Fatalf("legacy mount: %v (%s)", err, detail)
				}
				t.Cleanup(func() { _ = ForceUnmount(s.Target) })
			} else {
				mountForTest(t, s)
			}
			fstype, mounted, err := MountedAt(s.Target)
			if err != nil || !mounted || fstype != "overlay" {
				t.Fatalf("MountedAt = %q, %v, %v; want overlay, true", fstype, mounted, err)
			}
			if got, err := os.ReadFile(filepath.Join(s.Target, "f")); err != nil || string(got) != "lower" {
				t.Fatalf("read lower file through mount: %q, %v", got, err)
			}
			if err := os.WriteFile(filepath.Join(s.Target, "g"), []byte("up"), 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(s.Upper, "g")); err != nil || string(got) != "up" {
				t.Fatalf("write did not land in the upper: %q, %v", got, err)
			}
			if err := Unmount(context.Background(), s.Target); err != nil {
				t.Fatal(err)
			}
			if _, mounted, _ := MountedAt(s.Target); mounted {
				t.Fatal("still mounted after Unmount")
			}
		})
	}
}

func TestMountUnmountEachBackend(t *testing.T) {
	for _, b := range probeOrder {
		t.Run(string(b), func(t *testing.T) {
			skipWithoutBackend(t, b)
			// Commas and spaces must survive libfuse's option parser too.
			s := scratchLayers(t, b, "sp ace,comma")
			if err := os.WriteFile(filepath.Join(s.Lower, "f"), []byte("lower"), 0o644); err != nil {
				t.Fatal(err)
			}
			mountForTest(t, s)
			fstype, mounted, err := MountedAt(s.Target)
			if err != nil || !mounted {
				t.Fatalf("MountedAt = %q, %v, %v", fstype, mounted, err)
			}
			if got := backendOfFSType(fstype); got != b {
				t.Errorf("fstype %q maps to backend %q, want %q", fstype, got, b)
			}
			if got, err := os.ReadFile(filepath.Join(s.Target, "f")); err != nil || string(got) != "lower" {
				t.Fatalf("read through mount: %q, %v", got, err)
			}
			if err := Unmount(context.Background(), s.Target); err != nil {
				t.Fatal(err)
			}
			if _, mounted, _ := MountedAt(s.Target); mounted {
				t.Fatal("still mounted after Unmount")
			}
			// A second unmount finds nothing and is not an error.
			if err := Unmount(context.Background(), s.Target); err != nil {
				t.Errorf("unmount of an unmounted target: %v", err)
			}
		})
	}
}

func TestMountErrorsNameBackendPathsAndCause(t *testing.T) {
	for _, b := range probeOrder {
		t.Run(string(b), func(t *testing.T) {
			skipWithoutBackend(t, b)
			s := scratchLayers(t, b, "err")
			s.Lower = filepath.Join(filepath.Dir(s.Lower), "no-such-lower")
			err := Mount(context.Background(), s)
			if err == nil {
				_ = ForceUnmount(s.Target)
				t.Fatal("mount with a missing lower succeeded")
			}
			var me *MountError
			if !errors.As(err, &me) || me.Backend != b || me.Op != "mount" {
				t.Fatalf("error %v is not a *MountError for %s", err, b)
			}
			msg := err.Error()
			for _, want := range []string{string(b), s.Lower, s.Target} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
			if b == overlay.BackendKernel && !strings.Contains(me.Detail, "failed to resolve") {
				t.Errorf("kernel error detail %q lacks overlayfs's own message", me.Detail)
			}
			if b == overlay.BackendFuseOverlayfs && !strings.Contains(me.Detail, "cannot read lower dirs") {
				t.Errorf("fuse-overlayfs error detail %q lacks the tool's stderr", me.Detail)
			}
			if _, mounted, _ := MountedAt(s.Target); mounted {
				_ = ForceUnmount(s.Target)
				t.Error("a failed mount left something mounted")
			}
			t.Log(msg)
		})
	}
	t.Run("missing tool", func(t *testing.T) {
		s := MountSpec{Lower: "/l", Upper: "/u", Work: "/w", Target: t.TempDir(), Backend: overlay.BackendFuseOverlayfs, Binary: ""}
		t.Setenv("PATH", t.TempDir())
		err := Mount(context.Background(), s)
		if err == nil || !strings.Contains(err.Error(), "fuse-overlayfs not found on PATH (apt-get install fuse-overlayfs)") {
			t.Errorf("mount without the tool: %v", err)
		}
	})
	t.Run("no backend", func(t *testing.T) {
		s := MountSpec{Lower: "/l", Upper: "/u", Work: "/w", Target: t.TempDir(), Backend: overlay.BackendAuto}
		if err := Mount(context.Background(), s); err == nil || !strings.Contains(err.Error(), "PickBackend") {
			t.Errorf("mount with backend auto: %v", err)
		}
	})
	t.Run("no work dir", func(t *testing.T) {
		s := MountSpec{Lower: "/l", Upper: "/u", Target: t.TempDir(), Backend: overlay.BackendKernel}
		if err := Mount(context.Background(), s); err == nil || !strings.Contains(err.Error(), "no work dir") {
			t.Errorf("kernel mount without work dir: %v", err)
		}
	})
}

// TestUnmountBusyRetriesThenForceDetaches holds the mount busy with a
// process whose working directory is inside it.
func TestUnmountBusyRetriesThenForceDetaches(t *testing.T) {
	skipWithoutBackend(t, overlay.BackendKernel)
	s := scratchLayers(t, overlay.BackendKernel, "busy")
	mountForTest(t, s)
	holder := exec.Command("sleep", "30")
	holder.Dir = s.Target
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Unmount(ctx, s.Target)
	if !errors.Is(err, unix.EBUSY) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unmount of a busy mount: %v; want EBUSY after retrying until the deadline", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("gave up after %v without retrying", took)
	}
	if _, mounted, _ := MountedAt(s.Target); !mounted {
		t.Fatal("busy mount vanished though unmount failed")
	}
	if err := ForceUnmount(s.Target); err != nil {
		t.Fatalf("force unmount: %v", err)
	}
	if _, mounted, _ := MountedAt(s.Target); mounted {
		t.Fatal("still mounted after ForceUnmount")
	}
}

func TestMountRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadMountRecord(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reading a missing record: %v, want fs.ErrNotExist", err)
	}
	at := time.Date(2025, 5, 1, 12, 0, 0, 123, time.UTC)
	in := MountRecord{Backend: overlay.BackendFuseOverlayfs, Target: "/w/merged", Options: []string{"allow_other"}, MountedAt: at}
	if err := WriteMountRecord(dir, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadMountRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out.Dialect != overlay.DialectFuseOverlayfs {
		t.Errorf("dialect %q not derived from the backend", out.Dialect)
	}
	if out.Backend != in.Backend || out.Target != in.Target || !slices.Equal(out.Options, in.Options) || !out.MountedAt.Equal(at) {
		t.Errorf("round trip: got %+v, want %+v", out, in)
	}
	data, err := os.ReadFile(filepath.Join(dir, MountRecordName))
	if err != nil || !strings.Contains(string(data), `"backend": "fuse-overlayfs"`) {
		t.Errorf("record on disk %q (%v) does not name the backend", data, err)
	}
	if err := os.WriteFile(filepath.Join(dir, MountRecordName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMountRecord(dir); err == nil {
		t.Error("a corrupt record decoded without error")
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "meta.json")
	if err := os.WriteFile(path, []byte("old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := unix.Umask(0o077)
	err := overlay.WriteFileAtomic(path, []byte("new"), 0o644)
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new" {
		t.Fatalf("content %q, %v", got, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644 whatever the umask", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
	if err := overlay.WriteFileAtomic(filepath.Join(dir, "no-such-dir", "x"), []byte("x"), 0o644); err == nil {
		t.Error("writing into a missing dir succeeded")
	}
}

// TestKernelUserXattr checks the userxattr option reaches the kernel: the
// opaque mark of a recreated dir lands under user.overlay.*, and a conflicting
// extra option fails with the kernel's own message.
func TestKernelUserXattr(t *testing.T) {
	skipWithoutBackend(t, overlay.BackendKernel)
	s := scratchLayers(t, overlay.BackendKernel, "userxattr")
	overlaytest.Build(t, s.Lower, "file d/old 0644 old\n")
	s.UserXattr = true
	mountForTest(t, s)
	if err := os.RemoveAll(filepath.Join(s.Target, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.Target, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(context.Background(), s.Target); err != nil {
		t.Fatal(err)
	}
	if !probeHasOpaqueXattr(filepath.Join(s.Upper, "d"), "user.overlay.opaque") {
		t.Error("recreated dir lacks user.overlay.opaque under userxattr")
	}
	if probeHasOpaqueXattr(filepath.Join(s.Upper, "d"), "trusted.overlay.opaque") {
		t.Error("userxattr mount wrote trusted.overlay.opaque")
	}

	s = scratchLayers(t, overlay.BackendKernel, "conflict")
	s.UserXattr, s.Options = true, []string{"redirect_dir=on"}
	err := Mount(context.Background(), s)
	if err == nil {
		_ = ForceUnmount(s.Target)
		t.Fatal("userxattr with redirect_dir=on mounted; the kernel refuses that pair")
	}
	var me *MountError
	if !errors.As(err, &me) || me.Detail == "" {
		t.Errorf("error %v carries no kernel message", err)
	}
	t.Log(err)
}

// TestFusermountUnmount exercises the path a non-root user takes: the FUSE
// mount is released through fusermount3, not umount2.
func TestFusermountUnmount(t *testing.T) {
	skipWithoutBackend(t, overlay.BackendFuseOverlayfs)
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not installed")
	}
	for _, lazy := range []bool{false, true} {
		s := scratchLayers(t, overlay.BackendFuseOverlayfs, "fusermount")
		mountForTest(t, s)
		if detail, err := fusermountUnmount(context.Background(), s.Target, lazy); err != nil {
			t.Fatalf("fusermount (lazy=%v): %v: %s", lazy, err, detail)
		}
		if _, mounted, _ := MountedAt(s.Target); mounted {
			t.Errorf("still mounted after fusermount3 -u (lazy=%v)", lazy)
		}
	}
}

// BenchmarkMountUnmount measures one mount and unmount of an empty World per
// backend.
func BenchmarkMountUnmount(b *testing.B) {
	for _, backend := range probeOrder {
		b.Run(string(backend), func(b *testing.B) {
			if os.Geteuid() != 0 {
				b.Skip("needs root to mount")
			}
			if _, ok := fuseToolNames[backend]; ok {
				if _, err := lookFuseTool(exec.LookPath, backend); err != nil {
					b.Skip(err)
				}
			}
			root := b.TempDir()
			s := MountSpec{
				Lower: filepath.Join(root, "lower"), Upper: filepath.Join(root, "upper"),
				Work: filepath.Join(root, "work"), Target: filepath.Join(root, "mnt"), Backend: backend,
			}
			for _, d := range []string{s.Lower, s.Upper, s.Work, s.Target} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			for b.Loop() {
				if err := Mount(ctx, s); err != nil {
					b.Fatal(err)
				}
				if err := Unmount(ctx, s.Target); err != nil {
					_ = ForceUnmount(s.Target)
					b.Fatal(err)
				}
			}
		})
	}
}

func probeHasOpaqueXattr(p string, names ...string) bool {
	buf := make([]byte, 16)
	for _, name := range names {
		n, err := unix.Lgetxattr(p, name, buf)
		if err == nil && bytes.Equal(buf[:n], []byte("y")) {
			return true
		}
	}
	return false
}
