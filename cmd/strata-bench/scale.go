package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Issue 17's scale rows: a 1,000,000-file tree (BIG=1), 100 Worlds over
// one tree (ls, the TUI's frames and RSS with a live session in each), and
// a World with 100,000 changed files. Every row has its baseline timed in
// the same run.

var (
	scaleFiles   = 0   // -scale-files: size of the "million" tree (0 = 1,000,000 with -big, else skipped)
	scaleWorlds  = 100 // -scale-worlds
	scaleChanged = 100_000
)

func init() {
	groups = append(groups,
		group{name: "million", run: benchMillion},
		group{name: "many-worlds", run: benchManyWorlds},
		group{name: "many-changes", run: benchManyChanges},
	)
}

func scaleEnv(b *bench, home string) []string {
	return []string{"STRATA_HOME=" + home, "STRATA_CONFIG=" + filepath.Join(b.dir, "none.toml")}
}

func label(n int) string {
	if n >= 1_000_000 && n%1_000_000 == 0 {
		return fmt.Sprintf("%dM files", n/1_000_000)
	}
	return fmt.Sprintf("%dk files", n/1000)
}

// benchMillion: new, status (100 M + 20 D), exec W -- true and snap on the
// big tree, against git worktree add, cp -a, git status and git commit.
func benchMillion(b *bench, sizes []int) error {
	n := scaleFiles
	if n == 0 {
		if sizes[len(sizes)-1] < 1_000_000 {
			b.logf("million: skipped (make bench BIG=1, or -scale-files N)")
			return nil
		}
		n = 1_000_000
	}
	lb := label(n)
	src, err := b.sourceTree(n)
	if err != nil {
		return err
	}
	if err := b.gitRepo(src); err != nil {
		return err
	}
	home := filepath.Join(b.dir, "home-million")
	_ = os.RemoveAll(home)
	defer cleanupHome(home)
	env := scaleEnv(b, home)
	news, err := b.timeCmd(b.runs, nil, b.bin, func(i int) []string {
		return []string{"new", fmt.Sprintf("m%d", i), "--source", src}
	}, env, src)
	if err != nil {
		return err
	}
	wtPath := func(i int) string { return filepath.Join(b.dir, fmt.Sprintf("wt-million-%d", i)) }
	removeWT := func(p string) { _ = run(src, "git", "worktree", "remove", "--force", p); _ = os.RemoveAll(p) }
	wt, err := b.timeCmd(b.baseRuns, func(i int) error { removeWT(wtPath(i)); return nil }, "git", func(i int) []string {
		return []string{"worktree", "add", "-q", "--detach", wtPath(i)}
	}, nil, src)
	if err != nil {
		return err
	}
	for i := 1; i < b.baseRuns; i++ {
		removeWT(wtPath(i))
	}
	cpDir := filepath.Join(b.dir, "cp-million")
	cp, err := b.timeCmd(b.baseRuns, func(int) error { return os.RemoveAll(cpDir) }, "sh", func(int) []string {
		return []string{"-c", fmt.Sprintf("mkdir -p '%s' && cp -a '%s'/* '%s'/", cpDir, src, cpDir)}
	}, nil, b.dir)
	if err != nil {
		return err
	}
	_ = os.RemoveAll(cpDir)
	b.add(row{group: "million", name: "strata new (" + lb + ")", strata: news, baseName: "git worktree add", baseline: wt, target: 25 * time.Millisecond})
	b.add(row{group: "million", name: "strata new (" + lb + ")", strata: news, baseName: "cp -a", baseline: cp, target: 25 * time.Millisecond})

	// The same 100 M + 20 D in a World and in the git worktree kept above.
	w := "edits"
	if err := runEnv(env, src, b.bin, "new", w, "--source", src); err != nil {
		return err
	}
	script, err := editScript(src)
	if err != nil {
		return err
	}
	if err := runEnv(env, src, b.bin, "exec", w, "--", "sh", "-c", script); err != nil {
		return err
	}
	gwt := wtPath(0)
	defer removeWT(gwt)
	wscript, err := editScript(gwt)
	if err != nil {
		return err
	}
	if err := run(gwt, "sh", "-c", wscript); err != nil {
		return err
	}
	if err := run(gwt, "git", "status", "--porcelain"); err != nil { // the index's stat cache warmed, as for the World
		return err
	}
	st, err := b.timeCmdCheck(b.runs, b.bin, []string{"status", w, "--json"}, env, src, func(out []byte) error {
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			return fmt.Errorf("status --json: %w", err)
		}
		if c := strings.Count(string(out), `"path"`); c < 120 {
			return fmt.Errorf("status --json lists %d paths, want 120", c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	gs, err := b.timeCmdCheck(b.runs, "git", []string{"status", "--porcelain"}, nil, gwt, func(out []byte) error {
		if c := strings.Count(string(out), "\n"); c != 120 {
			return fmt.Errorf("git status lists %d paths, want 120", c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.add(row{group: "million", name: "strata status --json, 100 M + 20 D (" + lb + ")", strata: st, baseName: "git status --porcelain", baseline: gs, target: 20 * time.Millisecond})

	ex, err := b.timeCmd(b.runs, nil, b.bin, func(int) []string { return []string{"exec", w, "--", "true"} }, env, src)
	if err != nil {
		return err
	}
	tr, err := b.timeCmd(b.runs, nil, "true", func(int) []string { return nil }, nil, src)
	if err != nil {
		return err
	}
	b.add(row{group: "million", name: "strata exec W -- true (" + lb + ")", strata: ex, baseName: "true (no isolation)", baseline: tr, target: 20 * time.Millisecond})

	// snap: the first of the 120 changes, then one more change each run;
	// the user's alternative is a commit of the same changes.
	first, err := b.timeCmd(1, nil, b.bin, func(int) []string { return []string{"snap", w, "-m", "first"} }, env, src)
	if err != nil {
		return err
	}
	gfirst, err := b.timeCmd(1, nil, "sh", func(int) []string { return []string{"-c", "git add -A && git commit -q -m first"} }, nil, gwt)
	if err != nil {
		return err
	}
	b.add(row{group: "million", name: "strata snap, first, 100 M + 20 D (" + lb + ")", strata: first, baseName: "git add -A && git commit", baseline: gfirst, target: 30 * time.Millisecond})
	runs := max(3, b.runs/3)
	next, err := b.timeCmd(runs, func(i int) error {
		if err := runEnv(env, src, b.bin, "exec", w, "--", "sh", "-c", fmt.Sprintf("echo more %d >> more.txt", i)); err != nil {
			return err
		}
		time.Sleep(15 * time.Millisecond) // past the stat cache's racy window
		return nil
	}, b.bin, func(i int) []string { return []string{"snap", w, "-m", fmt.Sprintf("next %d", i)} }, env, src)
	if err != nil {
		return err
	}
	gnext, err := b.timeCmd(runs, func(i int) error {
		return os.WriteFile(filepath.Join(gwt, "more.txt"), fmt.Appendf(nil, "more %d\n", i), 0o644)
	}, "sh", func(i int) []string {
		return []string{"-c", fmt.Sprintf("git add -A && git commit -q -m 'next %d'", i)}
	}, nil, gwt)
	if err != nil {
		return err
	}
	b.add(row{group: "million", name: "strata snap, after one more change (" + lb + ")", strata: next, baseName: "git add -A && git commit", baseline: gnext, target: 10 * time.Millisecond})
	return nil
}

// timeCmdCheck runs a command n times, timing each, and checks each run's
// stdout: a row never times a command that did nothing.
func (b *bench) timeCmdCheck(n int, name string, args, env []string, dir string, check func([]byte) error) ([]time.Duration, error) {
	var out []time.Duration
	b.cpu = nil
	for i := 0; i < n; i++ {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		stdout, err := cmd.Output()
		d := time.Since(start)
		if ee, ok := err.(*exec.ExitError); ok && name == "git" && len(args) > 0 && args[0] == "diff" && ee.ExitCode() == 1 {
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
		}
		if err := check(stdout); err != nil {
			return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		out = append(out, d)
		if ps := cmd.ProcessState; ps != nil {
			b.cpu = append(b.cpu, ps.UserTime()+ps.SystemTime())
		}
	}
	return out, nil
}

// benchManyChanges: status and diff --stat of a World in which every one
// of 100,000 files changed, against git status and git diff --stat of a
// worktree with the same edit.
func benchManyChanges(b *bench, _ []int) error {
	n := scaleChanged
	src, err := b.sourceTree(n)
	if err != nil {
		return err
	}
	if err := b.gitRepo(src); err != nil {
		return err
	}
	home := filepath.Join(b.dir, "home-changes")
	_ = os.RemoveAll(home)
	defer cleanupHome(home)
	env := scaleEnv(b, home)
	// Every file gets a line appended: a change to each, none ignored.
	edit := "find . -name .git -prune -o -type f -print0 | xargs -0 sh -c 'for f; do echo changed-by-bench >> \"$f\"; done' sh"
	w := "all"
	if err := runEnv(env, src, b.bin, "new", w, "--source", src); err != nil {
		return err
	}
	b.logf("many-changes: changing %d files in a World and in a git worktree", n)
	if err := runEnv(env, src, b.bin, "exec", w, "--", "sh", "-c", edit); err != nil {
		return err
	}
	gwt := filepath.Join(b.dir, "wt-changes")
	_ = run(src, "git", "worktree", "remove", "--force", gwt)
	if err := run(src, "git", "worktree", "add", "-q", "--detach", gwt); err != nil {
		return err
	}
	defer func() { _ = run(src, "git", "worktree", "remove", "--force", gwt) }()
	if err := run(gwt, "sh", "-c", edit); err != nil {
		return err
	}
	if err := run(gwt, "git", "status", "--porcelain"); err != nil {
		return err
	}
	lines := func(want int, what string) func([]byte) error {
		return func(out []byte) error {
			if c := strings.Count(string(out), "\n"); c < want {
				return fmt.Errorf("%s: %d lines, want at least %d", what, c, want)
			}
			return nil
		}
	}
	// CPU time (user+system) of both sides too: the machine's load
	// inflates wall time, not that.
	cpuNote := func(sc, gc []time.Duration, what string) string {
		return fmt.Sprintf("CPU time (user+system) median: strata %s, %s %s", fmtDurZ(median(sc), true), what, fmtDurZ(median(gc), true))
	}
	st, err := b.timeCmdCheck(b.runs, b.bin, []string{"status", w}, env, src, lines(n, "status"))
	if err != nil {
		return err
	}
	stc := b.cpu
	gs, err := b.timeCmdCheck(b.runs, "git", []string{"status", "--porcelain"}, nil, gwt, lines(n, "git status"))
	if err != nil {
		return err
	}
	lb := fmt.Sprintf("%dk changed files", n/1000)
	b.add(row{group: "many-changes", name: "strata status (" + lb + ")", strata: st, baseName: "git status --porcelain", baseline: gs, note: cpuNote(stc, b.cpu, "git status")})
	ds, err := b.timeCmdCheck(b.baseRuns, b.bin, []string{"diff", w, "--stat"}, env, src, lines(n, "diff --stat"))
	if err != nil {
		return err
	}
	dsc := b.cpu
	gd, err := b.timeCmdCheck(b.baseRuns, "git", []string{"diff", "--stat=200"}, nil, gwt, lines(n, "git diff --stat"))
	if err != nil {
		return err
	}
	b.add(row{group: "many-changes", name: "strata diff --stat (" + lb + ")", strata: ds, baseName: "git diff --stat", baseline: gd, note: cpuNote(dsc, b.cpu, "git diff --stat")})
	return nil
}
