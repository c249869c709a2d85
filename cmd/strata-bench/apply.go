package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/diffview"
)

func init() {
	groups = append(groups, group{name: "apply", run: benchApply})
}

func benchApply(b *bench, _ []int) error {
	src := filepath.Join(b.dir, "apply-src")
	_ = os.RemoveAll(src)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(src)
	for i := 0; i < 1000; i++ {
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("line of file %d\n", i), 200)), 0o644); err != nil {
			return err
		}
	}
	big := strings.Builder{}
	for i := 0; i < 10_000; i++ {
		fmt.Fprintf(&big, "line %d of the big file\n", i)
	}
	if err := os.WriteFile(filepath.Join(src, "big.txt"), []byte(big.String()), 0o644); err != nil {
		return err
	}
	home := filepath.Join(b.dir, "home-apply")
	_ = os.RemoveAll(home)
	env := []string{"STRATA_HOME=" + home, "STRATA_CONFIG=" + filepath.Join(b.dir, "none.toml")}
	defer cleanupHome(home)
	strata := func(args ...string) error { return runEnv(env, src, b.bin, args...) }
	var applies []time.Duration
	runs := max(3, b.runs/3)
	for i := 0; i < runs; i++ {
		w := fmt.Sprintf("a%d", i)
		if err := strata("new", w, "--source", src); err != nil {
			return err
		}
		if err := strata("exec", w, "--", "sh", "-c", fmt.Sprintf("for f in d*/f*.txt; do echo 'run %d' >> \"$f\"; done", i)); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
		d, err := b.timeCmd(1, nil, b.bin, func(int) []string { return []string{"apply", w} }, env, src)
		if err != nil {
			return err
		}
		applies = append(applies, d...)
	}
	b.add(row{
		group: "apply", name: "strata apply, 1,000 changed files (fsynced)", strata: applies, target: time.Second,
		note: "whole process: bases, 3-way decisions, publication with journal and fsync, history",
	})

	// Diff of a 10,000-line file with 100 hunks: in process and whole process.
	lines := strings.SplitAfter(big.String(), "\n")
	for i := 50; i < len(lines); i += 100 {
		lines[i] = "changed " + lines[i]
	}
	changed := strings.Join(lines, "")
	var fd *diffview.FileDiff
	dd, err := b.timeFunc(b.runs*2, nil, func(int) error {
		fd = diffview.Diff(big.String(), changed, diffview.Options{})
		return nil
	})
	if err != nil {
		return err
	}
	if len(fd.Hunks) != 100 {
		return fmt.Errorf("diff bench: %d hunks, want 100", len(fd.Hunks))
	}
	b.add(row{group: "apply", name: "diff 10,000 lines, 100 hunks (diffview)", strata: dd, target: 20 * time.Millisecond})
	if err := strata("new", "diffw", "--source", src); err != nil {
		return err
	}
	if err := strata("exec", "diffw", "--", "sh", "-c", "awk 'NR%100==51{print \"changed \" $0; next} {print}' big.txt > big.tmp && cat big.tmp > big.txt && rm big.tmp"); err != nil {
		return err
	}
	ds, err := b.timeCmd(b.runs, nil, b.bin, func(int) []string { return []string{"diff", "diffw", "big.txt"} }, env, src)
	if err != nil {
		return err
	}
	gd, err := b.timeCmdExit(b.runs, func(int) error {
		return os.WriteFile(filepath.Join(b.dir, "big-new.txt"), []byte(changed), 0o644)
	}, "git", func(int) []string {
		return []string{"diff", "--no-index", "--no-color", filepath.Join(src, "big.txt"), filepath.Join(b.dir, "big-new.txt")}
	}, nil, b.dir, 1)
	if err != nil {
		return err
	}
	b.add(row{group: "apply", name: "strata diff W big.txt (whole process)", strata: ds, baseName: "git diff --no-index", baseline: gd})
	return nil
}
