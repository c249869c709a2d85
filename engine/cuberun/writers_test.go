package cuberun

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The writers scan runs in the sandbox once per apply attempt, under a 30 s
// budget, and sees every process there. It must not start a program per fd
// (it forked readlink, sed and cut for each fd open for writing: over a
// minute on a machine with a few thousand fds, so apply could only refuse):
// here it runs with only grep and ls on PATH and must still name the
// process that holds a file open for writing, by its group, and leave out
// one held read-only. A command name with ") " in it must not shift the
// fields it reads the group from.
func TestWriterScriptNeedsOnlyGrepAndLs(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"grep", "ls"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	wpath, rpath := filepath.Join(dir, "written.txt"), filepath.Join(dir, "read.txt")
	wf, err := os.OpenFile(wpath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	if err := os.WriteFile(rpath, []byte("r"), 0o644); err != nil {
		t.Fatal(err)
	}
	rf, err := os.Open(rpath)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	// A copy of sleep named "odd) x y" leads its own process group.
	odd := filepath.Join(dir, "odd) x y")
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	if err := os.Symlink(sleepPath, odd); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(odd, "30")
	holder.ExtraFiles = []*os.File{wf, rf}
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	pid := strconv.Itoa(holder.Process.Pid)

	cmd := exec.Command(sh, "-c", cubeWriterScript, "strata")
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	var found bool
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 || f[1] != pid {
			continue
		}
		switch f[2] {
		case wpath:
			found = true
			if f[0] != pid {
				t.Errorf("group of the writer read as %q, want %s (its own group): %q", f[0], pid, line)
			}
		case rpath:
			t.Errorf("a file held read-only is listed as written: %q", line)
		}
	}
	if !found {
		t.Fatalf("the scan did not list %s held for writing by pid %s; it said:\n%s", wpath, pid, out)
	}
}
