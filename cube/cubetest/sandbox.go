package cubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/stratahq/strata/cube"
)

// sandbox is one fake MicroVM. Its fixed fields are set at creation; the
// rest is guarded by mu.
type sandbox struct {
	id           string
	templateID   string
	domain       string
	metadata     map[string]string
	envVars      map[string]string
	mounts       []cube.HostMount
	timeout      *int
	autoPause    bool
	autoResume   bool
	internet     *bool    // effective allow_internet_access (network.allowPublicTraffic wins)
	allowOut     []string // network.allowOut
	denyOut      []string // network.denyOut
	startedAt    time.Time
	envdToken    string
	trafficToken string
	dir          string // <state>/sandboxes/<id>: rootfs/ (rootfs/tmp is /tmp) and ns/ (overlay layers)

	mu           sync.Mutex
	state        string
	guest        *guest
	snapshotting bool
	gone         bool
	terminals    map[int]*os.File // PTY masters of running processes, by pid
	stdins       map[int]*os.File // stdin pipes of processes started with stdin, by pid
	procs        map[int]procInfo // running processes started through envd, by pid
}

// procInfo is what envd's Process.List tells about a process.
type procInfo struct {
	config processSpec
	tag    string
	proc   *proc
}

// snapshot is a frozen copy of a sandbox's rootfs plus what a create from
// it needs.
type snapshot struct {
	id         string
	name       string
	sandboxID  string
	templateID string
	createdAt  time.Time
	dir        string // holds rootfs/
	mounts     []cube.HostMount
	envVars    map[string]string
}

func (sb *sandbox) scratch() string { return filepath.Join(sb.dir, "rootfs", "tmp") }

// boot makes the rootfs (a copy of from's when from is set) and starts the
// namespace.
func (sb *sandbox) boot(from string) error {
	rootfs := filepath.Join(sb.dir, "rootfs")
	if err := os.MkdirAll(sb.dir, 0o755); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	if from != "" {
		if err := copyTree(from, rootfs); err != nil {
			return fmt.Errorf("restore rootfs: %w", err)
		}
	}
	if err := os.MkdirAll(sb.scratch(), 0o755); err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	if err := os.Chmod(sb.scratch(), 0o1777); err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	nsDir := filepath.Join(sb.dir, "ns")
	if err := os.RemoveAll(nsDir); err != nil {
		return fmt.Errorf("clear overlay layers: %w", err)
	}
	g, err := startGuest(sb.scratch(), nsDir, sb.mounts)
	if err != nil {
		return err
	}
	sb.mu.Lock()
	sb.guest = g
	sb.state = cube.StateRunning
	sb.mu.Unlock()
	return nil
}

// signalAll sends sig to every process in the sandbox.
func (sb *sandbox) signalAll(sig syscall.Signal) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.signalLocked(sig)
}

func (sb *sandbox) signalLocked(sig syscall.Signal) {
	if sb.guest != nil {
		sb.guest.signal(sig)
	}
}

// shutdown kills every process of the sandbox and ends the namespace.
func (sb *sandbox) shutdown() {
	sb.mu.Lock()
	g := sb.guest
	sb.guest = nil
	sb.mu.Unlock()
	if g != nil {
		g.killAll()
		g.stop()
	}
}

// destroy is kill: nothing of the sandbox remains.
func (sb *sandbox) destroy() {
	sb.mu.Lock()
	sb.gone = true
	sb.mu.Unlock()
	sb.shutdown()
	_ = os.RemoveAll(sb.dir)
}

// takeSnapshot copies the rootfs with the commands stopped, for a
// consistent copy.
func (sb *sandbox) takeSnapshot(dst string) error {
	sb.signalAll(syscall.SIGSTOP)
	defer func() {
		sb.mu.Lock()
		if sb.state == cube.StateRunning {
			sb.signalLocked(syscall.SIGCONT)
		}
		sb.mu.Unlock()
	}()
	return copyTree(filepath.Join(sb.dir, "rootfs"), filepath.Join(dst, "rootfs"))
}

// rollback replaces the VM: commands die, the rootfs comes back from the
// snapshot, the namespace is made anew.
func (sb *sandbox) rollback(snap *snapshot) error {
	sb.shutdown()
	rootfs := filepath.Join(sb.dir, "rootfs")
	old := rootfs + ".old"
	if err := os.Rename(rootfs, old); err != nil {
		return fmt.Errorf("set rootfs aside: %w", err)
	}
	if err := sb.boot(filepath.Join(snap.dir, "rootfs")); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// copyTree copies a directory tree with modes, times, links and special
// files, like cp -a.
func copyTree(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := exec.Command("cp", "-a", "--", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
