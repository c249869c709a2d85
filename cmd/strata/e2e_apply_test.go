package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// treeHash hashes every path, type, mode and content under root.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			lines = append(lines, "l "+rel+" "+tgt)
		case d.IsDir():
			lines = append(lines, fmt.Sprintf("d %s %o", rel, info.Mode().Perm()))
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			lines = append(lines, fmt.Sprintf("f %s %o %x", rel, info.Mode().Perm(), h[:8]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:])
}

// crashKills is how many moments TestE2EApplyCrashSafety kills the apply
// at, shared by crashWorkers Worlds killed in parallel.
const (
	crashKills   = 32
	crashWorkers = 2
)

// TestE2EApplyCrashSafety runs a 2,000-file publication in the built binary
// and kills it with SIGKILL at crashKills moments spread evenly over its run
// (one at a random moment in each equal slice of it, startup included);
// after the next strata start (which recovers) the source is all-old or
// all-new. Each of crashWorkers state roots takes every crashWorkers-th
// slice (one kill runs one strata process at a time: two use both cores).
// It runs on tmpfs (newTmpfsEnv): a kill tests the order of the
// publication's steps, not the disk's durability.
func TestE2EApplyCrashSafety(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seenOld, seenNew := 0, 0
	t.Run("kills", func(t *testing.T) {
		for w := range crashWorkers {
			t.Run(fmt.Sprint(w), func(t *testing.T) {
				t.Parallel()
				o, n := applyCrashKills(t, w)
				mu.Lock()
				seenOld, seenNew = seenOld+o, seenNew+n
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	t.Logf("after %d kills: %d all-old, %d all-new", crashKills, seenOld, seenNew)
	if seenOld == 0 || seenNew == 0 {
		t.Fatalf("the kills did not cover the run: %d old, %d new", seenOld, seenNew)
	}
}

// applyCrashKills is worker w of TestE2EApplyCrashSafety: its own state root
// and source, its kills the slices w, w+crashWorkers, ...; it returns how
// many left the source all-old and all-new.
func applyCrashKills(t *testing.T, w int) (seenOld, seenNew int) {
	e := newTmpfsEnv(t)
	// cp -al needs the pristine trees on the source's filesystem.
	scratch := filepath.Dir(e.home)
	pristine := filepath.Join(scratch, "pristine")
	for i := 0; i < 2000; i++ {
		writeTestFile(t, filepath.Join(pristine, fmt.Sprintf("d%02d/f%04d.txt", i%40, i)), fmt.Sprintf("old %d\n", i))
	}
	// Publication never writes a file in place (new content is renamed in,
	// deletions unlink), so a hard-link farm of the pristine trees is a safe
	// and fast reset.
	bases := filepath.Join(e.home, "worlds", "w", "bases")
	pristineBases := filepath.Join(scratch, "bases")
	reset := func() {
		for _, p := range [][2]string{{pristine, e.source}, {pristineBases, bases}} {
			must(t, os.RemoveAll(p[1]))
			if _, err := os.Stat(p[0]); err != nil {
				continue
			}
			if out, err := exec.Command("cp", "-al", p[0], p[1]).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
		}
	}
	reset()
	e.ok("new", "w")
	// The World rewrites 1,200 files, creates 400 and deletes 400.
	e.ok("exec", "w", "--", "sh", "-c", `
		i=0; for f in d*/f*.txt; do
			case $((i % 5)) in
			0|1|2) echo "new $i" > "$f" ;;
			3) rm "$f" ;;
			4) echo "created $i" > "${f%.txt}.new" ;;
			esac; i=$((i+1)); done`)
	worldDir := filepath.Join(e.home, "worlds", "w")
	_ = exec.Command("umount", filepath.Join(worldDir, "merged")).Run() // apply reads the layers, no mount needed
	oldHash := treeHash(t, e.source)
	e.ok("apply", "w", "--dry-run") // captures every base while the source is pristine
	if out, err := exec.Command("cp", "-a", bases, pristineBases).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	start := time.Now()
	e.ok("apply", "w")
	full := time.Since(start)
	newHash := treeHash(t, e.source)
	if oldHash == newHash {
		t.Fatal("the apply changed nothing")
	}
	t.Logf("a whole apply of 2,000 paths takes %s", full)
	rng := rand.New(rand.NewSource(int64(5 + w)))
	// One kill in each slice of the whole run (startup included) and a
	// quarter more: stratified, so no part of the run goes untried the way
	// independent random moments can leave one.
	slice := (int64(full) + int64(full)/4) / crashKills
	for i := w; i < crashKills; i += crashWorkers {
		reset()
		cmd := e.cmd("apply", "w")
		must(t, cmd.Start())
		time.Sleep(time.Duration(int64(i)*slice + rng.Int63n(slice)))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		e.ok("ls") // any strata start finishes or undoes the interrupted publication
		switch treeHash(t, e.source) {
		case oldHash:
			seenOld++
		case newHash:
			seenNew++
		default:
			t.Fatalf("kill %d: the source is neither all-old nor all-new", i)
		}
		if ents, _ := os.ReadDir(filepath.Join(e.home, "journal")); len(ents) > 0 {
			for _, j := range ents {
				if strings.HasSuffix(j.Name(), ".json") {
					t.Fatalf("kill %d: journal %s is left after recovery", i, j.Name())
				}
			}
		}
	}
	return seenOld, seenNew
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
}
