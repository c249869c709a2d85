package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// argsEnv is a World "w" whose two changed files are named "-y" (a flag of
// nothing, a file name after --) and "x", plus a snapshot taken between two
// rounds of edits: -y and x hold "y1"/"x1" in the snapshot, "y2"/"x2" now.
func argsEnv(t *testing.T) (e *env, snap string) {
	t.Helper()
	e = newEnv(t)
	must(t, os.WriteFile(filepath.Join(e.source, "-y"), []byte("y0\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(e.source, "x"), []byte("x0\n"), 0o644))
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo y1 > ./-y; echo x1 > x")
	var s struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal([]byte(e.ok("snap", "w", "--json")), &s))
	e.ok("exec", "w", "--", "sh", "-c", "echo y2 > ./-y; echo x2 > x")
	return e, s.ID
}

// Every argument after "--" is an operand, for every command: a path named
// like a flag is a path, and no operand is ever dropped. Before, "apply W --
// -y" published every changed path of the World and "diff W -- x" printed
// them all.
func TestE2EDoubleDashOperands(t *testing.T) {
	t.Parallel()
	e, snap := argsEnv(t)
	worldFile := func(rel string) string {
		t.Helper()
		return e.ok("exec", "w", "--", "cat", "./"+rel)
	}

	// Read-only commands first, in order; each row is one command line.
	for _, tc := range []struct {
		args       []string
		has, hasnt []string
	}{
		{[]string{"diff", "w", "--", "x"}, []string{"+++ b/x", "+x2"}, []string{"b/-y", "y2"}},
		{[]string{"status", "w", "--", "-y"}, []string{"  -y\n"}, []string{"  x\n"}},
		{[]string{"diff", "w", "--", "-y"}, []string{"+++ b/-y", "+y2"}, []string{"b/x", "x2"}},
		{[]string{"diff", "w", "--stat", "--", "-y"}, []string{"-y", "1 file changed"}, []string{" x "}},
		{[]string{"diff", "w", "--json", "--", "x"}, []string{`"path": "x"`}, []string{`"path": "-y"`}},
		{[]string{"apply", "w", "--dry-run", "--", "-y"}, []string{"-y", "would apply 1 path "}, []string{" x\n"}},
		{[]string{"apply", "--dry-run", "w", "--", "x"}, []string{"x", "would apply 1 path "}, []string{"-y"}},
		{[]string{"blame", "w", "--json", "--", "-y"}, []string{`"path": "-y"`}, nil},
		{[]string{"top", "--json", "--", "w"}, []string{`"world": "w"`}, nil},
		{[]string{"snapdiff", "w", "--", snap}, []string{"content  -y", "content  x"}, nil},
		{[]string{"sessions", "--json", "--", "w"}, []string{`"world": "w"`}, nil},
	} {
		out := e.ok(tc.args...)
		for _, s := range tc.has {
			if !strings.Contains(out, s) {
				t.Errorf("strata %s: output lacks %q:\n%s", strings.Join(tc.args, " "), s, out)
			}
		}
		for _, s := range tc.hasnt {
			if strings.Contains(out, s) {
				t.Errorf("strata %s: output has %q (an operand after -- was dropped?):\n%s", strings.Join(tc.args, " "), s, out)
			}
		}
	}

	// Commands that take no path refuse one after -- (exit 2) instead of
	// ignoring it and acting on everything.
	for _, args := range [][]string{
		{"snap", "w", "--", "-m"},
		{"history", "--", "w"},
		{"gc", "--", "x"},
		{"trash", "--", "x"},
		{"doctor", "--", "x"},
		{"ls", "--", "x"},
		{"show", "w", "--", "x"},
		{"timeline", "w", "--", "x"},
		{"events", "--", "x"},
	} {
		e.fails(2, "unexpected argument", args...)
	}

	// restore brings back only the path named after --.
	e.ok("restore", "w", snap, "--", "-y")
	if got := worldFile("-y"); got != "y1\n" {
		t.Errorf("restore w %s -- -y: -y = %q, want the snapshot's y1", snap, got)
	}
	if got := worldFile("x"); got != "x2\n" {
		t.Errorf("restore w %s -- -y also restored x: %q", snap, got)
	}

	// apply publishes only the path named after --.
	out := e.ok("apply", "w", "--", "-y")
	if !strings.Contains(out, "applied 1 path ") {
		t.Errorf("apply w -- -y: %s", out)
	}
	if got := e.readSource("-y"); got != "y1\n" {
		t.Errorf("source -y = %q, want the World's y1", got)
	}
	if got := e.readSource("x"); got != "x0\n" {
		t.Fatalf("apply w -- -y also published x: source x = %q", got)
	}

	// exec and fork still take the command line after --, flags and all.
	if out := e.ok("exec", "w", "--", "sh", "-c", `echo "$0 $1"`, "-n", "--"); out != "-n --\n" {
		t.Errorf("exec w -- sh -c ... -n --: %q", out)
	}
	out, errs, code := e.run("fork", "w", "-n", "1", "--prefix", "f", "--", "sh", "-c", "cat ./-y; test $# = 0", "-x")
	if code != 0 || !strings.Contains(out, "f-1 | y1") {
		t.Errorf("fork -- CMD: exit %d\n%s\n%s", code, out, errs)
	}
}

// runLimited runs strata with its address space capped (ulimit -v, in KiB),
// so a command that tries to allocate gigabytes dies instead of swapping the
// machine, and returns what it printed, its exit status and how long it took.
func (e *env) runLimited(kib int, args ...string) (string, int, time.Duration) {
	e.t.Helper()
	c := exec.Command("sh", append([]string{"-c", `ulimit -v "$1"; shift; exec "$@"`, "sh", strconv.Itoa(kib), strataBin}, args...)...)
	c.Env = append(os.Environ(), e.vars...)
	c.Dir = e.source
	start := time.Now()
	out, err := c.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return string(out), code, time.Since(start)
}

// A hunk range far beyond any file is refused while the flags are parsed:
// exit 2, at once, in little memory, nothing published. Before, strata built
// a 2-billion-element list first and died out of memory.
func TestE2EHunkRangeRefusedAtOnce(t *testing.T) {
	t.Parallel()
	e, _ := argsEnv(t)
	before := treeHash(t, e.source)
	out, code, took := e.runLimited(4<<20, "apply", "w", "--hunks", "x=1-2000000000")
	if code != 2 || !strings.Contains(out, "hunk 2000000000") || !strings.Contains(out, "at most 1048576") || took > 5*time.Second {
		t.Fatalf("apply --hunks x=1-2000000000 under a 4 GiB limit: exit %d after %s:\n%s", code, took, out)
	}
	// Within the bound, the file's real hunk count decides, naming the
	// furthest hunk asked for.
	out, code, _ = e.runLimited(4<<20, "apply", "w", "--hunks", "x=1-50")
	if code != 1 || !strings.Contains(out, "hunk 50 out of range: the file has hunks 1..1") {
		t.Fatalf("apply --hunks x=1-50 of a 1-hunk file: exit %d:\n%s", code, out)
	}
	if after := treeHash(t, e.source); after != before {
		t.Fatal("a refused apply changed the source")
	}
}

// fork -n must name 1 to 100 Worlds; 0 or a negative number used to create one.
func TestE2EForkCountRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	for _, n := range []string{"0", "-3", "101", "x"} {
		e.fails(2, "-n", "fork", "w", "-n", n)
	}
	var ls []map[string]any
	must(t, json.Unmarshal([]byte(e.ok("ls", "--all", "--json")), &ls))
	if len(ls) != 1 {
		t.Fatalf("a refused fork created Worlds: %v", ls)
	}
	var tl struct {
		Snapshots []any `json:"snapshots"`
	}
	must(t, json.Unmarshal([]byte(e.ok("timeline", "w", "--json")), &tl))
	if len(tl.Snapshots) != 0 {
		t.Fatalf("a refused fork took a snapshot: %v", tl.Snapshots)
	}
}

// A World whose source was moved away refuses to run or publish, saying so,
// and never makes an empty directory at the old path: before, strata exec
// bound the World over a freshly made empty source and the command "worked".
func TestE2EMissingSourceRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo changed > a.txt; echo new > new.txt") // mounts the World
	moved := e.source + "-moved"
	must(t, os.Rename(e.source, moved))
	e.source = moved // run strata from a directory that exists
	src := strings.TrimSuffix(moved, "-moved")
	want := fmt.Sprintf(`world "w": its source %s no longer exists (moved or deleted?); strata ls shows Worlds whose source is missing`, src)
	for _, args := range [][]string{
		{"exec", "w", "--", "true"},
		{"exec", "--detach", "w", "--", "true"},
		{"exec", "--tty", "--detach", "w", "--", "true"},
		{"shell", "w"},
		{"apply", "w"},
		{"apply", "w", "--dry-run", "a.txt"},
	} {
		e.fails(1, want, args...)
		if _, err := os.Lstat(src); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("strata %s made %s again (%v)", strings.Join(args, " "), src, err)
		}
	}
	// Fan-out reports it per World, and still makes nothing.
	out, errs, code := e.run("exec", "--worlds", "w", "--", "true")
	if code == 0 || !strings.Contains(out+errs, "no longer exists") {
		t.Fatalf("exec --worlds w: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Lstat(src); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("exec --worlds made %s again", src)
	}
	var ls []map[string]any
	must(t, json.Unmarshal([]byte(e.ok("ls", "--all", "--json")), &ls))
	if len(ls) != 1 || ls[0]["status"] != "source missing" {
		t.Fatalf("ls --all --json: %v", ls)
	}
	// Moved back, everything works again and nothing was lost.
	must(t, os.Rename(moved, src))
	e.source = src
	if out := e.ok("exec", "w", "--", "cat", "a.txt", "new.txt"); out != "changed\nnew\n" {
		t.Fatalf("after moving the source back: %q", out)
	}
}

// A session whose runner died without recording an exit status is lost, and a
// lost session never reads as success: strata exec waiting on it exits 255
// saying so, sessions --json gives exit_code -1, and a fan-out counts it as
// failed. Before, all three reported exit 0.
func TestE2ELostSessionNeverExitsZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	initOf := func(n int) int {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var ss []struct {
				State   string `json:"state"`
				InitPID int    `json:"init_pid"`
			}
			must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
			if len(ss) == n && ss[n-1].State == "running" && ss[n-1].InitPID > 0 {
				return ss[n-1].InitPID
			}
		}
		t.Fatal("the session did not start")
		return 0
	}
	kill := func(pid int) {
		p, err := os.FindProcess(pid)
		must(t, err)
		must(t, p.Signal(syscall.SIGKILL))
	}

	c := e.cmd("exec", "w", "--", "sleep", "30")
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	must(t, c.Start())
	kill(initOf(1))
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		t.Fatal("strata exec still waits 10 s after its session's runner died")
	}
	if code := c.ProcessState.ExitCode(); code != 255 || !strings.Contains(errb.String(), "session lost") {
		t.Fatalf("strata exec on a lost session: exit %d, stderr %q", code, errb.String())
	}

	var ss []struct {
		State    string `json:"state"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
	if len(ss) != 1 || ss[0].State != "lost" || ss[0].ExitCode == 0 || !strings.Contains(ss[0].Error, "session lost") {
		t.Fatalf("sessions --json: %+v", ss)
	}
	if text := e.ok("sessions", "w"); !strings.Contains(text, "lost") || strings.Contains(text, "lost    0") {
		t.Fatalf("sessions: %s", text)
	}

	// Fan-out: the lost World counts as failed.
	fc := e.cmd("exec", "--worlds", "w", "--", "sleep", "30")
	var fout strings.Builder
	fc.Stdout, fc.Stderr = &fout, &fout
	must(t, fc.Start())
	kill(initOf(2))
	err := fc.Wait()
	if code := fc.ProcessState.ExitCode(); err == nil || code == 0 || !strings.Contains(fout.String(), "session lost") {
		t.Fatalf("exec --worlds with a lost session: exit %d\n%s", code, fout.String())
	}
}

// usageCases lists, for every command, command lines that are usage errors:
// a missing operand, an extra operand, a bad flag value. Each must exit 2
// before doing anything. A command added to the commands table needs a row
// here (TestE2EUsageErrorsExit2 fails until it has one).
var usageCases = map[string][][]string{
	"new":           {{"new"}, {"new", "a", "b"}, {"new", "a", "--backend", "nope"}, {"new", "a", "--mount-backend", "nope"}, {"new", "a", "--isolation", "nope"}, {"new", "a", "--cpu", "lots"}, {"new", "a", "--label", "novalue"}, {"new", "a", "--prompt", "x"}},
	"ls":            {{"ls", "x"}},
	"show":          {{"show"}, {"show", "w", "x"}},
	"status":        {{"status"}, {"status", "w", "--tree", "nosuch"}},
	"rm":            {{"rm"}, {"rm", "w", "x"}},
	"trash":         {{"trash", "x"}},
	"restore-world": {{"restore-world"}, {"restore-world", "w", "x"}},
	"exec":          {{"exec"}, {"exec", "w"}, {"exec", "w", "--"}, {"exec", "w", "--isolation", "nope", "--", "true"}, {"exec", "w", "--env", "NOEQUALS", "--", "true"}, {"exec", "w", "--tty", "--", "true"}, {"exec", "--worlds", "w", "--detach", "--", "true"}},
	"shell":         {{"shell"}, {"shell", "w", "x"}},
	"attach":        {{"attach"}, {"attach", "w", "s", "x"}},
	"sessions":      {{"sessions"}, {"sessions", "w", "x"}},
	"allow":         {{"allow"}, {"exec", "w", "--network", "wifi", "--", "true"}, {"new", "x", "--network", "wifi"}, {"allow", "w"}, {"allow", "w", "http://example.com/"}, {"allow", "w", "*"}},
	"logs":          {{"logs"}, {"logs", "w", "s", "x"}},
	"kill":          {{"kill"}, {"kill", "w", "s", "x"}, {"kill", "w", "s", "--signal", "NOPE"}, {"kill", "w", "--signal", "TERM"}},
	"run":           {{"run"}, {"run", "w"}, {"run", "w", "--prompt", "x"}, {"run", "w", "--agent", "a,b"}, {"run", "w", "--agent", "claude", "--prompt", "x", "--prompt-file", "f"}},
	"wait":          {{"wait"}, {"wait", "w", "x"}, {"wait", "w", "--for", "nope"}, {"wait", "w", "--timeout", "soon"}},
	"send":          {{"send"}, {"send", "w"}},
	"mute":          {{"mute"}, {"mute", "w", "x"}},
	"doctor":        {{"doctor", "x"}},
	"events":        {{"events", "x"}},
	"review":        {{"review", "w", "frob"}, {"review", "w", "add", "a.txt"}, {"review", "w", "add", "a.txt:x", "t"}, {"review", "w", "add", "a.txt:3-2", "t"}, {"review", "w", "rm"}, {"review", "w", "rm", "one"}, {"review", "w", "send", "x"}},
	"diff":          {{"diff"}, {"diff", "w", "-U", "-1"}, {"diff", "w", "--against", "nope"}},
	"apply":         {{"apply"}, {"apply", "w", "--hunks", "x"}, {"apply", "w", "--hunks", "x=0"}, {"apply", "w", "--hunks", "x=3-1"}, {"apply", "w", "--hunks", "x=1-2000000000"}},
	"history":       {{"history", "x"}},
	"snap":          {{"snap"}, {"snap", "w", "x"}},
	"timeline":      {{"timeline"}, {"timeline", "w", "x"}},
	"rollback":      {{"rollback", "w"}, {"rollback", "w", "s", "x"}},
	"fork":          {{"fork"}, {"fork", "w", "x"}, {"fork", "w", "-n", "0"}, {"fork", "w", "-n", "-3"}, {"fork", "w", "-n", "101"}, {"fork", "w", "--prompt", "x"}, {"fork", "w", "-n", "2", "--agent", "claude", "--prompt", "a", "--prompt", "b", "--prompt", "c"}},
	"restore":       {{"restore", "w", "s"}},
	"snapdiff":      {{"snapdiff", "w"}, {"snapdiff", "w", "a", "b", "c"}},
	"gc":            {{"gc", "x"}},
	"blame":         {{"blame", "w"}, {"blame", "w", "p", "q"}},
	"top":           {{"top", "--interval", "0"}, {"top", "--count", "-1"}},
	"compare":       {{"compare", "a"}},
	"up":            {{"up"}, {"up", "w", "x"}},
	"stop":          {{"stop"}, {"stop", "w", "x"}},
	"completion":    {{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}},
	"tui":           {{"tui", "x"}, {"tui", "--", "x"}},
}

// Every usage error exits 2, for every command: an unknown flag, a missing or
// extra operand, a bad value; and none of them changes anything.
func TestE2EUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo x > x")
	before := treeHash(t, e.home+"/worlds/w/upper") + treeHash(t, e.source) + e.ok("ls", "--all") + e.ok("timeline", "w")
	run := func(args ...string) {
		t.Helper()
		// Bounded: a bad value once ran forever (top --count -1).
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, strataBin, args...)
		c.Env, c.Dir = append(os.Environ(), e.vars...), e.source
		var out, errs strings.Builder
		c.Stdout, c.Stderr = &out, &errs
		_ = c.Run()
		if code := c.ProcessState.ExitCode(); code != 2 || !strings.Contains(errs.String(), "strata") {
			t.Errorf("strata %s: exit %d (want 2)\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errs.String())
		}
	}
	// The rows are gathered, then run 4 at a time: each is a strata process
	// that should refuse before touching anything.
	var rows [][]string
	check := func(args ...string) { rows = append(rows, args) }
	for _, c := range commands {
		cases, ok := usageCases[c.name]
		if !ok {
			t.Errorf("command %q has no row in usageCases: add its usage errors", c.name)
			continue
		}
		check(c.name, "--no-such-flag")
		check(c.name, "w", "--no-such-flag")
		// From the table: too few operands, and one too many (after "--"
		// too, where it must not be dropped).
		if min, _ := c.arity(); min > 0 {
			check(append([]string{c.name}, slices.Repeat([]string{"w"}, min-1)...)...)
		}
		if _, max := c.arity(); max >= 0 && !c.ownArity {
			ops := slices.Repeat([]string{"w"}, max)
			check(append(append([]string{c.name}, ops...), "extra")...)
			if c.dashArgs == "" {
				check(append(append([]string{c.name}, ops...), "--", "extra")...)
			}
		}
		for _, args := range cases {
			check(args...)
		}
	}
	check("no-such-command")
	next := make(chan []string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for args := range next {
				run(args...)
			}
		})
	}
	for _, args := range rows {
		next <- args
	}
	close(next)
	wg.Wait()
	if after := treeHash(t, e.home+"/worlds/w/upper") + treeHash(t, e.source) + e.ok("ls", "--all") + e.ok("timeline", "w"); after != before {
		t.Error("a usage error changed a World or the source")
	}
}

// mountTmpfs mounts a tmpfs of size (e.g. "1m") at dir for the test.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}

// A full file system stops apply, snap and exec with the path being written,
// whose file system it is, what to do, and what became of the work.
func TestE2ENoSpaceNamesThePath(t *testing.T) {
	t.Parallel()
	t.Run("apply to a full source", func(t *testing.T) {
		e := newEnv(t)
		src := filepath.Join(t.TempDir(), "small-src")
		mountTmpfs(t, src, "1m")
		must(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello\n"), 0o644))
		e.source = src
		e.ok("new", "w")
		e.ok("exec", "w", "--", "sh", "-c", "head -c 2000000 /dev/zero > big.bin; echo more >> a.txt")
		before := treeHash(t, src)
		errs := e.fails(1, "no space left on device writing "+filepath.Join(src, "big.bin")+" (the source's file system", "apply", "w")
		if !strings.Contains(errs, "free space and run strata apply again; nothing was published") {
			t.Errorf("apply on a full source: %s", errs)
		}
		if after := treeHash(t, src); after != before {
			t.Fatal("a failed apply changed the source (or left a temp in it)")
		}
	})
	t.Run("snap and exec with a full state root", func(t *testing.T) {
		e := newEnv(t)
		mountTmpfs(t, e.home, "2m")
		e.ok("new", "w")
		e.ok("exec", "w", "--", "sh", "-c", "head -c 1200000 /dev/urandom > big.bin")
		errs := e.fails(1, "no space left on device (strata's state root "+e.home, "snap", "w")
		if !strings.Contains(errs, "run strata snap again; no snapshot was recorded") {
			t.Errorf("snap on a full state root: %s", errs)
		}
		if out := e.ok("timeline", "w"); !strings.Contains(out, "has no snapshots") {
			t.Errorf("a failed snap recorded a snapshot: %s", out)
		}
		// Fill what is left, then exec cannot even record its session.
		f, err := os.Create(filepath.Join(e.home, "filler"))
		must(t, err)
		buf := make([]byte, 64<<10)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
		f.Close()
		errs = e.fails(1, "no space left on device writing "+filepath.Join(e.home, "worlds", "w", "sessions"), "exec", "w", "--", "true")
		if !strings.Contains(errs, "(strata's state root "+e.home) || !strings.Contains(errs, "the command did not start") {
			t.Errorf("exec on a full state root: %s", errs)
		}
		must(t, os.Remove(filepath.Join(e.home, "filler")))
		if out := e.ok("exec", "w", "--", "sh", "-c", "wc -c < big.bin"); strings.TrimSpace(out) != "1200000" {
			t.Errorf("after freeing space the World's file reads %q bytes", out)
		}
	})
}
