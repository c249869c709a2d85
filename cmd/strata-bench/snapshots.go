package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/engine"
)

func init() {
	groups = append(groups, group{name: "snapshots", run: benchSnapshots}, group{name: "snapshots-api", run: benchSnapshotsInProcess})
}

// changeScript writes 100 files of ~46 KB (4.6 MB) over existing source
// files and deletes 20 others, tagged so every run's content is new.
func changeScript(src string, tag int) (string, error) {
	files, err := firstFiles(src, 2000)
	if err != nil {
		return "", fmt.Errorf("change script: %w", err)
	}
	var sb strings.Builder
	sb.WriteString("set -e\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&sb, "head -c 47000 /dev/urandom | base64 -w 100 | head -c 46000 > '%s'; echo run-%d >> '%s'\n", files[i*17], tag, files[i*17])
	}
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&sb, "rm -f '%s'\n", files[i*17+5])
	}
	return sb.String(), nil
}

func benchSnapshots(b *bench, _ []int) error {
	src, err := b.sourceTree(100_000)
	if err != nil {
		return err
	}
	home := filepath.Join(b.dir, "home-snap")
	_ = os.RemoveAll(home)
	env := []string{"STRATA_HOME=" + home, "STRATA_CONFIG=" + filepath.Join(b.dir, "none.toml")}
	defer cleanupHome(home)
	strata := func(args ...string) error { return runEnv(env, src, b.bin, args...) }
	var first, next, rollback, fork, cpUpper []time.Duration
	for i := 0; i < b.runs; i++ {
		w := fmt.Sprintf("s%d", i)
		if err := strata("new", w, "--source", src); err != nil {
			return err
		}
		script, err := changeScript(src, i)
		if err != nil {
			return err
		}
		if err := strata("exec", w, "--", "sh", "-c", script); err != nil {
			return err
		}
		d, err := b.timeCmd(1, nil, b.bin, func(int) []string { return []string{"snap", w, "-m", "first"} }, env, src)
		if err != nil {
			return err
		}
		first = append(first, d...)
		if err := strata("exec", w, "--", "sh", "-c", fmt.Sprintf("echo one more > x-%d", i)); err != nil {
			return err
		}
		time.Sleep(15 * time.Millisecond) // past the stat cache's racy window, as between real commands
		d, err = b.timeCmd(1, nil, b.bin, func(int) []string { return []string{"snap", w, "-m", "next"} }, env, src)
		if err != nil {
			return err
		}
		next = append(next, d...)
		if err := strata("exec", w, "--", "sh", "-c", "echo damage > damage.txt"); err != nil {
			return err
		}
		d, err = b.timeCmd(1, nil, b.bin, func(int) []string { return []string{"rollback", w, "head~1"} }, env, src)
		if err != nil {
			return err
		}
		rollback = append(rollback, d...)
		d, err = b.timeCmd(1, nil, b.bin, func(int) []string { return []string{"fork", w, "--snap", "head", "-n", "8", "--prefix", w + "f"} }, env, src)
		if err != nil {
			return err
		}
		fork = append(fork, d...)
		// The baseline last: its 4.6 MB of dirty copies would otherwise be
		// flushed by the next fsync strata makes, and timed as strata's.
		upper := filepath.Join(home, "worlds", w, "upper")
		d, err = b.timeCmd(1, func(int) error { return os.RemoveAll(filepath.Join(b.dir, "upper-copy")) },
			"cp", func(int) []string { return []string{"-a", upper, filepath.Join(b.dir, "upper-copy")} }, nil, b.dir)
		if err != nil {
			return err
		}
		cpUpper = append(cpUpper, d...)
		_ = os.RemoveAll(filepath.Join(b.dir, "upper-copy"))
		if err := run(b.dir, "sync"); err != nil { // settle before the next World's run
			return err
		}
	}
	note := "World upper: 100 files of ~46 KB (4.6 MB) and 20 whiteouts over the 100k-file tree; whole strata process timed"
	b.add(row{group: "snapshots", name: "strata snap, first", strata: first, baseName: "cp -a upper", baseline: cpUpper, target: 30 * time.Millisecond, note: note})
	b.add(row{group: "snapshots", name: "strata snap, after one more change", strata: next, baseName: "cp -a upper", baseline: cpUpper, target: 10 * time.Millisecond})
	b.add(row{group: "snapshots", name: "strata rollback (with its undo snapshot)", strata: rollback, baseName: "cp -a upper", baseline: cpUpper, target: 50 * time.Millisecond})
	b.add(row{group: "snapshots", name: "strata fork -n 8", strata: fork, baseName: "cp -a upper", baseline: cpUpper, target: 250 * time.Millisecond})
	return nil
}

func cleanupHome(home string) {
	ents, _ := os.ReadDir(filepath.Join(home, "worlds"))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			_ = execCommand("umount", "-l", filepath.Join(home, "worlds", e.Name(), "merged")).Run()
		}
	}
	_ = os.RemoveAll(home)
}

// benchSnapshotsInProcess times the same operations through the engine API,
// without the cost of starting a strata process (about 3 ms of Go start-up
// of a binary that links the TUI), so the rows show the operation itself.
func benchSnapshotsInProcess(b *bench, _ []int) error {
	src, err := b.sourceTree(100_000)
	if err != nil {
		return err
	}
	home := filepath.Join(b.dir, "home-snap-api")
	_ = os.RemoveAll(home)
	defer cleanupHome(home)
	e, err := engine.Open(b.ctx, engine.Options{StateRoot: home, Config: &engine.Config{Backend: "local", MountBackend: "auto", Isolation: "tree"}, Exe: b.bin})
	if err != nil {
		return err
	}
	var first, next, rollback, fork []time.Duration
	for i := 0; i < b.runs; i++ {
		name := fmt.Sprintf("p%d", i)
		w, err := e.Create(b.ctx, engine.CreateOptions{Name: name, Source: src})
		if err != nil {
			return err
		}
		if err := e.EnsureMounted(b.ctx, w); err != nil {
			return err
		}
		script, err := changeScript(src, 1000+i)
		if err != nil {
			return err
		}
		merged := e.Paths.Merged(name)
		if err := run(merged, "sh", "-c", strings.ReplaceAll(script, src, merged)); err != nil {
			return err
		}
		d, err := b.timeFunc(1, nil, func(int) error {
			_, err := e.Snapshot(b.ctx, name, engine.SnapshotOptions{Message: "first"})
			return err
		})
		if err != nil {
			return err
		}
		first = append(first, d...)
		if err := os.WriteFile(filepath.Join(merged, fmt.Sprintf("x-%d", i)), []byte("one more\n"), 0o644); err != nil {
			return err
		}
		time.Sleep(15 * time.Millisecond) // past the stat cache's racy window
		d, err = b.timeFunc(1, nil, func(int) error {
			_, err := e.Snapshot(b.ctx, name, engine.SnapshotOptions{Message: "next"})
			return err
		})
		if err != nil {
			return err
		}
		next = append(next, d...)
		if err := os.WriteFile(filepath.Join(merged, "damage.txt"), []byte("damage\n"), 0o644); err != nil {
			return err
		}
		d, err = b.timeFunc(1, nil, func(int) error { _, err := e.Rollback(b.ctx, name, "head~1", engine.RollbackOptions{}); return err })
		if err != nil {
			return err
		}
		rollback = append(rollback, d...)
		d, err = b.timeFunc(1, nil, func(int) error {
			_, err := e.Fork(b.ctx, name, engine.ForkOptions{Snap: "head", N: 8, Prefix: name + "f"})
			return err
		})
		if err != nil {
			return err
		}
		fork = append(fork, d...)
	}
	b.add(row{group: "snapshots", name: "engine Snapshot, first (in process)", strata: first, target: 30 * time.Millisecond})
	b.add(row{group: "snapshots", name: "engine Snapshot, after one more change (in process)", strata: next, target: 10 * time.Millisecond})
	b.add(row{group: "snapshots", name: "engine Rollback (in process)", strata: rollback, target: 50 * time.Millisecond})
	b.add(row{group: "snapshots", name: "engine Fork -n 8 (in process)", strata: fork, target: 250 * time.Millisecond})
	return nil
}
