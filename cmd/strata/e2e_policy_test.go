package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runAt runs strata with e's environment in dir.
func (e *env) runAt(dir string, args ...string) (string, string, int) {
	e.t.Helper()
	c := e.cmd(args...)
	c.Dir = dir
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatalf("strata %v: %v", args, err)
	}
	return out.String(), errb.String(), c.ProcessState.ExitCode()
}

func (e *env) okAt(dir string, args ...string) string {
	e.t.Helper()
	out, errs, code := e.runAt(dir, args...)
	if code != 0 {
		e.t.Fatalf("strata %s (in %s): exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), dir, code, out, errs)
	}
	return out
}

// Path arguments and the working directory follow the caller, as git's
// do: in a subdirectory of the source, x.go is that directory's x.go (not
// the root's, which apply would otherwise publish instead); .. climbs
// inside the tree and never out of it; from outside the source, paths
// name from its root. exec runs where the caller stands.
func TestE2EPathsFollowTheCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sub := filepath.Join(e.source, "src")
	must(t, os.MkdirAll(sub, 0o755))
	writeTestFile(t, filepath.Join(sub, "x.go"), "one\n")
	writeTestFile(t, filepath.Join(e.source, "x.go"), "root\n")
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo two >> src/x.go && echo top > x.go")

	if out := e.okAt(sub, "diff", "w", "x.go"); !strings.Contains(out, "+++ b/src/x.go") || strings.Contains(out, "b/x.go") {
		t.Fatalf("diff w x.go in src/ is not src/x.go alone:\n%s", out)
	}
	if out := e.okAt(sub, "blame", "w", "x.go"); !strings.Contains(out, "echo two") {
		t.Errorf("blame w x.go in src/:\n%s", out)
	}
	e.okAt(sub, "apply", "w", "x.go")
	if got, root := e.readSource("src/x.go"), e.readSource("x.go"); got != "one\ntwo\n" || root != "root\n" {
		t.Fatalf("apply w x.go in src/: src/x.go %q, x.go %q (want only src/x.go published)", got, root)
	}
	// Out of the tree: refused before anything, however it is spelled.
	outside := filepath.Join(filepath.Dir(e.source), "victim")
	writeTestFile(t, outside, "keep\n")
	for _, p := range []string{"../../victim", outside, "../.."} {
		if _, errs, code := e.runAt(sub, "apply", "w", p); code != 2 || !strings.Contains(errs, "outside the source") {
			t.Errorf("apply w %s in src/: exit %d, %q", p, code, errs)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep\n" {
		t.Fatalf("a path outside the source was written: %q", b)
	}
	e.okAt(sub, "apply", "w", "../x.go")
	if got := e.readSource("x.go"); got != "top\n" {
		t.Fatalf("apply w ../x.go in src/: x.go %q", got)
	}
	// From outside the source a relative path names from the root.
	elsewhere := t.TempDir()
	e.ok("exec", "w", "--", "sh", "-c", "echo three >> src/x.go")
	if out := e.okAt(elsewhere, "diff", "w", "src/x.go"); !strings.Contains(out, "+three") {
		t.Fatalf("diff w src/x.go from elsewhere:\n%s", out)
	}

	for _, tc := range []struct{ dir, cwd, want string }{
		{sub, "", sub},
		{elsewhere, "", e.source},
		{sub, "..", e.source},
		{elsewhere, "src", sub},
	} {
		args := []string{"exec", "w"}
		if tc.cwd != "" {
			args = append(args, "--cwd", tc.cwd)
		}
		if got := strings.TrimSpace(e.okAt(tc.dir, append(args, "--", "pwd")...)); got != tc.want {
			t.Errorf("exec --cwd %q from %s ran in %s, want %s", tc.cwd, tc.dir, got, tc.want)
		}
	}
	if _, errs, code := e.runAt(sub, "exec", "w", "--cwd", "../..", "--", "pwd"); code != 2 || !strings.Contains(errs, "outside the source") {
		t.Errorf("exec --cwd ../..: exit %d, %q", code, errs)
	}
}

// Sizes for a World that has no sandbox are refused before it exists.
func TestE2ENewSizesNeedACubeWorld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fails(2, "size a cube sandbox", "new", "w", "--cpu", "1000")
	e.fails(2, "cpu, memory and disk are sizes", "new", "w", "--backend", "cube", "--memory", "-5")
	if _, err := os.Stat(filepath.Join(e.home, "worlds", "w")); err == nil {
		t.Fatal("a refused new created the World")
	}
}
