package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
)

func lines(from, to int, f func(int) string) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(f(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestApplyFullFlowAndHunkPick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	merged := mountedWorld(t, e, src, "w")
	other := mountedWorld(t, e, src, "other")
	otherBefore := overlaytest.Record(t, other)
	// Three separate hunks in one file, plus create, delete, symlink, dir.
	writeFile(t, filepath.Join(src, "nums.txt"), lines(1, 40, func(i int) string { return fmt.Sprint(i) }))
	time.Sleep(10 * time.Millisecond) // past the clock tick of the source write (see TestApplyLateBaseNeedsMerge)
	writeFile(t, filepath.Join(merged, "nums.txt"), lines(1, 40, func(i int) string {
		switch i {
		case 3, 20, 37:
			return fmt.Sprint("changed ", i)
		}
		return fmt.Sprint(i)
	}))
	fcs, err := e.Diff(ctx, "w", DiffOptions{Paths: []string{"nums.txt"}})
	if err != nil || len(fcs) != 1 || fcs[0].Hunks != 3 {
		t.Fatalf("diff: %v %+v", err, fcs)
	}
	// Pick hunk 2 of 3: the source gets exactly that hunk.
	if _, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "nums.txt", Hunks: []int{2}}}}); err != nil {
		t.Fatal(err)
	}
	want := lines(1, 40, func(i int) string {
		if i == 20 {
			return "changed 20"
		}
		return fmt.Sprint(i)
	})
	if got := readFile(t, filepath.Join(src, "nums.txt")); got != want {
		t.Fatalf("after picking hunk 2 the source is:\n%s", got)
	}
	// Out-of-range hunk numbers are a clear error and write nothing.
	_, err = e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "nums.txt", Hunks: []int{7}}}})
	if err == nil || !strings.Contains(err.Error(), "7") {
		t.Fatalf("hunk 7 of 2: %v", err)
	}
	// Everything else.
	writeFile(t, filepath.Join(merged, "d0", "new.txt"), "new\n")
	if err := os.Remove(filepath.Join(merged, "d1", "f2.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(merged, "d2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d0/new.txt", filepath.Join(merged, "newlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(merged, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d3/f1.txt", filepath.Join(merged, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(merged, "d3", "f0.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(merged, "emptydir"), 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := overlaytest.DiffTrees(overlaytest.Record(t, merged), overlaytest.Record(t, src)); len(d) > 0 {
		t.Fatalf("after apply all the source differs from the World:\n%s", strings.Join(d, "\n"))
	}
	if d := overlaytest.DiffTrees(otherBefore, overlaytest.Record(t, other)); len(d) > 1 || (len(d) == 1 && !strings.Contains(d[0], "nums.txt")) {
		// The other World sees the source (it has no changes of its own), so
		// only the new and changed source files may appear there.
		t.Logf("other World now sees the applied source: %v", d)
	}
	cs, err := e.Changes(ctx, mustWorld(t, e, "other"), false)
	if err != nil || len(cs.Changes) != 0 {
		t.Fatalf("the other World gained changes: %v %+v", err, cs)
	}
	hs, err := e.History()
	if err != nil || len(hs) != 2 {
		t.Fatalf("history: %v %d", err, len(hs))
	}
}

func TestApplyMergesAndConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	base, merged := lineFiveEdited(t, e, src, "f.txt", 30)
	// Bases are captured while the source still holds them.
	if _, err := e.CaptureBases(ctx, mustWorld(t, e, "w"), mustChanges(t, e, "w")); err != nil {
		t.Fatal(err)
	}
	// The person edits another region: a clean merge.
	theirs := strings.Replace(base, "line 25\n", "person 25\n", 1)
	writeFile(t, filepath.Join(src, "f.txt"), theirs)
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(theirs, "line 5\n", "world 5\n", 1)
	if got := readFile(t, filepath.Join(src, "f.txt")); got != want {
		t.Fatalf("clean merge:\n%s", got)
	}
	// Same region: a conflict, and nothing is written.
	writeFile(t, filepath.Join(merged, "f.txt"), strings.Replace(want, "line 10\n", "world 10\n", 1))
	writeFile(t, filepath.Join(merged, "g.txt"), "new in world\n")
	personEdit := strings.Replace(want, "line 10\n", "person 10\n", 1)
	writeFile(t, filepath.Join(src, "f.txt"), personEdit)
	_, err := e.Apply(ctx, "w", ApplyOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "f.txt" {
		t.Fatalf("conflict: %v", err)
	}
	if got := readFile(t, filepath.Join(src, "f.txt")); got != personEdit {
		t.Fatal("a conflicting apply changed the source")
	}
	if _, err := os.Stat(filepath.Join(src, "g.txt")); err == nil {
		t.Fatal("a rejected publication wrote g.txt")
	}
	// A deleted file whose source changed is a conflict too.
	if err := os.Remove(filepath.Join(merged, "d0", "f0.txt")); err != nil {
		t.Fatal(err)
	}
	_, _ = e.CaptureBases(ctx, mustWorld(t, e, "w"), mustChanges(t, e, "w"))
	writeFile(t, filepath.Join(src, "d0", "f0.txt"), "person rewrote it\n")
	_, err = e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "d0/f0.txt"}}})
	if !errors.As(err, &ce) {
		t.Fatalf("deleting a file the person changed: %v", err)
	}
	if got := readFile(t, filepath.Join(src, "d0", "f0.txt")); got != "person rewrote it\n" {
		t.Fatal("the person's file was deleted")
	}
}

// A base captured after the person edited the source must not turn into a
// silent overwrite of that edit.
func TestApplyLateBaseNeedsMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	writeFile(t, filepath.Join(src, "late.txt"), "original\n")
	merged := mountedWorld(t, e, src, "w")
	writeFile(t, filepath.Join(merged, "late.txt"), "world version\n")
	// No watcher ran: the person edits the source before any capture.
	writeFile(t, filepath.Join(src, "late.txt"), "person version\n")
	_, err := e.Apply(ctx, "w", ApplyOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.Conflicts[0].Reason, "base is unknown") {
		t.Fatalf("late base: %v", err)
	}
	if got := readFile(t, filepath.Join(src, "late.txt")); got != "person version\n" {
		t.Fatalf("the person's edit was overwritten: %q", got)
	}
}

func mustChanges(t *testing.T, e *Engine, name string) *overlay.ChangeSet {
	cs, err := e.Changes(context.Background(), mustWorld(t, e, name), false)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestMergeAgreesWithGitMergeFile checks clean 3-way merges of random edits
// against `git merge-file` as the oracle, through the whole apply path.
func TestApplyMergeAgreesWithGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := context.Background()
	e, src := testEngine(t)
	rng := rand.New(rand.NewSource(11))
	merged := mountedWorld(t, e, src, "w")
	clean := 0
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("m%02d.txt", i)
		n := 20 + rng.Intn(40)
		base := lines(1, n, func(j int) string { return fmt.Sprintf("l%d", j) })
		writeFile(t, filepath.Join(src, name), base)
		time.Sleep(10 * time.Millisecond) // a copy-up in the same clock tick as the source write counts as a late base
		edit := func(s string, tag string) string {
			ls := strings.SplitAfter(s, "\n")
			for k := 0; k < 1+rng.Intn(3); k++ {
				j := rng.Intn(len(ls) - 1)
				switch rng.Intn(3) {
				case 0:
					ls[j] = tag + ls[j]
				case 1:
					ls[j] = ""
				default:
					ls[j] = ls[j] + tag + "\n"
				}
			}
			return strings.Join(ls, "")
		}
		ours, theirs := edit(base, "W"), edit(base, "P")
		writeFile(t, filepath.Join(merged, name), ours)
		if _, err := e.CaptureBases(ctx, mustWorld(t, e, "w"), mustChanges(t, e, "w")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(src, name), theirs)
		dir := t.TempDir()
		for f, c := range map[string]string{"base": base, "ours": ours, "theirs": theirs} {
			writeFile(t, filepath.Join(dir, f), c)
		}
		gitOut, gitErr := exec.Command("git", "merge-file", "-p", filepath.Join(dir, "ours"), filepath.Join(dir, "base"), filepath.Join(dir, "theirs")).Output()
		gitClean := gitErr == nil
		_, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: name}}})
		if gitClean != (err == nil) {
			t.Fatalf("%s: git clean=%v, strata err=%v\nbase:\n%s\nours:\n%s\ntheirs:\n%s", name, gitClean, err, base, ours, theirs)
		}
		if gitClean {
			clean++
			if got := readFile(t, filepath.Join(src, name)); got != string(gitOut) && ours != theirs {
				t.Fatalf("%s: strata merged:\n%s\ngit merged:\n%s", name, got, gitOut)
			}
		}
	}
	if clean == 0 {
		t.Fatal("no clean merge in the corpus")
	}
}

func TestApplyHostileInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	merged := mountedWorld(t, e, src, "w")
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "passwd"), "outside\n")
	// A symlink in the World pointing outside is applied as a symlink, never followed.
	if err := os.Symlink(filepath.Join(outside, "passwd"), filepath.Join(merged, "evil-link")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if tgt, err := os.Readlink(filepath.Join(src, "evil-link")); err != nil || tgt != filepath.Join(outside, "passwd") {
		t.Fatalf("symlink applied as %q %v", tgt, err)
	}
	if readFile(t, filepath.Join(outside, "passwd")) != "outside\n" {
		t.Fatal("apply wrote through a symlink")
	}
	// A source directory swapped for a symlink before the publication: the
	// write fails and nothing outside the source changes.
	writeFile(t, filepath.Join(merged, "d4", "f0.txt"), "world\n")
	if _, err := e.CaptureBases(ctx, mustWorld(t, e, "w"), mustChanges(t, e, "w")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "d4"), filepath.Join(outside, "d4")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "d4"), filepath.Join(src, "d4")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "d4/f0.txt"}}}); err == nil {
		t.Fatal("apply through a swapped-in symlink succeeded")
	}
	if got := readFile(t, filepath.Join(outside, "d4", "f0.txt")); got == "world\n" {
		t.Fatal("apply wrote outside the source")
	}
	// Paths that are not changes, and `..`, are refused.
	for _, p := range []string{"../etc/passwd", "no/such/path"} {
		if _, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: p}}}); err == nil {
			t.Fatalf("apply %q succeeded", p)
		}
	}
}

// lineFiveEdited writes name in the source as n numbered lines ("line 1"
// ...), then makes World "w" over it, mounted, whose copy says "world 5"
// for line 5. It returns the source's content and the World's merged dir.
func lineFiveEdited(t *testing.T, e *Engine, src, name string, n int) (base, merged string) {
	t.Helper()
	base = lines(1, n, func(i int) string { return fmt.Sprint("line ", i) })
	writeFile(t, filepath.Join(src, name), base)
	time.Sleep(10 * time.Millisecond) // the World's copy-up is younger than the source
	merged = mountedWorld(t, e, src, "w")
	writeFile(t, filepath.Join(merged, name), strings.Replace(base, "line 5\n", "world 5\n", 1))
	return base, merged
}
