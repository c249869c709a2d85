package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func init() {
	groups = append(groups, group{name: "build-state", run: benchBuildState})
}

// buildFiles is how many small files the "build" of the build-state group
// writes into build/ (issue 17: 20,000).
const buildFiles = 20_000

// buildTar makes (once) a tar of buildFiles small object-like files under
// build/, which a World's "build" unpacks: faster than a shell loop, and
// every file goes through the World's overlay as a build's would.
func (b *bench) buildTar() (string, error) {
	tarPath := filepath.Join(b.dir, fmt.Sprintf("build-%d.tar", buildFiles))
	if _, err := os.Stat(tarPath); err == nil {
		return tarPath, nil
	}
	stage := filepath.Join(b.dir, "build-stage")
	_ = os.RemoveAll(stage)
	for i := range buildFiles {
		dir := filepath.Join(stage, "build", fmt.Sprintf("mod%03d", i%200))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		body := fmt.Sprintf("object %d\n%0*d\n", i, 40+i%80, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("obj%05d.o", i)), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	if err := run(stage, "tar", "-cf", tarPath+".tmp", "build"); err != nil {
		return "", err
	}
	_ = os.RemoveAll(stage)
	return tarPath, os.Rename(tarPath+".tmp", tarPath)
}

// benchBuildState: a World whose build wrote 20,000 small files into an
// ignored build/ and which changed one source file; the first snapshot and
// the incremental one (one more source edit), whole strata process. The
// same World without build/ declared build state (what every snapshot did
// before: hash and store all of it) is timed in the same run, and cp -a of
// the upper is the baseline.
func benchBuildState(b *bench, _ []int) error {
	src, err := b.sourceTree(10_000)
	if err != nil {
		return err
	}
	tarPath, err := b.buildTar()
	if err != nil {
		return err
	}
	files, err := firstFiles(src, 2)
	if err != nil {
		return err
	}
	edited := files[0]
	withCfg := filepath.Join(b.dir, "buildstate.toml")
	if err := os.WriteFile(withCfg, []byte("ignore = [\"build/\"]\n"), 0o644); err != nil {
		return err
	}
	type variant struct {
		name        string
		cfg         string
		runs        int
		first, next []time.Duration
		cpuFirst    []time.Duration // the strata process's CPU time
		cpuNext     []time.Duration
	}
	vs := []*variant{
		{name: "build/ is build state", cfg: withCfg, runs: b.runs},
		{name: "build/ hashed (as before)", cfg: filepath.Join(b.dir, "none.toml"), runs: b.baseRuns},
	}
	var cpUpper []time.Duration
	for vi, v := range vs {
		home := filepath.Join(b.dir, fmt.Sprintf("home-buildstate-%d", vi))
		_ = os.RemoveAll(home)
		env := []string{"STRATA_HOME=" + home, "STRATA_CONFIG=" + v.cfg}
		strata := func(args ...string) error { return runEnv(env, src, b.bin, args...) }
		for i := 0; i < v.runs; i++ {
			w := fmt.Sprintf("b%d", i)
			if err := strata("new", w, "--source", src); err != nil {
				cleanupHome(home)
				return err
			}
			script := fmt.Sprintf("set -e; tar -xf '%s'; echo edit-%d >> '%s'", tarPath, i, edited)
			// tree: the tar is under -dir, which the default level's private
			// /tmp hides; the row times the snapshot, not the build's reach.
			if err := strata("exec", w, "--isolation", "tree", "--", "sh", "-c", script); err != nil {
				cleanupHome(home)
				return err
			}
			if err := run(b.dir, "sync"); err != nil {
				cleanupHome(home)
				return err
			}
			d, err := b.timeCmd(1, nil, b.bin, func(int) []string { return []string{"snap", w, "-m", "first"} }, env, src)
			if err != nil {
				cleanupHome(home)
				return err
			}
			v.first = append(v.first, d...)
			v.cpuFirst = append(v.cpuFirst, b.cpu...)
			if err := strata("exec", w, "--", "sh", "-c", fmt.Sprintf("echo again-%d >> '%s'", i, edited)); err != nil {
				cleanupHome(home)
				return err
			}
			time.Sleep(15 * time.Millisecond) // past the stat cache's racy window, as between real commands
			d, err = b.timeCmd(1, nil, b.bin, func(int) []string { return []string{"snap", w, "-m", "next"} }, env, src)
			if err != nil {
				cleanupHome(home)
				return err
			}
			v.next = append(v.next, d...)
			v.cpuNext = append(v.cpuNext, b.cpu...)
			if vi == 0 {
				upper := filepath.Join(home, "worlds", w, "upper")
				copyDir := filepath.Join(b.dir, "upper-copy")
				d, err = b.timeCmd(1, func(int) error { return os.RemoveAll(copyDir) },
					"cp", func(int) []string { return []string{"-a", upper, copyDir} }, nil, b.dir)
				if err != nil {
					cleanupHome(home)
					return err
				}
				cpUpper = append(cpUpper, d...)
				_ = os.RemoveAll(copyDir)
			}
			if err := strata("rm", w, "--purge"); err != nil {
				cleanupHome(home)
				return err
			}
			if err := run(b.dir, "sync"); err != nil {
				cleanupHome(home)
				return err
			}
		}
		cleanupHome(home)
	}
	note := fmt.Sprintf("World over a 10k-file tree: a build wrote %d small files into build/ (ignore = [\"build/\"]) and one source file changed; whole strata process; before = the same with build/ not build state (%s first, %s incremental)",
		buildFiles, fmtDur(median(vs[1].first)), fmtDur(median(vs[1].next)))
	cpuNote := func(cpu []time.Duration) string {
		return fmt.Sprintf("wall time; the strata process's CPU time (user+system, which the machine's load does not inflate): median %s, %s", fmtDurZ(median(cpu), true), spread(cpu, true))
	}
	b.add(row{group: "build-state", name: "strata snap, first (20k build files, 1 edit)", strata: vs[0].first, baseName: "cp -a upper", baseline: cpUpper, target: 30 * time.Millisecond, note: note + "; " + cpuNote(vs[0].cpuFirst)})
	b.add(row{group: "build-state", name: "strata snap, incremental (1 more edit)", strata: vs[0].next, baseName: "cp -a upper", baseline: cpUpper, target: 30 * time.Millisecond, note: cpuNote(vs[0].cpuNext)})
	b.add(row{group: "build-state", name: "strata snap, first, build/ hashed (before)", strata: vs[1].first, baseName: "cp -a upper", baseline: cpUpper})
	b.add(row{group: "build-state", name: "strata snap, incremental, build/ hashed (before)", strata: vs[1].next, baseName: "cp -a upper", baseline: cpUpper})
	return nil
}
