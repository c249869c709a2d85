package main

// Helpers of the end-to-end security suite (e2e_security_test.go): a World
// with a planted home and credentials, the hostile probe binary, host-side
// servers (unix, abstract, HTTP on 127.0.0.x) that count what reaches them,
// and the gate that keeps the sandbox tests off until the wiring lands.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A level is how a test asks for an isolation level: "default" passes no
// flag (the default must be sandbox), the others pass --isolation NAME.
type level string

const (
	lvDefault level = "default"
	lvSandbox level = "sandbox"
	lvStrict  level = "strict"
	lvTree    level = "tree"
)

func (l level) flags() []string {
	if l == lvDefault {
		return nil
	}
	return []string{"--isolation", string(l)}
}

// secEnv is an env whose caller has a home of its own (outside /tmp, which
// the sandbox makes private) with planted credentials, and a host dir
// outside the source for the test's probes and servers.
type secEnv struct {
	*env
	fakeHome string // $HOME of the caller
	hostDir  string // a host dir outside the source, /tmp and the home
	probe    string // the hostile probe binary, under hostDir
}

const (
	sshSecret = "PLANTED-SSH-PRIVATE-KEY-7f3a"
	awsSecret = "PLANTED-AWS-SECRET-91c2"
)

var (
	probeOnce  sync.Once
	probeBuilt string
	probeErr   error
)

// buildProbe builds testdata/security/probe once per test binary.
func buildProbe(t *testing.T) string {
	t.Helper()
	probeOnce.Do(func() {
		// Next to the strata binary: TestMain removes that dir.
		probeBuilt = filepath.Join(filepath.Dir(strataBin), "probe")
		c := exec.Command("go", "build", "-o", probeBuilt, "./testdata/security/probe")
		if out, err := c.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("build the probe: %v\n%s", err, out)
		}
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	return probeBuilt
}

// with is s for subtest t: failures of its helpers fail t, not the parent.
func (s *secEnv) with(t *testing.T) *secEnv {
	e := *s.env
	e.t = t
	c := *s
	c.env = &e
	return &c
}

func newSecEnv(t *testing.T, config string) *secEnv {
	t.Helper()
	e := newEnv(t)
	// /var/lib, not /tmp or /var/tmp: those are private in a sandbox, and the
	// probe and the planted home must be the host's.
	host, err := os.MkdirTemp("/var/lib", "strata-sec-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(host) })
	must(t, os.Chmod(host, 0o755))
	s := &secEnv{env: e, fakeHome: filepath.Join(host, "home"), hostDir: host, probe: filepath.Join(host, "probe")}
	for p, c := range map[string]string{
		".ssh/id_ed25519":  sshSecret + "\n",
		".aws/credentials": "[default]\naws_secret_access_key = " + awsSecret + "\n",
		".bashrc":          "# the real bashrc\n",
	} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(s.fakeHome, p)), 0o700))
		must(t, os.WriteFile(filepath.Join(s.fakeHome, p), []byte(c), 0o600))
	}
	data, err := os.ReadFile(buildProbe(t))
	must(t, err)
	must(t, os.WriteFile(s.probe, data, 0o755))
	if config != "" {
		must(t, os.WriteFile(filepath.Join(filepath.Dir(e.home), "config.toml"), []byte(config), 0o644))
	}
	e.vars = append(e.vars, "HOME="+s.fakeHome)
	return s
}

// sh runs script in World w at level l (plus extra exec flags) and returns
// its stdout+stderr and exit status. A usage error of strata (exit 2 with
// "usage" or "want") is reported as such, so a test's failure says it.
func (s *secEnv) sh(w string, l level, extra []string, script string) (string, int) {
	s.t.Helper()
	args := append([]string{"exec", w}, l.flags()...)
	args = append(args, extra...)
	args = append(args, "--", "sh", "-c", script)
	out, errs, code := s.run(args...)
	refusedByStrata(s.t, args, errs)
	if strings.HasPrefix(errs, "strata: warning") {
		// tree's warning, before the command ran: not the command's output.
		_, errs, _ = strings.Cut(errs, "\n")
	}
	return out + errs, code
}

// refusedByStrata fails the test when strata itself refused to start the
// session (an unknown level, flag or config key): the attack never ran, so
// its outcome proves nothing. The command's own stderr never starts with
// "strata: " (a warning strata prints before the command runs, such as
// tree's, is not a refusal).
func refusedByStrata(t *testing.T, args []string, errs string) {
	t.Helper()
	refused := strings.HasPrefix(errs, "strata: ") && !strings.HasPrefix(errs, "strata: warning")
	if refused || strings.Contains(errs, "flag provided but not defined") {
		line, _, _ := strings.Cut(errs, "\n")
		t.Fatalf("strata %s: refused to start the session: %s", strings.Join(args, " "), line)
	}
}

// meta reads a session's meta.json.
func (s *secEnv) meta(w, id string) map[string]any {
	s.t.Helper()
	data, err := os.ReadFile(filepath.Join(s.home, "worlds", w, "sessions", id, "meta.json"))
	must(s.t, err)
	var m map[string]any
	must(s.t, json.Unmarshal(data, &m))
	return m
}

// hostCgroup is the unified-hierarchy cgroup of a host pid ("/strata/..."),
// "" when it cannot be read.
func hostCgroup(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "0::"); ok {
			return rest
		}
	}
	return ""
}

// cgroup2Root is where the unified hierarchy is mounted on the host.
func cgroup2Root(t *testing.T) string {
	for _, d := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "cgroup.controllers")); err == nil {
				return d
			}
		}
	}
	t.Skip("no cgroup v2 hierarchy on this machine")
	return ""
}

// countingUnix serves hello-from-host on a unix socket (path, or "@name" for
// an abstract one) and counts the connections it accepted.
func countingUnix(t *testing.T, addr string) *atomic.Int64 {
	t.Helper()
	l, err := net.Listen("unix", addr)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	if !strings.HasPrefix(addr, "@") {
		must(t, os.Chmod(addr, 0o777))
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			fmt.Fprintln(c, "hello-from-host")
			c.Close()
		}
	}()
	return &n
}

// countingHTTP serves body on ip:0 and counts requests; it returns the
// address and the counter.
func countingHTTP(t *testing.T, ip, body string) (string, *atomic.Int64) {
	t.Helper()
	return serveHTTP(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, body)
	}))
}

func serveHTTP(t *testing.T, ip string, h http.Handler) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s (loopback aliases): %v", ip, err)
	}
	var n atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), &n
}

// onTerminalStdin is onTerminal with standard input on the terminal too
// (exec --tty needs it), returning what strata wrote there.
func (e *env) onTerminalStdin(args ...string) string {
	e.t.Helper()
	out, _ := e.onPTY(true, args...)
	return out
}

// onPTY runs strata with stdout and stderr (and, with stdin, its standard
// input and controlling terminal) on a fresh pseudo-terminal, and returns what
// the terminal showed and strata's exit status.
func (e *env) onPTY(stdin bool, args ...string) (string, int) {
	e.t.Helper()
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	must(e.t, err)
	must(e.t, unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0))
	must(e.t, unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 120}))
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		e.t.Fatal(errno)
	}
	master, slave := os.NewFile(uintptr(mfd), "ptmx"), os.NewFile(sfd, "pts")
	defer master.Close()
	c := e.cmd(args...)
	c.Stdout, c.Stderr = slave, slave
	if stdin {
		c.Stdin = slave
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&buf, master); close(done) }()
	err = c.Run()
	slave.Close()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatal(err)
	}
	select {
	case <-done: // EIO once the last writer closed
	case <-time.After(10 * time.Second):
		e.t.Errorf("the terminal stayed open 10s after strata exited")
	}
	return buf.String(), c.ProcessState.ExitCode()
}
