package mount

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

// unmountWait bounds the retries of an unmount that reports EBUSY.
const unmountWait = 2 * time.Second

// errNoFsconfig means the kernel lacks the new mount API or overlay's
// "lowerdir+" key, so the legacy mount(2) string has to be used.
var errNoFsconfig = errors.New("fsconfig overlay mount not supported")

// mountKernel mounts kernel overlayfs, preferring the new mount API: with
// "lowerdir+" the lower path needs no escaping at all.
func mountKernel(s MountSpec) (detail string, err error) {
	// overlayfs reports most causes (conflicting options, a bad layer) with
	// pr_err to the kernel log, not to the fs_context, so read that too.
	klog := openKernelLog()
	defer klog.close()
	detail, err = mountKernelFsconfig(s)
	if errors.Is(err, errNoFsconfig) {
		detail, err = mountKernelLegacy(s)
	}
	if err != nil {
		detail = strings.TrimSpace(detail + "\n" + klog.overlayMessages())
	}
	return detail, err
}

// kernelLog reads the kernel log records written after it was opened.
type kernelLog struct{ fd int }

func openKernelLog() kernelLog {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return kernelLog{fd: -1} // not root, or dmesg_restrict: do without
	}
	if _, err := unix.Seek(fd, 0, unix.SEEK_END); err != nil {
		unix.Close(fd)
		return kernelLog{fd: -1}
	}
	return kernelLog{fd: fd}
}

// overlayMessages returns the new records that mention overlayfs. Each read
// of /dev/kmsg returns one record: "prio,seq,usec,flags;text\n".
func (k kernelLog) overlayMessages() string {
	if k.fd < 0 {
		return ""
	}
	var msgs []string
	buf := make([]byte, 8192)
	for range 256 {
		n, err := unix.Read(k.fd, buf)
		if errors.Is(err, unix.EPIPE) {
			continue // records were overwritten; the next read resumes
		}
		if err != nil || n <= 0 {
			break
		}
		_, text, ok := strings.Cut(string(buf[:n]), ";")
		text, _, _ = strings.Cut(text, "\n")
		if ok && strings.Contains(text, "overlay") {
			msgs = append(msgs, "kernel: "+text)
		}
	}
	return strings.Join(msgs, "\n")
}

func (k kernelLog) close() {
	if k.fd >= 0 {
		unix.Close(k.fd)
	}
}

func mountKernelFsconfig(s MountSpec) (string, error) {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) {
		return "", errNoFsconfig
	}
	if err != nil {
		return "", fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.FsconfigSetString(fd, "source", "overlay"); err != nil {
		return fsMessages(fd), fmt.Errorf("fsconfig source: %w", err)
	}
	if err := unix.FsconfigSetString(fd, "lowerdir+", s.Lower); err != nil {
		if errors.Is(err, unix.EINVAL) {
			// Kernels before 6.8 do not know "lowerdir+"; if something else
			// is wrong, the legacy mount reports it.
			_ = fsMessages(fd)
			return "", errNoFsconfig
		}
		return fsMessages(fd), fmt.Errorf("fsconfig lowerdir+: %w", err)
	}
	// upperdir and workdir are unescaped by the kernel even through fsconfig.
	for _, kv := range [][2]string{{"upperdir", escapeOverlayPath(s.Upper)}, {"workdir", escapeOverlayPath(s.Work)}} {
		if err := unix.FsconfigSetString(fd, kv[0], kv[1]); err != nil {
			return fsMessages(fd), fmt.Errorf("fsconfig %s: %w", kv[0], err)
		}
	}
	opts := s.Options
	if s.UserXattr {
		opts = append([]string{"userxattr"}, opts...)
	}
	opts = slices.Concat(opts, KernelForcedOptions)
	for _, o := range opts {
		var err error
		if key, value, ok := strings.Cut(o, "="); ok {
			err = unix.FsconfigSetString(fd, key, value)
		} else {
			err = unix.FsconfigSetFlag(fd, o)
		}
		if err != nil {
			return fsMessages(fd), fmt.Errorf("fsconfig option %q: %w", o, err)
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return fsMessages(fd), fmt.Errorf("create overlay: %w", err)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fsMessages(fd), fmt.Errorf("fsmount: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, s.Target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", fmt.Errorf("attach overlay at %s: %w", s.Target, err)
	}
	return "", nil
}

// fsMessages drains the messages the kernel queued on an fs_context
// ("e overlayfs: failed to resolve ...").
func fsMessages(fd int) string {
	var msgs []string
	buf := make([]byte, 1024)
	for range 16 {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		msgs = append(msgs, strings.TrimSpace(string(buf[:n])))
	}
	return strings.Join(msgs, "\n")
}

func mountKernelLegacy(s MountSpec) (string, error) {
	data := "lowerdir=" + escapeOverlayPath(s.Lower) + ",upperdir=" + escapeOverlayPath(s.Upper) +
		",workdir=" + escapeOverlayPath(s.Work)
	if s.UserXattr {
		data += ",userxattr"
	}
	for _, o := range append(slices.Clip(s.Options), KernelForcedOptions...) {
		data += "," + o
	}
	if err := unix.Mount("overlay", s.Target, "overlay", 0, data); err != nil {
		return "", fmt.Errorf("mount(2) overlay: %w", err)
	}
	return "", nil
}

// escapeOverlayPath escapes a layer path for overlayfs's option parser, which
// splits options on commas and lower layers on colons, honouring backslash.
func escapeOverlayPath(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`)
	return r.Replace(p)
}

func unmountTop(ctx context.Context, target string, lazy bool) error {
	abs, err := filepath.Abs(target)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	fstype, mounted, err := MountedAt(abs)
	if err != nil {
		return &MountError{Op: "unmount", Target: abs, Err: err}
	}
	if !mounted {
		return nil
	}
	backend := backendOfFSType(fstype)
	fail := func(detail string, err error) error {
		return &MountError{Op: "unmount", Backend: backend, Target: abs, Detail: detail, Err: err}
	}
	flags := 0
	if lazy {
		flags = unix.MNT_DETACH
	}
	deadline := time.Now().Add(unmountWait)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		err := unix.Unmount(abs, flags)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINVAL):
			// Someone else unmounted it between our look and the call.
			if _, still, _ := MountedAt(abs); !still {
				return nil
			}
			return fail("", err)
		case errors.Is(err, unix.EPERM) && strings.HasPrefix(fstype, "fuse"):
			// Not root: only the setuid helper may unmount a user's FUSE mount.
			if detail, err := fusermountUnmount(ctx, abs, lazy); err != nil {
				return fail(detail, err)
			}
			return nil
		case errors.Is(err, unix.EBUSY) && !lazy && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return fail("", fmt.Errorf("%w (retrying stopped: %w)", err, ctx.Err()))
			case <-time.After(delay):
			}
		case errors.Is(err, unix.EBUSY) && !lazy:
			return fail("", fmt.Errorf("%w after %s of retries (ForceUnmount detaches lazily)", err, unmountWait))
		default:
			return fail("", err)
		}
	}
}

func fusermountUnmount(ctx context.Context, target string, lazy bool) (string, error) {
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	args = append(args, target)
	for _, tool := range []string{"fusermount3", "fusermount"} {
		bin, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
		}
		return "", nil
	}
	return "", errors.New("fusermount3 not found on PATH (apt-get install fuse3)")
}

func backendOfFSType(fstype string) overlay.Backend {
	switch {
	case fstype == "overlay":
		return overlay.BackendKernel
	case strings.HasSuffix(fstype, "fuse-overlayfs"):
		return overlay.BackendFuseOverlayfs
	case strings.HasSuffix(fstype, "unionfs"), strings.HasSuffix(fstype, "unionfs-fuse"):
		return overlay.BackendUnionfs
	}
	return ""
}
