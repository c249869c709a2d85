package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2ERootlessFullFlow runs the whole flow as an unprivileged user (the
// SSH user on a mini PC): kernel overlay inside a user namespace, or
// fuse-overlayfs where /dev/fuse is open to the user.
func TestE2ERootlessFullFlow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	if err := exec.Command("unshare", "-U", "true").Run(); err != nil {
		t.Skip("user namespaces are not available here:", err)
	}
	const uid, gid = 65534, 65534 // nobody
	base, err := os.MkdirTemp("", "strata-rootless-e2e-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	bin := filepath.Join(base, "strata")
	data, err := os.ReadFile(strataBin)
	must(t, err)
	must(t, os.WriteFile(bin, data, 0o755))
	work := filepath.Join(base, "work")
	must(t, os.Mkdir(work, 0o755))
	must(t, os.Chown(work, uid, gid))
	src := filepath.Join(work, "src")
	run := func(args ...string) (string, int) {
		c := exec.Command(bin, args...)
		c.Dir = src
		c.Env = []string{
			"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + work, "STRATA_HOME=" + filepath.Join(work, "home"),
			"STRATA_CONFIG=" + filepath.Join(work, "none.toml"), "XDG_STATE_HOME=" + filepath.Join(work, "state"),
		}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), code
	}
	ok := func(args ...string) string {
		t.Helper()
		out, code := run(args...)
		if code != 0 {
			t.Fatalf("as nobody: strata %s: exit %d: %s", strings.Join(args, " "), code, out)
		}
		return out
	}
	for p, c := range map[string]string{"a.txt": "hello\n", "d/x.txt": "x\n"} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(src, p), []byte(c), 0o644))
	}
	must(t, filepath.Walk(src, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Chown(p, uid, gid)
		}
		return err
	}))
	ok("new", "u")
	if out := ok("exec", "u", "--", "sh", "-c", "cat a.txt && echo more >> a.txt && echo new > b.txt && rm -r d && id -u"); out != "hello\n0\n" {
		t.Fatalf("session output %q (the command runs as root of its user namespace)", out)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "a.txt")); string(got) != "hello\n" {
		t.Fatalf("the source changed: %q", got)
	}
	st := ok("status", "u")
	for _, want := range []string{"M  a.txt", "A  b.txt", "D  d/x.txt"} {
		if !strings.Contains(st, want) {
			t.Fatalf("status lacks %q:\n%s", want, st)
		}
	}
	ok("snap", "u", "-m", "before damage")
	ok("exec", "u", "--", "sh", "-c", "echo damage > a.txt")
	ok("rollback", "u", "head")
	if out := ok("exec", "u", "--", "cat", "a.txt"); out != "hello\nmore\n" {
		t.Fatalf("after rollback: %q", out)
	}
	// The session mounts its own overlay here: a file it holds open for
	// writing is still found, and apply refuses it.
	id := strings.TrimSpace(ok("exec", "u", "--detach", "--", "sh", "-c", "exec 3>>held.txt; echo partial >&3; touch ready; exec sleep 60"))
	for i := 0; ; i++ {
		if _, code := run("exec", "u", "--", "test", "-e", "ready"); code == 0 {
			break
		}
		if i == 200 {
			t.Fatal("the detached session never got ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, code := run("apply", "u", "held.txt"); code == 0 || !strings.Contains(out, "session "+id+" is still writing held.txt") {
		t.Fatalf("apply of a file a rootless session holds open for writing: exit %d: %s", code, out)
	}
	ok("kill", "u", id, "--signal", "KILL")
	ok("logs", "u", id, "-f")
	ok("apply", "u")
	if got, _ := os.ReadFile(filepath.Join(src, "b.txt")); string(got) != "new\n" {
		t.Fatalf("apply as nobody: b.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(src, "d")); err == nil {
		t.Fatal("apply as nobody did not delete d/")
	}
	ok("rm", "u")
}
