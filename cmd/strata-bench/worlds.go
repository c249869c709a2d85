package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
)

func init() {
	groups = append(groups, group{name: "worlds", run: benchWorlds})
}

// sourceTree returns a generated tree of n files in n/20 dirs, cached.
func (b *bench) sourceTree(n int) (string, error) {
	dir := filepath.Join(b.dir, fmt.Sprintf("src-%d", n))
	marker := dir + ".done"
	if _, err := os.Stat(marker); err == nil {
		return dir, nil
	}
	b.logf("generating %d files in %d dirs under %s", n, n/20, dir)
	_ = os.RemoveAll(dir)
	if err := overlay.GenerateTree(dir, n, n/20, 1); err != nil {
		return "", err
	}
	return dir, os.WriteFile(marker, nil, 0o644)
}

// gitRepo makes the tree a git repository with one commit, cached.
func (b *bench) gitRepo(dir string) error {
	marker := dir + ".git-done"
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	b.logf("committing %s to git (baseline for git worktree and git status)", dir)
	for _, args := range [][]string{
		{"init", "-q"},
		{"config", "user.email", "bench@strata"},
		{"config", "user.name", "bench"},
		{"config", "gc.auto", "0"}, // no background repack racing the copies being timed
		{"add", "-A"},
		{"commit", "-q", "-m", "tree"},
	} {
		if err := run(dir, "git", args...); err != nil {
			return err
		}
	}
	return os.WriteFile(marker, nil, 0o644)
}

// firstFiles returns the first n regular files under root in walk order,
// leaving out .git (a directory in a clone, a file in a worktree).
func firstFiles(root string, n int) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, p)
			if len(files) >= n {
				return filepath.SkipAll
			}
		}
		return nil
	})
	if err == nil && len(files) < n {
		err = fmt.Errorf("%s holds %d files, want %d", root, len(files), n)
	}
	return files, err
}

// editScript modifies 100 files (appends a line) and deletes 20 others.
func editScript(root string) (string, error) {
	files, err := firstFiles(root, 2000)
	if err != nil {
		return "", fmt.Errorf("edit script: %w", err)
	}
	var sb strings.Builder
	sb.WriteString("set -e\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&sb, "echo 'appended by bench' >> '%s'\n", files[i*13])
	}
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&sb, "rm -f '%s'\n", files[i*13+7])
	}
	return sb.String(), nil
}

func benchWorlds(b *bench, sizes []int) error {
	home := filepath.Join(b.dir, "home")
	_ = os.RemoveAll(home)
	env := []string{"STRATA_HOME=" + home, "STRATA_CONFIG=" + filepath.Join(b.dir, "none.toml")}
	defer func() {
		// Unmount and drop every World made here.
		ents, _ := os.ReadDir(filepath.Join(home, "worlds"))
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				_ = mount.ForceUnmount(filepath.Join(home, "worlds", e.Name(), "merged"))
			}
		}
		_ = os.RemoveAll(home)
	}()
	for _, n := range sizes {
		src, err := b.sourceTree(n)
		if err != nil {
			return err
		}
		label := fmt.Sprintf("%dk files", n/1000)
		// strata new, whole process.
		news, err := b.timeCmd(b.runs, nil, b.bin, func(i int) []string {
			return []string{"new", fmt.Sprintf("n%d-%d", n, i), "--source", src}
		}, env, src)
		if err != nil {
			return err
		}
		r := row{group: "worlds", name: "strata new (" + label + ")", strata: news, target: 25 * time.Millisecond}
		if n == 100_000 {
			if err := b.gitRepo(src); err != nil {
				return err
			}
			wt, err := b.timeCmd(b.baseRuns, func(i int) error {
				_ = run(src, "git", "worktree", "remove", "--force", filepath.Join(b.dir, fmt.Sprintf("wt-%d", i)))
				return nil
			}, "git", func(i int) []string {
				return []string{"worktree", "add", "-q", "--detach", filepath.Join(b.dir, fmt.Sprintf("wt-%d", i))}
			}, nil, src)
			if err != nil {
				return err
			}
			// cp -a of the tree without .git, as a user copying the sources would.
			cp, err := b.timeCmd(b.baseRuns, func(i int) error {
				return os.RemoveAll(filepath.Join(b.dir, "cp"))
			}, "sh", func(int) []string {
				return []string{"-c", fmt.Sprintf("mkdir -p '%s' && cp -a '%s'/* '%s'/", filepath.Join(b.dir, "cp"), src, filepath.Join(b.dir, "cp"))}
			}, nil, b.dir)
			if err != nil {
				return err
			}
			_ = os.RemoveAll(filepath.Join(b.dir, "cp"))
			r.baseName, r.baseline = "git worktree add", wt
			b.add(r)
			b.add(row{group: "worlds", name: "strata new (" + label + ")", strata: news, baseName: "cp -a", baseline: cp, target: 25 * time.Millisecond})
		} else {
			b.add(r)
		}

		// One World with the standard edits: 100 modified, 20 deleted.
		w := fmt.Sprintf("edits-%d", n)
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
		// strata exec W -- true.
		ex, err := b.timeCmd(b.runs, nil, b.bin, func(int) []string { return []string{"exec", w, "--", "true"} }, env, src)
		if err != nil {
			return err
		}
		tr, _ := b.timeCmd(b.runs, nil, "true", func(int) []string { return nil }, nil, src)
		b.add(row{group: "worlds", name: "strata exec W -- true (" + label + ")", strata: ex, baseName: "true (no isolation)", baseline: tr, target: 20 * time.Millisecond})

		st, err := b.timeCmd(b.runs, nil, b.bin, func(int) []string { return []string{"status", w, "--json"} }, env, src)
		if err != nil {
			return err
		}
		r = row{group: "worlds", name: "strata status --json, 100 M + 20 D (" + label + ")", strata: st, target: 20 * time.Millisecond}
		if n == 100_000 {
			wt := filepath.Join(b.dir, "wt-status")
			_ = run(src, "git", "worktree", "remove", "--force", wt)
			if err := run(src, "git", "worktree", "add", "-q", "--detach", wt); err != nil {
				return err
			}
			wscript, _ := editScript(wt)
			if err := run(wt, "sh", "-c", wscript); err != nil {
				return err
			}
			gs, err := b.timeCmd(b.runs, nil, "git", func(int) []string { return []string{"status", "--porcelain"} }, nil, wt)
			if err != nil {
				return err
			}
			r.baseName, r.baseline = "git status --porcelain", gs
			_ = run(src, "git", "worktree", "remove", "--force", wt)
		}
		b.add(r)

		// The overlay core alone: reading the change set in process.
		upper := filepath.Join(home, "worlds", w, "upper")
		rc, err := b.timeFunc(b.runs*2, nil, func(int) error {
			cs, err := overlay.ReadChanges(context.Background(), overlay.Layers{Upper: upper, Lower: src, Dialect: overlay.DialectKernel}, overlay.ReadOptions{})
			if err == nil && len(cs.Changes) < 120 {
				err = fmt.Errorf("read changes: %d changes, want >= 120", len(cs.Changes))
			}
			return err
		})
		if err != nil {
			return err
		}
		b.add(row{group: "overlay", name: "ReadChanges, 100 M + 20 D (" + label + ")", strata: rc, target: 10 * time.Millisecond})
	}
	for i := 0; i < b.baseRuns; i++ {
		if s, err := b.sourceTree(100_000); err == nil {
			_ = run(s, "git", "worktree", "remove", "--force", filepath.Join(b.dir, fmt.Sprintf("wt-%d", i)))
		}
	}
	return nil
}

func runEnv(env []string, dir, name string, args ...string) error {
	cmd := execCommand(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
