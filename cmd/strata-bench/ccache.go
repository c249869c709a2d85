package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func init() {
	groups = append(groups, group{name: "ccache", run: benchCcache})
}

// ccacheUnits is the number of C files of the project the ccache group
// builds.
const ccacheUnits = 24

// benchCcache builds a small C project with ccache in World A, then the
// same in World B, and shows B hitting the cache because both see the
// source at one absolute path; a second git worktree of the project, at
// another path, misses (ccache hashes the working directory with -g:
// hash_dir). The cache dir is declared explicitly (CCACHE_DIR, passed with
// --env) instead of the host's ~/.cache/ccache: today's default isolation
// lets a World write the host's home, but if that changes (declared shared
// cache dirs, the isolation issue) the bench must keep naming the cache
// dir, which must stay outside the source tree and writable from a World.
func benchCcache(b *bench, _ []int) error {
	for _, tool := range []string{"ccache", "make", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.logf("ccache: %s is not installed (make deps installs ccache): skipped", tool)
			return nil
		}
	}
	src := filepath.Join(b.dir, "cc-src")
	cacheDir := filepath.Join(b.dir, "ccache")
	wt := filepath.Join(b.dir, "cc-worktree")
	home := filepath.Join(b.dir, "home-ccache")
	for _, d := range []string{src, cacheDir, wt, home} {
		_ = os.RemoveAll(d)
	}
	defer func() {
		_ = run(src, "git", "worktree", "remove", "--force", wt)
		cleanupHome(home)
	}()
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	var objs []string
	for i := 0; i < ccacheUnits; i++ {
		var sb strings.Builder
		fmt.Fprintf(&sb, "#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>\n\n")
		for j := 0; j < 20; j++ {
			fmt.Fprintf(&sb, "int unit%d_fn%d(const char *s) {\n\tint n = 0;\n\tfor (size_t k = 0; k < strlen(s); k++)\n\t\tn = n * 31 + s[k] + %d;\n\treturn n;\n}\n\n", i, j, j)
		}
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("unit%02d.c", i)), []byte(sb.String()), 0o644); err != nil {
			return err
		}
		objs = append(objs, fmt.Sprintf("unit%02d.o", i))
	}
	main := "#include <stdio.h>\nint unit0_fn0(const char *s);\nint main(void) { printf(\"%d\\n\", unit0_fn0(\"strata\")); return 0; }\n"
	if err := os.WriteFile(filepath.Join(src, "main.c"), []byte(main), 0o644); err != nil {
		return err
	}
	mk := "CC = ccache gcc\nCFLAGS = -O2 -g\nOBJS = main.o " + strings.Join(objs, " ") + "\n\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n%.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n"
	if err := os.WriteFile(filepath.Join(src, "Makefile"), []byte(mk), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, ".gitignore"), []byte("*.o\nprog\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "bench@strata"}, {"config", "user.name", "bench"}, {"add", "-A"}, {"commit", "-q", "-m", "c project"}} {
		if err := run(src, "git", args...); err != nil {
			return err
		}
	}
	ccEnv := []string{"CCACHE_DIR=" + cacheDir}
	env := append([]string{"STRATA_HOME=" + home, "STRATA_CONFIG=" + filepath.Join(b.dir, "none.toml")}, ccEnv...)
	if err := runEnv(ccEnv, src, "ccache", "-C", "-z"); err != nil {
		return err
	}
	units := ccacheUnits + 1
	type build struct {
		name   string
		d      time.Duration
		hits   int
		misses int
	}
	// buildIn zeroes the stats, times the command and reads the stats.
	buildIn := func(name string, dir string, cmdline ...string) (build, error) {
		if err := runEnv(ccEnv, dir, "ccache", "-z"); err != nil {
			return build{}, err
		}
		t := time.Now()
		if err := runEnv(env, dir, cmdline[0], cmdline[1:]...); err != nil {
			return build{}, err
		}
		r := build{name: name, d: time.Since(t)}
		st, err := ccacheStats(ccEnv, dir)
		if err != nil {
			return r, err
		}
		r.hits = st["direct_cache_hit"] + st["preprocessed_cache_hit"]
		r.misses = st["cache_miss"]
		if r.hits+r.misses < units {
			return r, fmt.Errorf("%s: ccache saw %d compilations, want %d: the build did not go through %s", name, r.hits+r.misses, units, cacheDir)
		}
		return r, nil
	}
	for _, w := range []string{"world-a", "world-b"} {
		if err := runEnv(env, src, b.bin, "new", w, "--source", src); err != nil {
			return err
		}
	}
	worldBuild := func(w string) []string {
		return []string{b.bin, "exec", w, "--env", "CCACHE_DIR=" + cacheDir, "--", "make", "-s", "-j2", "prog"}
	}
	a, err := buildIn("World A", src, worldBuild("world-a")...)
	if err != nil {
		return err
	}
	bb, err := buildIn("World B", src, worldBuild("world-b")...)
	if err != nil {
		return err
	}
	if bb.hits < units {
		return fmt.Errorf("world B hit the cache %d times of %d (misses %d): Worlds do not share compiler caches", bb.hits, units, bb.misses)
	}
	if err := run(src, "git", "worktree", "add", "-q", "--detach", wt); err != nil {
		return err
	}
	g, err := buildIn("git worktree", wt, "make", "-s", "-j2", "prog")
	if err != nil {
		return err
	}
	note := fmt.Sprintf("%d C files, gcc -O2 -g through ccache (CCACHE_DIR %s); hits/misses: World A %d/%d, World B %d/%d, second git worktree %d/%d", units, cacheDir, a.hits, a.misses, bb.hits, bb.misses, g.hits, g.misses)
	b.add(row{group: "ccache", name: "build in World B after World A (ccache)", strata: []time.Duration{bb.d}, baseName: "same build, second git worktree", baseline: []time.Duration{g.d}, note: note})
	b.add(row{group: "ccache", name: "build in World A, cold cache", strata: []time.Duration{a.d}})
	return nil
}

// ccacheStats reads ccache --print-stats (ID<TAB>count lines).
func ccacheStats(env []string, dir string) (map[string]int, error) {
	cmd := exec.Command("ccache", "--print-stats")
	cmd.Env, cmd.Dir = append(os.Environ(), env...), dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ccache --print-stats: %w", err)
	}
	st := map[string]int{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 2 {
			if n, err := strconv.Atoi(f[1]); err == nil {
				st[f[0]] = n
			}
		}
	}
	return st, nil
}
