package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
)

// Apply performs plan in the calling process's mount namespace, which must be
// its own (the session init's, after unshare(CLONE_NEWNS); for OpCgroup after
// CLONE_NEWCGROUP too). The first step makes every mount private, so nothing
// reaches the host's namespace. It stops at the first failing step, naming it.
func Apply(plan []Step) error {
	a := &applier{clones: map[string]int{}}
	defer a.close()
	for i, s := range plan {
		if err := a.step(s); err != nil {
			return fmt.Errorf("sandbox step %d (%s): %w", i+1, s, err)
		}
		if StepDone != nil {
			StepDone(s)
		}
	}
	return nil
}

// StepDone, when set, is called after each step Apply performed (the
// session init's STRATA_TRACE timing).
var StepDone func(Step)

type applier struct {
	clones map[string]int // by source path
	empty  int            // a detached read-only tmpfs holding one empty file, for masks
}

func (a *applier) close() {
	for _, fd := range a.clones {
		unix.Close(fd)
	}
	if a.empty > 0 {
		unix.Close(a.empty)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func (a *applier) step(s Step) error {
	check := s.Target
	if s.Source != "" {
		check = s.Source
	}
	if s.Op == OpBind {
		// A bind's source was cloned while the host was visible; by now
		// its path may be under a private /tmp.
		if _, ok := a.clones[s.Source]; !ok && s.IfExists {
			return nil
		}
	} else if s.IfExists && !exists(check) {
		return nil
	}
	if s.IfDir {
		if fi, err := os.Lstat(s.Target); err != nil || !fi.IsDir() {
			return nil
		}
	}
	switch s.Op {
	case OpPrivate:
		return unix.Mount("", s.Target, "", unix.MS_REC|unix.MS_PRIVATE, "")
	case OpClone:
		if _, ok := a.clones[s.Source]; ok {
			return nil
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, s.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return err
		}
		a.clones[s.Source] = fd
		return nil
	case OpOverlay:
		for _, d := range []string{s.Upper, s.Work} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		if mountOverlayDirect(s) == nil {
			return nil
		}
		// The general path: mount(2) on kernels without lowerdir+, and
		// the kernel's reasons when the overlay is refused.
		return mount.Mount(context.Background(), mount.MountSpec{
			Lower: s.Source, Upper: s.Upper, Work: s.Work, Target: s.Target,
			Backend: overlay.BackendKernel, UserXattr: s.UserXattr,
		})
	case OpHide:
		return unix.Mount("tmpfs", s.Target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555")
	case OpMaskFile:
		return a.maskFile(s.Target)
	case OpReadOnly:
		return unix.MountSetattr(unix.AT_FDCWD, s.Target, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	case OpWritable:
		return unix.MountSetattr(unix.AT_FDCWD, s.Target, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
	case OpTmpfs:
		return unix.Mount("tmpfs", s.Target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, s.Options)
	case OpDev:
		return privateDev(s.Target)
	case OpBind:
		fd, ok := a.clones[s.Source]
		if !ok {
			return fmt.Errorf("%s was not cloned before it could be covered (a plan bug)", s.Source)
		}
		if err := makeMountPoint(fd, s.Target); err != nil {
			return err
		}
		if err := attach(fd, s.Target); err != nil {
			return err
		}
		if s.AsCloned {
			return nil
		}
		attr := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		if s.ReadOnly {
			attr = &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		}
		return unix.MountSetattr(unix.AT_FDCWD, s.Target, unix.AT_RECURSIVE, attr)
	case OpProc:
		return unix.Mount("proc", s.Target, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	case OpProtect:
		if err := unix.Mount(s.Target, s.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		return unix.MountSetattr(unix.AT_FDCWD, s.Target, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC})
	case OpCgroup:
		if !exists(s.Target) {
			return nil
		}
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
		if s.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		return unix.Mount("cgroup2", s.Target, "cgroup2", flags, "")
	}
	return fmt.Errorf("unknown step %q", s.Op)
}

// attach moves a detached tree to target; the mount point must exist (the
// host is read-only by now, and a step that may lack one says IfExists).
func attach(fd int, target string) error {
	if !exists(target) {
		return fmt.Errorf("no mount point %s", target)
	}
	return unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// makeMountPoint creates target, a dir or a file like the tree fd, where the
// host lacks it: a source or cache under /tmp is under the private /tmp by
// now, which is writable. On the read-only host it fails, saying so.
func makeMountPoint(fd int, target string) error {
	if exists(target) {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("create mount point: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("create mount point: %w", err)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create mount point: %w", err)
	}
	return f.Close()
}

// maskFile covers a file with an empty read-only one from a detached tmpfs
// made once (no scratch directory is needed on the read-only host).
func (a *applier) maskFile(target string) error {
	if a.empty == 0 {
		fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		if err != nil {
			return fmt.Errorf("empty file for masks: %w", err)
		}
		defer unix.Close(fsfd)
		if err := unix.FsconfigSetString(fsfd, "size", "4k"); err != nil {
			return fmt.Errorf("empty file for masks: %w", err)
		}
		if err := unix.FsconfigCreate(fsfd); err != nil {
			return fmt.Errorf("empty file for masks: %w", err)
		}
		mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
		if err != nil {
			return fmt.Errorf("empty file for masks: %w", err)
		}
		f, err := unix.Openat(mfd, "empty", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
		if err != nil {
			unix.Close(mfd)
			return fmt.Errorf("empty file for masks: %w", err)
		}
		unix.Close(f)
		if err := unix.MountSetattr(mfd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			unix.Close(mfd)
			return fmt.Errorf("empty file for masks: %w", err)
		}
		a.empty = mfd
	}
	fd, err := unix.OpenTree(a.empty, "empty", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return attach(fd, target)
}

// privateDev gives a private /dev at target: the harmless character devices
// bound from the host's, a devpts instance of its own and a private /dev/shm.
func privateDev(target string) error {
	nodes := map[string]int{}
	defer func() {
		for _, fd := range nodes {
			unix.Close(fd)
		}
	}()
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		fd, err := unix.OpenTree(unix.AT_FDCWD, filepath.Join(target, name), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("clone %s/%s: %w", target, name, err)
		}
		nodes[name] = fd
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for name, fd := range nodes {
		p := filepath.Join(target, name)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
		if err := attach(fd, p); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		// The host's /dev may have been made read-only by now; device
		// nodes work on a read-only mount, but say writable for clarity.
		_ = unix.MountSetattr(unix.AT_FDCWD, p, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(target, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", filepath.Join(target, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	if err := unix.Mount("shm", filepath.Join(target, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("/dev/shm: %w", err)
	}
	for link, to := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd",
		"stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(to, filepath.Join(target, link)); err != nil {
			return err
		}
	}
	return nil
}

// mountOverlayDirect mounts a kernel overlay at s.Target with the fsconfig
// API and nothing else: in the session's private namespace there is no
// mount table to read before and after (overlay.Mount reads it twice, a few
// ms a session with a busy host). Any error: nothing was attached, and the
// caller falls back to overlay.Mount.
func mountOverlayDirect(s Step) error {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	esc := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`)
	for _, kv := range [][2]string{{"source", "overlay"}, {"lowerdir+", s.Source}, {"upperdir", esc.Replace(s.Upper)}, {"workdir", esc.Replace(s.Work)}} {
		if err := unix.FsconfigSetString(fd, kv[0], kv[1]); err != nil {
			return err
		}
	}
	if s.UserXattr {
		if err := unix.FsconfigSetFlag(fd, "userxattr"); err != nil {
			return err
		}
	}
	for _, o := range mount.KernelForcedOptions { // metacopy=off, as every strata kernel mount
		k, v, _ := strings.Cut(o, "=")
		if err := unix.FsconfigSetString(fd, k, v); err != nil {
			return err
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return err
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	return unix.MoveMount(mfd, "", unix.AT_FDCWD, s.Target, unix.MOVE_MOUNT_F_EMPTY_PATH)
}
