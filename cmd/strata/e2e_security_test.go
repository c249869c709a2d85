package main

// The end-to-end attack suite of the default boundary (issue 14). Every test
// runs a hostile command as root inside a World through the built binary and
// names the row of docs/security.md's "A hostile command inside a World ..."
// table it proves.

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Row 7: a file descriptor the caller had open (a host dir on fd 7, a file
// on fd 8) is not inherited by the command, at every level, tree included.
func TestSecInheritedFDs(t *testing.T) {
	t.Parallel()
	s := newSecEnv(t, "")
	s.ok("new", "w")
	dir := filepath.Join(s.hostDir, "fd-dir")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "host-listing-marker"), nil, 0o644))
	file := filepath.Join(s.hostDir, "fd-file")
	must(t, os.WriteFile(file, []byte("host-file-content-marker\n"), 0o644))
	for _, l := range []level{lvTree, lvDefault, lvSandbox, lvStrict} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			d, err := os.Open(dir)
			must(t, err)
			defer d.Close()
			f, err := os.OpenFile(file, os.O_RDWR, 0)
			must(t, err)
			defer f.Close()
			args := append([]string{"exec", "w"}, l.flags()...)
			args = append(args, "--", "sh", "-c", "ls /proc/self/fd/7/; cat /proc/self/fd/8; echo pwned > /proc/self/fd/7/written; echo pwned >&8; ls /proc/self/fd")
			c := s.cmd(args...)
			// fds 3..6 closed in strata's parent; 7 the dir, 8 the file.
			c.ExtraFiles = []*os.File{nil, nil, nil, nil, d, f}
			var stdout, stderr bytes.Buffer
			c.Stdout, c.Stderr = &stdout, &stderr
			_ = c.Run()
			refusedByStrata(t, args, stderr.String())
			out := stdout.String() + stderr.String()
			if strings.Contains(out, "host-listing-marker") {
				t.Errorf("read /proc/self/fd/7: host dir listing visible:\n%s", out)
			}
			if strings.Contains(out, "host-file-content-marker") {
				t.Errorf("read /proc/self/fd/8: host file content visible:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(dir, "written")); err == nil {
				t.Errorf("echo > /proc/self/fd/7/written wrote the host dir")
				os.Remove(filepath.Join(dir, "written"))
			}
			if got, _ := os.ReadFile(file); string(got) != "host-file-content-marker\n" {
				t.Errorf("the host file on fd 8 was written: %q", got)
				must(t, os.WriteFile(file, []byte("host-file-content-marker\n"), 0o644))
			}
		})
	}
}

// Row 2 (host writes outside the source) and row 1 (the source changes only
// in the World); the private /tmp, /var/tmp and /dev/shm of the sandbox.
func TestSecHostWrites(t *testing.T) {
	t.Parallel()
	s := newSecEnv(t, "")
	s.ok("new", "w")
	outside := filepath.Join(s.hostDir, "outside.txt")
	hostTmp, err := os.CreateTemp("/tmp", "strata-sec-hostfile-")
	must(t, err)
	hostTmp.Close()
	t.Cleanup(func() { os.Remove(hostTmp.Name()) })
	etcProbe := filepath.Join("/etc", "strata-sec-probe-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.Remove(etcProbe) })
	for _, l := range []level{lvTree, lvDefault, lvSandbox, lvStrict} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			must(t, os.WriteFile(outside, []byte("host\n"), 0o644))
			if l == lvTree {
				// What tree still allows: the host outside the source is
				// writable (the documented, warned-about opt-in).
				out, code := s.sh("w", l, nil, "echo world > "+outside)
				if code != 0 {
					t.Fatalf("tree: write outside the source: exit %d: %s", code, out)
				}
				if got, _ := os.ReadFile(outside); string(got) != "world\n" {
					t.Fatalf("tree: host file %q, want the World's write", got)
				}
				return
			}
			for _, p := range []string{outside, etcProbe} {
				out, code := s.sh("w", l, nil, "echo evil > "+p)
				if code == 0 || !strings.Contains(out, "Read-only file system") && !strings.Contains(out, "Permission denied") {
					t.Errorf("write %s: exit %d, %q: want EROFS or EACCES", p, code, out)
				}
			}
			if got, _ := os.ReadFile(outside); string(got) != "host\n" {
				t.Errorf("the host file outside the source changed: %q", got)
			}
			if _, err := os.Stat(etcProbe); err == nil {
				t.Errorf("the command created %s on the host", etcProbe)
				os.Remove(etcProbe)
			}
			// The source path is writable, in the World only.
			if out, code := s.sh("w", l, nil, "echo world-"+string(l)+" > "+filepath.Join(s.source, "a.txt")); code != 0 {
				t.Fatalf("write the source path: exit %d: %s", code, out)
			}
			if got := s.readSource("a.txt"); got != "hello\n" {
				t.Fatalf("the real source changed: %q", got)
			}
			if out := s.ok("exec", "w", "--", "cat", "a.txt"); out != "world-"+string(l)+"\n" {
				t.Fatalf("the World's a.txt = %q", out)
			}
			// Private temp dirs: writable, and the host's /tmp file is not there.
			// Today's strict has a private /tmp but a read-only /var/tmp and
			// the host's /dev/shm.
			script := fmt.Sprintf("test ! -e %s || { echo host tmp visible; exit 3; }; for d in /tmp /var/tmp /dev/shm; do echo x > $d/strata-sec-private || exit 4; done; echo done", hostTmp.Name())
			if out, code := s.sh("w", l, nil, script); code != 0 || !strings.Contains(out, "done") {
				t.Errorf("private /tmp, /var/tmp, /dev/shm: exit %d: %s", code, out)
			}
			for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
				if _, err := os.Stat(filepath.Join(d, "strata-sec-private")); err == nil {
					t.Errorf("a write to %s inside the World reached the host's %s", d, d)
					os.Remove(filepath.Join(d, "strata-sec-private"))
				}
			}
		})
	}
}

// Row 3: the home layer. ~/.cache/x written in the World persists in its
// next session, never reaches the real home, is not a change of the World
// and is never applied; ~/.bashrc is the World's own.
func TestSecHomeLayer(t *testing.T) {
	t.Parallel()
	s := newSecEnv(t, "")
	t.Run("tree", func(t *testing.T) {
		s := s.with(t)
		// What tree still allows: the real home is written.
		s.ok("new", "t", "--isolation", "tree")
		if out, code := s.sh("t", lvTree, nil, "echo tree >> ~/.bashrc"); code != 0 {
			t.Fatalf("tree: write ~/.bashrc: exit %d: %s", code, out)
		}
		if got, _ := os.ReadFile(filepath.Join(s.fakeHome, ".bashrc")); !strings.Contains(string(got), "tree") {
			t.Fatalf("tree: the real ~/.bashrc = %q, want the World's write", got)
		}
		must(t, os.WriteFile(filepath.Join(s.fakeHome, ".bashrc"), []byte("# the real bashrc\n"), 0o600))
	})
	t.Run("strict", func(t *testing.T) {
		s := s.with(t)
		s.ok("new", "s", "--isolation", "strict")
		out, code := s.sh("s", lvStrict, nil, "echo evil >> ~/.bashrc")
		if code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("strict: write ~/.bashrc: exit %d, %q: want EROFS", code, out)
		}
		if got, _ := os.ReadFile(filepath.Join(s.fakeHome, ".bashrc")); string(got) != "# the real bashrc\n" {
			t.Errorf("strict: the real ~/.bashrc changed: %q", got)
		}
	})
	for _, l := range []level{lvDefault, lvSandbox} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			w := "h-" + string(l)
			s.ok(append([]string{"new", w}, l.flags()...)...)
			if out, code := s.sh(w, l, nil, "mkdir -p ~/.cache && echo cached > ~/.cache/x && echo evil >> ~/.bashrc"); code != 0 {
				t.Fatalf("write ~/.cache/x and ~/.bashrc: exit %d: %s", code, out)
			}
			if out, code := s.sh(w, l, nil, "cat ~/.cache/x ~/.bashrc"); code != 0 || out != "cached\n# the real bashrc\nevil\n" {
				t.Errorf("the next session of the World: exit %d, %q: want its ~/.cache/x and ~/.bashrc", code, out)
			}
			if _, err := os.Stat(filepath.Join(s.fakeHome, ".cache", "x")); err == nil {
				t.Errorf("~/.cache/x reached the real home")
			}
			if got, _ := os.ReadFile(filepath.Join(s.fakeHome, ".bashrc")); string(got) != "# the real bashrc\n" {
				t.Errorf("the real ~/.bashrc changed: %q", got)
			}
			if st := s.status(w); len(st.Changes) != 0 {
				t.Errorf("home-layer writes are changes of the World: %+v", st.Changes)
			}
			s.run("apply", w)
			if _, err := os.Stat(filepath.Join(s.fakeHome, ".cache", "x")); err == nil {
				t.Errorf("apply wrote ~/.cache/x to the real home")
			}
			if _, err := os.Stat(filepath.Join(s.source, ".cache")); err == nil {
				t.Errorf("apply wrote .cache into the source")
			}
			// Another World does not see this World's home layer.
			s.ok(append([]string{"new", w + "-other"}, l.flags()...)...)
			if out, code := s.sh(w+"-other", l, nil, "cat ~/.cache/x"); code == 0 {
				t.Errorf("another World reads this World's ~/.cache/x: %q", out)
			}
		})
	}
}

// Row 5: planted credentials are unreadable (or absent) inside.
func TestSecCredentials(t *testing.T) {
	t.Parallel()
	s := newSecEnv(t, "")
	s.ok("new", "w")
	script := "cat ~/.ssh/id_ed25519 ~/.aws/credentials; ls -a ~/.ssh"
	for _, l := range []level{lvTree, lvDefault, lvSandbox, lvStrict} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			out, _ := s.sh("w", l, nil, script)
			if l == lvTree {
				// What tree still allows: credentials are readable.
				if !strings.Contains(out, sshSecret) || !strings.Contains(out, awsSecret) {
					t.Fatalf("tree: the planted credentials are not readable: %q", out)
				}
				return
			}
			if strings.Contains(out, sshSecret) {
				t.Errorf("read ~/.ssh/id_ed25519: the planted key is readable: %q", out)
			}
			if strings.Contains(out, awsSecret) {
				t.Errorf("read ~/.aws/credentials: the planted secret is readable: %q", out)
			}
			for _, line := range strings.Split(out, "\n") {
				// cat's own "No such file" names it; ls must not list it.
				if strings.Contains(line, "id_ed25519") && !strings.HasPrefix(line, "cat: ") {
					t.Errorf("ls ~/.ssh lists the planted key: %q", out)
				}
			}
			// A session whose HOME names another home (as an agent's
			// does: /run/strata/home) still cannot read the user's.
			other := filepath.Join(s.hostDir, "other-home")
			must(t, os.MkdirAll(other, 0o755))
			out, _ = s.sh("w", l, []string{"--env", "HOME=" + other}, fmt.Sprintf("echo home=$HOME; cat %[1]s/.ssh/id_ed25519 %[1]s/.aws/credentials", s.fakeHome))
			if !strings.Contains(out, "home="+other) {
				t.Fatalf("the session's HOME is not the one asked for: %q", out)
			}
			if strings.Contains(out, sshSecret) || strings.Contains(out, awsSecret) {
				t.Errorf("HOME=%s: the user's planted credentials are readable by their path: %q", other, out)
			}
		})
	}
}

// Row 6: a secret in the caller's environment is not in the command's unless
// named (exec --pass-env, [boundary] pass_env, exec --env).
func TestSecEnvScrub(t *testing.T) {
	t.Parallel()
	cfg := "[boundary.worlds.granted]\npass_env = [\"FOO_TOKEN\"]\n"
	s := newSecEnv(t, "")
	s.vars = append(s.vars, "FOO_TOKEN=secret-foo-token", "SSH_AUTH_SOCK=/tmp/ssh-agent.sock", "AWS_SECRET_ACCESS_KEY=secret-aws")
	s.ok("new", "w")
	for _, l := range []level{lvTree, lvDefault, lvSandbox, lvStrict} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			out, code := s.sh("w", l, nil, "env")
			if code != 0 && l == lvTree {
				t.Fatalf("env: exit %d: %s", code, out)
			}
			if l == lvTree {
				// What tree still allows: the host's environment.
				if !strings.Contains(out, "FOO_TOKEN=secret-foo-token") {
					t.Fatalf("tree: FOO_TOKEN not passed: %q", out)
				}
				return
			}
			for _, leak := range []string{"FOO_TOKEN=", "SSH_AUTH_SOCK=", "AWS_SECRET_ACCESS_KEY="} {
				if strings.Contains(out, leak) {
					t.Errorf("the command's environment has %s... (not named): %q", leak, out)
				}
			}
			if !strings.Contains(out, "HOME="+s.fakeHome) || !strings.Contains(out, "PATH=") {
				t.Errorf("the allow-listed HOME and PATH are missing: %q", out)
			}
			// Named: the one variable passes, the others stay out.
			out, _ = s.sh("w", l, []string{"--pass-env", "FOO_TOKEN"}, "env")
			if !strings.Contains(out, "FOO_TOKEN=secret-foo-token") || strings.Contains(out, "SSH_AUTH_SOCK=") {
				t.Errorf("exec --pass-env FOO_TOKEN: %q: want FOO_TOKEN and no SSH_AUTH_SOCK", out)
			}
			if out, _ = s.sh("w", l, []string{"--env", "FOO_TOKEN=given"}, "env"); !strings.Contains(out, "FOO_TOKEN=given") {
				t.Errorf("exec --env FOO_TOKEN=given: %q", out)
			}
		})
	}
	t.Run("config-pass_env", func(t *testing.T) {
		s := s.with(t)
		must(t, os.WriteFile(filepath.Join(filepath.Dir(s.home), "config.toml"), []byte(cfg), 0o644))
		s.ok("new", "granted")
		out, _ := s.sh("granted", lvDefault, nil, "env")
		if !strings.Contains(out, "FOO_TOKEN=secret-foo-token") || strings.Contains(out, "AWS_SECRET_ACCESS_KEY=") {
			t.Errorf("[boundary.worlds.granted] pass_env = [FOO_TOKEN]: %q: want FOO_TOKEN only", out)
		}
		if out, _ := s.sh("w", lvDefault, nil, "env"); strings.Contains(out, "FOO_TOKEN=") {
			t.Errorf("another World got the granted World's FOO_TOKEN: %q", out)
		}
	})
}

// Rows 8 and 9: host unix sockets under /tmp and /run and an abstract unix
// socket served by a host process are unreachable.
func TestSecHostUnixSockets(t *testing.T) {
	t.Parallel()
	s := newSecEnv(t, "")
	s.ok("new", "w")
	tmpDir, err := os.MkdirTemp("/tmp", "strata-sec-sock-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(tmpDir) })
	runDir, err := os.MkdirTemp("/run", "strata-sec-sock-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(runDir) })
	must(t, os.Chmod(tmpDir, 0o755))
	must(t, os.Chmod(runDir, 0o755))
	tmpSock, runSock := filepath.Join(tmpDir, "daemon.sock"), filepath.Join(runDir, "daemon.sock")
	abstract := fmt.Sprintf("@strata-sec-%d", os.Getpid())
	counters := map[string]interface{ Load() int64 }{
		tmpSock:  countingUnix(t, tmpSock),
		runSock:  countingUnix(t, runSock),
		abstract: countingUnix(t, abstract),
	}
	for _, l := range []level{lvTree, lvDefault, lvSandbox, lvStrict} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			if l == lvTree {
				// What tree still allows: the host's daemons.
				out, code := s.sh("w", l, nil, s.probe+" dial-unix "+tmpSock)
				if code != 0 || !strings.Contains(out, "hello-from-host") {
					t.Fatalf("tree: dial %s: exit %d: %s", tmpSock, code, out)
				}
				return
			}
			for addr, n := range counters {
				before := n.Load()
				out, code := s.sh("w", l, nil, s.probe+" dial-unix "+addr)
				if code == 0 || strings.Contains(out, "hello-from-host") || n.Load() != before {
					t.Errorf("dial host unix socket %s: exit %d, %q, accepted %d: want unreachable", addr, code, out, n.Load()-before)
				}
			}
		})
	}
	t.Run("sandbox-network-host", func(t *testing.T) {
		s := s.with(t)
		// Row 9: abstract sockets belong to the network namespace, so
		// network = host reaches them (documented).
		out, code := s.sh("w", lvSandbox, []string{"--network", "host"}, s.probe+" dial-unix "+abstract)
		if code != 0 || !strings.Contains(out, "hello-from-host") {
			t.Errorf("sandbox --network host: dial %s: exit %d: %s", abstract, code, out)
		}
	})
}

// Row 16: the command cannot freeze or kill another World's session or a
// host process through cgroupfs, cannot leave its cgroup, and a snapshot
// taken while it tries still pauses it. (It was serial while a World's
// first session's sweep of idle cgroups could remove another World's new
// session cgroup; sweeps now leave cgroups younger than 5 s alone.)
func TestSecCgroups(t *testing.T) {
	t.Parallel()
	root := cgroup2Root(t)
	s := newSecEnv(t, "")
	s.ok("new", "victim")
	s.ok("new", "w")
	alive := func(pid int) bool { return syscall.Kill(pid, 0) == nil }
	frozen := func(dir string) bool {
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		return strings.Contains(string(data), "frozen 1")
	}
	// sessionPid waits for a detached session's command pid.
	sessionPid := func(w, id string) int {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if p, ok := s.meta(w, id)["pid"].(float64); ok && p > 0 {
				return int(p)
			}
		}
		t.Fatalf("session %s of %s recorded no pid in 30 s", id, w)
		return 0
	}
	for _, l := range []level{lvDefault, lvSandbox, lvStrict, lvTree} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			// A fresh victim session in another World, and a host process in
			// a cgroup of its own.
			vid := strings.TrimSpace(s.ok("exec", "victim", "--detach", "--", "sleep", "600"))
			defer s.run("kill", "victim", vid, "--signal", "KILL")
			vpid := sessionPid("victim", vid)
			vcg := hostCgroup(vpid)
			if !strings.Contains(vcg, "strata") {
				t.Fatalf("the victim session has no strata cgroup (pid %d, cgroup %q)", vpid, vcg)
			}
			victimDir := filepath.Join(root, vcg)
			hostCg, err := os.MkdirTemp(root, "strata-sec-host-")
			must(t, err)
			host := exec.Command("sleep", "600")
			must(t, host.Start())
			defer func() {
				os.WriteFile(filepath.Join(hostCg, "cgroup.freeze"), []byte("0"), 0)
				host.Process.Kill()
				host.Wait()
				os.Remove(hostCg)
			}()
			must(t, os.WriteFile(filepath.Join(hostCg, "cgroup.procs"), []byte(strconv.Itoa(host.Process.Pid)), 0))
			// The attack: the host paths of both cgroups (and every mount
			// point of cgroupfs the command might have).
			attack := fmt.Sprintf(`for d in %[1]s %[2]s; do echo 1 > $d/cgroup.freeze; done
for d in %[1]s %[2]s; do echo 1 > $d/cgroup.kill; done
for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do echo %[3]d > %[2]s/cgroup.procs; echo $$ > $r/cgroup.procs; done
true`, victimDir, hostCg, host.Process.Pid)
			out, _ := s.sh("w", l, nil, attack)
			if !alive(vpid) {
				t.Errorf("write 1 to another World's session cgroup.kill killed it: %s", out)
			}
			if frozen(victimDir) {
				os.WriteFile(filepath.Join(victimDir, "cgroup.freeze"), []byte("0"), 0)
				t.Errorf("write 1 to another World's session cgroup.freeze froze it: %s", out)
			}
			if !alive(host.Process.Pid) {
				t.Errorf("write 1 to a host cgroup.kill killed the host process: %s", out)
			}
			if frozen(hostCg) {
				t.Errorf("write 1 to a host cgroup.freeze froze the host process: %s", out)
			}
			if cg := hostCgroup(host.Process.Pid); alive(host.Process.Pid) && cg != strings.TrimPrefix(hostCg, root) {
				t.Errorf("the host process was moved to cgroup %q", cg)
			}
			// Leaving its own cgroup, then a snapshot must still pause it: it
			// is in its session's cgroup, the one the snapshot freezes.
			escape := "for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do echo $$ > $r/cgroup.procs; done 2>/dev/null; touch escaped-tried; i=0; while :; do i=$((i+1)); echo $i > counter; done"
			args := append(append([]string{"exec", "w", "--detach"}, l.flags()...), "--", "sh", "-c", escape)
			id := strings.TrimSpace(s.ok(args...))
			defer s.run("kill", "w", id, "--signal", "KILL")
			pid := sessionPid("w", id)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, _, code := s.run("exec", "w", "--isolation", "tree", "--", "test", "-e", "escaped-tried"); code == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the escaping session did not get past its escape attempt in 30 s")
				}
			}
			// The session's cgroup is strata/<world>@<id>/<session id>.
			if cg := hostCgroup(pid); !strings.Contains(cg, "/strata/w@") || !strings.HasSuffix(cg, "/"+id) {
				t.Errorf("the command left its session cgroup: now in %q, want strata/w@.../%s: a snapshot would not pause it", cg, id)
			}
			s.ok("snap", "w", "-m", "while escaping")
		})
	}
}

// Row 15: host processes are invisible and cannot be signalled.
func TestSecHostProcesses(t *testing.T) {
	t.Parallel()
	s := newSecEnv(t, "")
	s.ok("new", "w")
	host := exec.Command("sleep", "6071")
	must(t, host.Start())
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	pid := host.Process.Pid
	for _, l := range []level{lvTree, lvDefault, lvSandbox, lvStrict} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			out, _ := s.sh("w", l, nil, fmt.Sprintf("cat /proc/%d/cmdline; grep -l 6071 /proc/[0-9]*/cmdline; kill -9 %d; %s ptrace %d", pid, pid, s.probe, pid))
			if strings.Contains(out, "6071") {
				t.Errorf("the host sleep 6071 (pid %d) is visible in /proc: %q", pid, out)
			}
			if strings.Contains(out, "ptrace attach: ok") {
				t.Errorf("ptrace of the host pid %d succeeded", pid)
			}
			if syscall.Kill(pid, 0) != nil {
				t.Fatalf("kill -9 %d inside the World killed the host process", pid)
			}
		})
	}
}

// listIfaces prints the interfaces of the command's network namespace
// (/sys/class/net is the host's sysfs; /proc/net is per namespace).
const listIfaces = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"

// Rows 10, 11, 12: network per mode. A host server on 127.0.0.x is outside
// the World (its network namespace has a loopback of its own).
func TestSecNetwork(t *testing.T) {
	t.Parallel()
	allowed, allowedHits := countingHTTP(t, "127.0.0.2", "allowed-ok")
	denied, deniedHits := countingHTTP(t, "127.0.0.4", "denied-reached")
	allowedHost, _, _ := strings.Cut(allowed, ":")
	s := newSecEnv(t, fmt.Sprintf("[boundary]\nallow = [%q]\n", allowedHost))
	// A config with [boundary] is refused by today's strata: keep it for the
	// wired subtests only and run today's checks without it.
	cfgPath := filepath.Join(filepath.Dir(s.home), "config.toml")
	cfg, err := os.ReadFile(cfgPath)
	must(t, err)
	must(t, os.Remove(cfgPath))
	s.ok("new", "w")
	direct := func(s *secEnv, l level, extra ...string) (string, int) {
		return s.sh("w", l, extra, s.probe+" dial-tcp "+allowed)
	}
	t.Run("tree-host", func(t *testing.T) {
		s := s.with(t)
		// What tree still allows: the host's network.
		if out, code := direct(s, lvTree); code != 0 {
			t.Fatalf("tree: direct TCP to %s: exit %d: %s", allowed, code, out)
		}
	})
	t.Run("no-network-today", func(t *testing.T) {
		s := s.with(t)
		// Row 10 for today's flag: loopback only.
		out, code := s.sh("w", lvTree, []string{"--no-network"}, listIfaces)
		if code != 0 || strings.TrimSpace(out) != "lo" {
			t.Errorf("--no-network: interfaces %q (exit %d), want only lo", out, code)
		}
		if out, code := direct(s, lvTree, "--no-network"); code == 0 {
			t.Errorf("--no-network: direct TCP to %s reached it: %s", allowed, out)
		}
	})
	t.Run("explicit-modes", func(t *testing.T) {
		// Rows 10, 11, 12 with --network named, at the levels that exist
		// before the sandbox level is wired: the modes are the network's,
		// whatever the level.
		s := s.with(t)
		must(t, os.WriteFile(cfgPath, cfg, 0o644))
		defer os.Remove(cfgPath)
		for _, l := range []level{lvTree, lvStrict} {
			if out, code := s.sh("w", l, []string{"--network", "none"}, listIfaces); code != 0 || strings.TrimSpace(out) != "lo" {
				t.Errorf("%s --network none: interfaces %q (exit %d), want only lo", l, out, code)
			}
			if out, code := direct(s, l, "--network", "none"); code == 0 {
				t.Errorf("%s --network none: direct TCP to %s reached it: %s", l, allowed, out)
			}
			if out, code := s.sh("w", l, []string{"--network", "proxy"}, listIfaces); code != 0 || strings.TrimSpace(out) != "lo" {
				t.Errorf("%s --network proxy: interfaces %q (exit %d), want only lo", l, out, code)
			}
			if out, code := direct(s, l, "--network", "proxy"); code == 0 {
				t.Errorf("%s --network proxy: direct TCP to %s reached it: %s", l, allowed, out)
			}
			before := allowedHits.Load()
			out, code := s.sh("w", l, []string{"--network", "proxy"}, s.probe+" http-proxy http://"+allowed+"/")
			if code != 0 || !strings.Contains(out, "status 200") || !strings.Contains(out, "allowed-ok") || allowedHits.Load() == before {
				t.Errorf("%s --network proxy: GET the allowed %s: exit %d: %s", l, allowed, code, out)
			}
			out, _ = s.sh("w", l, []string{"--network", "proxy"}, s.probe+" http-proxy http://"+denied+"/")
			if !strings.Contains(out, "status 403") || !strings.Contains(out, "not on the allow-list") || !strings.Contains(out, "boundary.worlds.w.allow") || deniedHits.Load() != 0 {
				t.Errorf("%s --network proxy: GET the denied %s: %q (hit %d times): want a 403 naming the policy", l, denied, out, deniedHits.Load())
			}
			if out, code := direct(s, l, "--network", "host"); code != 0 {
				t.Errorf("%s --network host: direct TCP to %s: exit %d: %s", l, allowed, code, out)
			}
		}
		if out, code := s.sh("w", lvStrict, nil, listIfaces); strings.TrimSpace(out) != "lo" {
			t.Errorf("strict: interfaces %q (exit %d), want only lo (strict's default is none)", out, code)
		}
		// new --network: the World's own mode.
		s.ok("new", "w-none", "--network", "none")
		if out, code := s.sh("w-none", lvTree, nil, listIfaces); code != 0 || strings.TrimSpace(out) != "lo" {
			t.Errorf("new --network none, tree: interfaces %q (exit %d), want only lo", out, code)
		}
		deniedHost, _, _ := strings.Cut(denied, ":")
		events := s.ok("events", "--json", "--world", "w")
		if n := strings.Count(events, `"type":"egress.denied"`); n < 1 || !strings.Contains(events, `"host":"`+deniedHost+`"`) || !strings.Contains(events, `"allow_key":"boundary.worlds.w.allow"`) {
			t.Errorf("strata events: %d egress.denied events, want one naming %s and the allow key:\n%s", n, deniedHost, events)
		}
		out := s.ok("allow", "w", deniedHost)
		if !strings.Contains(out, "allowed "+deniedHost) {
			t.Errorf("strata allow: %q", out)
		}
		out, code := s.sh("w", lvTree, []string{"--network", "proxy"}, s.probe+" http-proxy http://"+denied+"/")
		if code != 0 || !strings.Contains(out, "status 200") || deniedHits.Load() != 1 {
			t.Errorf("after strata allow: GET %s: exit %d: %s (hit %d times)", denied, code, out, deniedHits.Load())
		}
		if _, errs, code := s.run("allow", "w", "http://example.com/"); code != 2 || !strings.Contains(errs, "not a URL") {
			t.Errorf("strata allow with a URL: exit %d: %s", code, errs)
		}
	})
	t.Run("wired", func(t *testing.T) {
		s := s.with(t)
		must(t, os.WriteFile(cfgPath, cfg, 0o644))
		// A World of its own: explicit-modes allowed the denied host on w.
		s.ok("new", "ww")
		deniedBefore := deniedHits.Load()
		for _, l := range []level{lvDefault, lvSandbox} {
			// none: loopback only.
			if out, code := s.sh("ww", l, []string{"--network", "none"}, listIfaces); code != 0 || strings.TrimSpace(out) != "lo" {
				t.Errorf("%s --network none: interfaces %q (exit %d), want only lo", l, out, code)
			}
			if out, code := direct(s, l, "--network", "none"); code == 0 {
				t.Errorf("%s --network none: direct TCP to %s reached it: %s", l, allowed, out)
			}
			// proxy (the default): the allowed host through $HTTP_PROXY.
			before := allowedHits.Load()
			out, code := s.sh("ww", l, nil, s.probe+" http-proxy http://"+allowed+"/")
			if code != 0 || !strings.Contains(out, "status 200") || !strings.Contains(out, "allowed-ok") || allowedHits.Load() == before {
				t.Errorf("%s proxy: GET the allowed %s through $HTTP_PROXY: exit %d: %s", l, allowed, code, out)
			}
			// The denied host: a 403 naming the policy, and it receives nothing.
			out, _ = s.sh("ww", l, nil, s.probe+" http-proxy http://"+denied+"/")
			if !strings.Contains(out, "status 403") || !strings.Contains(out, "not on the allow-list") || !strings.Contains(out, "boundary.") || deniedHits.Load() != deniedBefore {
				t.Errorf("%s proxy: GET the denied %s: %q (denied server hit %d times): want a 403 naming the policy", l, denied, out, deniedHits.Load())
			}
			// The denial is an event the person sees (once per host per proxy).
			if ev := s.ok("events", "--json", "--world", "ww"); !strings.Contains(ev, `"type":"egress.denied"`) || !strings.Contains(ev, `"host":"127.0.0.4"`) {
				t.Errorf("%s proxy: no egress.denied event for 127.0.0.4 in strata events:\n%s", l, ev)
			}
			// Direct TCP to a non-loopback (outside) address fails.
			if out, code := direct(s, l); code == 0 {
				t.Errorf("%s proxy: direct TCP to %s reached it: %s", l, allowed, out)
			}
			// host: today's behaviour, explicit.
			if out, code := direct(s, l, "--network", "host"); code != 0 {
				t.Errorf("%s --network host: direct TCP to %s: exit %d: %s", l, allowed, code, out)
			}
		}
		// strict: no network by default.
		if out, code := s.sh("w", lvStrict, nil, listIfaces); strings.TrimSpace(out) != "lo" {
			t.Errorf("strict: interfaces %q (exit %d), want only lo", out, code)
		}
	})
}

// Rows 1, 4, 17: /proc and mount tricks.
func TestSecProcAndMountTricks(t *testing.T) {
	t.Parallel()
	s := newSecEnv(t, "")
	s.ok("new", "secw")
	src := s.source
	attacks := map[string]string{
		"mount":             "mount -t tmpfs x /mnt",
		"umount-source":     "umount -l " + src + " && echo evil > " + src + "/a.txt",
		"remount-source-rw": "mount -o remount,rw " + src + " && echo evil > " + src + "/a.txt && cat /proc/self/mountinfo | grep -q lowerdir=" + src,
		"proc1-root":        "echo evil > /proc/1/root" + src + "/a.txt; cat /proc/1/root" + s.home + "/worlds/secw/world.toml",
		"unshare-remount":   "unshare -m sh -c 'umount -l " + src + "; echo evil > " + src + "/a.txt'",
		"userns-remount":    "unshare -Urm sh -c 'umount -l " + src + " 2>/dev/null; umount -l " + s.home + " 2>/dev/null; echo evil > " + src + "/a.txt; ls " + s.home + "/worlds'",
		"mknod":             "mknod /tmp/strata-sec-null c 1 3",
		"module":            s.probe + " finit-module /dev/null",
		"state-upperdir":    "up=$(grep -o 'upperdir=" + s.home + "[^,]*' /proc/self/mountinfo | head -1 | cut -d= -f2); [ -n \"$up\" ] || { echo upperdir not shown; exit 5; }; echo up=$up; ls -a \"$up\" && echo evil > \"$up\"/planted",
	}
	wt, err := os.ReadFile(filepath.Join(s.home, "worlds", "secw", "world.toml"))
	must(t, err)
	worldToml := strings.TrimSpace(strings.SplitN(string(wt), "\n", 2)[0])
	if len(worldToml) < 8 {
		t.Fatalf("world.toml's first line %q is too short to recognise", worldToml)
	}
	for _, l := range []level{lvTree, lvDefault, lvSandbox, lvStrict} {
		t.Run(string(l), func(t *testing.T) {
			s := s.with(t)
			for name, script := range attacks {
				out, code := s.sh("secw", l, nil, script)
				if got := s.readSource("a.txt"); got != "hello\n" {
					t.Fatalf("%s: the real source changed: %q (%s)", name, got, out)
				}
				switch name {
				case "mount", "mknod", "module":
					if code == 0 {
						t.Errorf("%s: succeeded inside the World: %s", name, out)
					}
				case "proc1-root", "userns-remount":
					if strings.Contains(out, worldToml) || strings.Contains("\n"+out, "\nsecw\n") {
						t.Errorf("%s: strata's state is readable: %q", name, out)
					}
				case "state-upperdir":
					if code == 0 {
						t.Errorf("%s: the World's upper dir (strata's state) is readable and writable: %s", name, out)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(s.home, "worlds", "secw", "upper", "planted")); err == nil {
				t.Errorf("a write through the upper dir named in /proc/self/mountinfo reached strata's state")
			}
		})
	}
}

// Row 13: a shared cache declared in config is written in place by every
// World: two Worlds see each other's files.
func TestSecSharedCache(t *testing.T) {
	t.Parallel()
	s := newSecEnv(t, "")
	cache := filepath.Join(s.hostDir, "cache")
	must(t, os.Mkdir(cache, 0o755))
	must(t, os.WriteFile(filepath.Join(filepath.Dir(s.home), "config.toml"), []byte(fmt.Sprintf("[boundary]\nshared_caches = [%q]\n", cache)), 0o644))
	s.ok("new", "a")
	s.ok("new", "b")
	if out, code := s.sh("a", lvDefault, nil, "echo from-a > "+cache+"/a.o"); code != 0 {
		t.Fatalf("World a writes the shared cache: exit %d: %s", code, out)
	}
	if out, code := s.sh("b", lvDefault, nil, "cat "+cache+"/a.o && echo from-b > "+cache+"/b.o"); code != 0 || !strings.Contains(out, "from-a") {
		t.Fatalf("World b reads a's cache entry and writes its own: exit %d: %s", code, out)
	}
	if out, code := s.sh("a", lvDefault, nil, "cat "+cache+"/b.o"); code != 0 || out != "from-b\n" {
		t.Fatalf("World a reads b's cache entry: exit %d: %q", code, out)
	}
	if got, _ := os.ReadFile(filepath.Join(cache, "b.o")); string(got) != "from-b\n" {
		t.Fatalf("the shared cache on the host: b.o = %q", got)
	}
	// Writing outside the declared cache is still refused.
	if out, code := s.sh("a", lvDefault, nil, "echo evil > "+s.hostDir+"/next-to-cache"); code == 0 {
		t.Fatalf("a write next to the shared cache succeeded: %s", out)
	}
}

// Agents and toolchains still work in the default level (issue 14, Proof):
// go build, git on the source, a PTY shell, npm install through the proxy.
func TestSecToolchains(t *testing.T) {
	t.Parallel()
	// The first World's go build compiles the standard library into its
	// private /tmp; the second World starts from a copy of that cache (its
	// own /tmp again), so one cold build of the standard library, not two,
	// is paid for; each World still builds, links and runs the program.
	warm := filepath.Join(t.TempDir(), "gocache")
	for _, l := range []level{lvDefault, lvSandbox} {
		t.Run(string(l), func(t *testing.T) {
			s := newSecEnv(t, "")
			must(t, os.WriteFile(filepath.Join(s.source, "go.mod"), []byte("module tiny\n\ngo 1.22\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(s.source, "main.go"), []byte("package main\n\nfunc main() { println(\"tiny-built\") }\n"), 0o644))
			gitc := func(args ...string) {
				c := exec.Command("git", append([]string{"-C", s.source, "-c", "user.email=t@e", "-c", "user.name=t"}, args...)...)
				if out, err := c.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v: %s", args, err, out)
				}
			}
			gitc("init", "-q")
			gitc("add", ".")
			gitc("commit", "-qm", "init")
			s.ok(append([]string{"new", "w"}, l.flags()...)...)
			goBin, err := exec.LookPath("go")
			must(t, err)
			seed, keep := "", " && cp -a /tmp/gocache .gocache-out"
			if _, err := os.Stat(warm); err == nil {
				if out, err := exec.Command("cp", "-a", warm, filepath.Join(s.source, ".gocache-seed")).CombinedOutput(); err != nil {
					t.Fatalf("seed the go cache: %v: %s", err, out)
				}
				seed, keep = "cp -a .gocache-seed /tmp/gocache && ", ""
			}
			out, code := s.sh("w", l, nil, seed+"export GOFLAGS=-mod=mod GOPROXY=off GOCACHE=/tmp/gocache GOPATH=/tmp/gopath; "+goBin+" build -o /tmp/tiny . && /tmp/tiny"+keep)
			if code != 0 || !strings.Contains(out, "tiny-built") {
				t.Errorf("go build in the World: exit %d: %s", code, out)
			}
			if keep != "" && code == 0 {
				if out, err := exec.Command("cp", "-a", filepath.Join(s.home, "worlds", "w", "upper", ".gocache-out"), warm).CombinedOutput(); err != nil {
					t.Fatalf("keep the go cache: %v: %s", err, out)
				}
			}
			out, code = s.sh("w", l, nil, "git config --global --add safe.directory '*' 2>/dev/null; echo more >> a.txt && git status --porcelain && git -c user.email=w@e -c user.name=w commit -qam inside && git log --oneline | wc -l")
			if code != 0 || !strings.Contains(out, "M a.txt") || !strings.HasSuffix(strings.TrimSpace(out), "2") {
				t.Errorf("git status/commit on the source inside the World: exit %d: %s", code, out)
			}
			if got := s.readSource("a.txt"); got != "hello\n" {
				t.Errorf("git commit inside the World changed the real source: %q", got)
			}
			// The sleep: a command that ends before `exec --tty` attaches
			// takes attach.sock with it ("dial unix .../attach.sock: no such
			// file or directory", about 1 run in 4 here): a bug of exec --tty
			// outside this suite, reported to the lead.
			if out := s.onTerminalStdin(append(append([]string{"exec", "w"}, l.flags()...), "--tty", "--", "sh", "-c", "sleep 1; tty && test -t 0 && echo pty-ok")...); !strings.Contains(out, "pty-ok") || !strings.Contains(out, "/dev/pts/") {
				t.Errorf("exec --tty: %q: want a PTY", out)
			}
		})
	}
	t.Run("npm-through-proxy", func(t *testing.T) {
		npmThroughProxy(t)
	})
}

// npmThroughProxy runs npm install in the default level against a registry
// stub on 127.0.0.3 (allowed in config), reached only through the proxy.
func npmThroughProxy(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed")
	}
	tgz, err := os.ReadFile(filepath.Join("testdata", "security", "npm", "tiny-pkg-1.0.0.tgz"))
	must(t, err)
	var base string
	addr, hits := serveHTTP(t, "127.0.0.3", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, ".tgz"):
			w.Write(tgz)
		case strings.Contains(r.URL.Path, "tiny-pkg"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"tiny-pkg","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"tiny-pkg","version":"1.0.0","dist":{"tarball":"%s/tiny-pkg/-/tiny-pkg-1.0.0.tgz"}}}}`, base)
		default:
			http.NotFound(w, r)
		}
	}))
	base = "http://" + addr
	host, _, _ := strings.Cut(addr, ":")
	s := newSecEnv(t, fmt.Sprintf("[boundary]\nallow = [%q]\n", host))
	must(t, os.WriteFile(filepath.Join(s.source, "package.json"), []byte(`{"name":"app","version":"0.0.0","dependencies":{"tiny-pkg":"1.0.0"}}`), 0o644))
	s.ok("new", "w")
	out, code := s.sh("w", lvDefault, nil, npm+" install --no-audit --no-fund --registry "+base+"/ --cache /tmp/npm-cache && cat node_modules/tiny-pkg/index.js")
	if code != 0 || !strings.Contains(out, "tiny-pkg-installed") || hits.Load() == 0 {
		t.Fatalf("npm install through the proxy: exit %d (registry hits %d): %s", code, hits.Load(), out)
	}
	if _, err := os.Stat(filepath.Join(s.source, "node_modules")); err == nil {
		t.Fatalf("npm install wrote the real source")
	}
}

// Rows 2, 5, 6, 7 rootless: the same attacks as an unprivileged caller (the
// command is root of its user namespace only).
func TestSecRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	if err := exec.Command("unshare", "-U", "true").Run(); err != nil {
		t.Skip("user namespaces are not available here:", err)
	}
	const uid, gid = 65534, 65534 // nobody
	// Outside /tmp: the sandbox's /tmp is private, and this is the host.
	base, err := os.MkdirTemp("/var/lib", "strata-sec-rootless-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	bin := filepath.Join(base, "strata")
	data, err := os.ReadFile(strataBin)
	must(t, err)
	must(t, os.WriteFile(bin, data, 0o755))
	work := filepath.Join(base, "work")
	src := filepath.Join(work, "src")
	outside := filepath.Join(work, "outside.txt")
	for p, c := range map[string]string{
		"src/a.txt": "hello\n", "outside.txt": "host\n",
		".ssh/id_ed25519": sshSecret + "\n", "fd-dir/host-listing-marker": "",
	} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(work, p), []byte(c), 0o600))
	}
	must(t, filepath.Walk(work, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Chown(p, uid, gid)
		}
		return err
	}))
	run := func(t *testing.T, extra []*os.File, args ...string) (string, int) {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Dir = src
		c.Env = []string{
			"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + work, "STRATA_HOME=" + filepath.Join(work, "home"),
			"STRATA_CONFIG=" + filepath.Join(work, "none.toml"), "XDG_STATE_HOME=" + filepath.Join(work, "state"),
			"FOO_TOKEN=secret-foo-token",
		}
		c.ExtraFiles = extra
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		refusedByStrata(t, args, stderr.String())
		return stdout.String() + stderr.String(), code
	}
	if out, code := run(t, nil, "new", "u"); code != 0 {
		t.Fatalf("as nobody: strata new: exit %d: %s", code, out)
	}
	t.Run("strict-host-read-only", func(t *testing.T) {
		// Passes today: strict's read-only host, rootless.
		out, code := run(t, nil, "exec", "u", "--isolation", "strict", "--", "sh", "-c", "echo evil > "+outside)
		if code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("rootless strict: write %s: exit %d, %q: want EROFS", outside, code, out)
		}
		if got, _ := os.ReadFile(outside); string(got) != "host\n" {
			t.Errorf("rootless strict: the host file changed: %q", got)
		}
	})
	for _, l := range []level{lvDefault, lvSandbox, lvStrict} {
		t.Run(string(l), func(t *testing.T) {
			d, err := os.Open(filepath.Join(work, "fd-dir"))
			must(t, err)
			defer d.Close()
			args := append(append([]string{"exec", "u"}, l.flags()...), "--", "sh", "-c",
				"ls /proc/self/fd/7/; cat ~/.ssh/id_ed25519; env; echo evil > "+outside)
			out, _ := run(t, []*os.File{nil, nil, nil, nil, d}, args...)
			if strings.Contains(out, "host-listing-marker") {
				t.Errorf("rootless: read /proc/self/fd/7: host dir listing visible: %q", out)
			}
			if strings.Contains(out, sshSecret) {
				t.Errorf("rootless: read ~/.ssh/id_ed25519: the planted key is readable: %q", out)
			}
			if strings.Contains(out, "FOO_TOKEN=") {
				t.Errorf("rootless: the command's environment has FOO_TOKEN (not named): %q", out)
			}
			if got, _ := os.ReadFile(outside); string(got) != "host\n" {
				t.Errorf("rootless: the host file outside the source changed: %q", got)
				must(t, os.WriteFile(outside, []byte("host\n"), 0o600))
			}
		})
	}
}
