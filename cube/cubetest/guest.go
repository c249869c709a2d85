package cubetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratahq/strata/cube"
)

// errGuestGone is returned for work sent to a sandbox that was torn down.
var errGuestGone = errors.New("cubetest: sandbox namespace is gone")

// guest is a sandbox's private mount namespace, held by one locked OS
// thread. Everything that resolves a path in the sandbox (starting a
// process, opening a file) runs on that thread; children forked there
// inherit the namespace and get SIGKILL when the thread ends.
type guest struct {
	nsID   string // readlink of the namespace's /proc/*/ns/mnt
	ops    chan func()
	quit   chan struct{}
	exited chan struct{}
}

// startGuest makes the namespace: /tmp becomes scratch, host mounts are
// bound at their mount paths. dir holds overlay layers for mount points
// that do not exist on the host.
func startGuest(scratch, dir string, mounts []cube.HostMount) (*guest, error) {
	g := &guest{ops: make(chan func()), quit: make(chan struct{}), exited: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: the thread carries the namespace and the runtime
		// ends it when this goroutine returns.
		runtime.LockOSThread()
		defer close(g.exited)
		if err := enterNamespace(scratch, dir, mounts); err != nil {
			ready <- err
			return
		}
		nsID, err := os.Readlink("/proc/thread-self/ns/mnt")
		if err != nil {
			ready <- fmt.Errorf("read mount namespace id: %w", err)
			return
		}
		g.nsID = nsID
		ready <- nil
		for {
			select {
			case op := <-g.ops:
				op()
			case <-g.quit:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return g, nil
}

// run executes fn in the namespace.
func (g *guest) run(fn func() error) error {
	done := make(chan error, 1)
	select {
	case g.ops <- func() { done <- fn() }:
	case <-g.exited:
		return errGuestGone
	}
	return <-done
}

// stop ends the namespace thread (and with it, by Pdeathsig, its children).
func (g *guest) stop() {
	select {
	case <-g.quit:
	default:
		close(g.quit)
	}
	<-g.exited
}

// signal sends sig to every process living in the namespace (commands and
// anything they left running) and returns how many there were.
func (g *guest) signal(sig syscall.Signal) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && ns == g.nsID {
			if syscall.Kill(pid, sig) == nil {
				n++
			}
		}
	}
	return n
}

// killAll kills the namespace's processes until none is left (they may be
// forking meanwhile).
func (g *guest) killAll() {
	for range 100 {
		if g.signal(syscall.SIGKILL) == 0 {
			return
		}
		g.signal(syscall.SIGCONT)
		time.Sleep(5 * time.Millisecond)
	}
}

func enterNamespace(scratch, dir string, mounts []cube.HostMount) error {
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Pin every host path now: once scratch covers /tmp, host paths under
	// /tmp (test directories) are out of sight. Opened after unshare, the
	// descriptors belong to this namespace, so they can be bind sources.
	fds := make([]int, 0, len(mounts))
	defer func() {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
	}()
	isDir := make([]bool, len(mounts))
	for i, m := range mounts {
		if !filepath.IsAbs(m.HostPath) || !filepath.IsAbs(m.MountPath) {
			return fmt.Errorf("host mount %s -> %s: paths must be absolute", m.HostPath, m.MountPath)
		}
		fd, err := syscall.Open(m.HostPath, oPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("host mount %s: %w", m.HostPath, err)
		}
		fds = append(fds, fd)
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return fmt.Errorf("host mount %s: %w", m.HostPath, err)
		}
		isDir[i] = st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	}
	// Missing mount points outside /tmp: an overlay over the deepest
	// existing ancestor takes the new directories, so the host stays as it is.
	overlays := 0
	var overlaid []string
	for _, m := range mounts {
		target := filepath.Clean(m.MountPath)
		if underTmp(target) {
			continue
		}
		if _, err := os.Lstat(target); err == nil {
			continue
		}
		ancestor := deepestExisting(target)
		if coveredBy(ancestor, overlaid) {
			continue
		}
		if ancestor == "/" {
			return fmt.Errorf("host mount at %s: the fake cannot create a top-level directory; use a mount path whose parent exists", target)
		}
		if strings.ContainsAny(ancestor, ",:\\") {
			return fmt.Errorf("host mount at %s: cannot overlay %s (special characters)", target, ancestor)
		}
		upper := filepath.Join(dir, fmt.Sprintf("overlay%d", overlays), "upper")
		work := filepath.Join(dir, fmt.Sprintf("overlay%d", overlays), "work")
		overlays++
		for _, d := range []string{upper, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("overlay for %s: %w", target, err)
			}
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", ancestor, upper, work)
		if err := syscall.Mount("overlay", ancestor, "overlay", 0, opts); err != nil {
			return fmt.Errorf("overlay %s to make mount point %s: %w", ancestor, target, err)
		}
		overlaid = append(overlaid, ancestor)
	}
	if err := syscall.Mount(scratch, "/tmp", "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind scratch over /tmp: %w", err)
	}
	for i, m := range mounts {
		target := filepath.Clean(m.MountPath)
		if err := makeMountPoint(target, isDir[i]); err != nil {
			return fmt.Errorf("host mount %s: %w", target, err)
		}
		src := fmt.Sprintf("/proc/self/fd/%d", fds[i])
		if err := syscall.Mount(src, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s at %s: %w", m.HostPath, target, err)
		}
		if m.ReadOnly {
			if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("make %s read-only: %w", target, err)
			}
		}
	}
	return nil
}

func underTmp(p string) bool { return p == "/tmp" || strings.HasPrefix(p, "/tmp/") }

func coveredBy(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func deepestExisting(p string) string {
	for {
		p = filepath.Dir(p)
		if _, err := os.Lstat(p); err == nil || p == "/" {
			return p
		}
	}
}

func makeMountPoint(target string, dir bool) error {
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// lookPath finds file in the sandbox's PATH (not the test process's).
func lookPath(file, pathEnv string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable file not found in $PATH", file)
}

// oPath is O_PATH, which package syscall lacks (same value on every Linux
// architecture Go supports but alpha/parisc/sparc).
const oPath = 0x200000

// Sandboxes live on locked OS threads that sit in mount namespaces of their
// own; one that ran on the process's main thread would leave it there when
// it ends (Go parks a locked main thread instead of ending it), and
// /proc/self/mountinfo, which mount code reads, is the main thread's. Locking
// the main goroutine to the main thread keeps every sandbox off it, for every
// test binary that imports this package.
func init() { runtime.LockOSThread() }
