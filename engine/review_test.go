package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/diffview"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// driftFixture: nums.txt has 40 lines; the World changed lines 3, 20 and
// 37 (three hunks); afterwards a teammate changed line 10 in the source.
func driftFixture(t *testing.T) (e *Engine, src, merged, base, world, theirs string) {
	t.Helper()
	ctx := context.Background()
	e, src = testEngine(t)
	base = lines(1, 40, func(i int) string { return fmt.Sprint(i) })
	writeFile(t, filepath.Join(src, "nums.txt"), base)
	time.Sleep(10 * time.Millisecond)
	merged = mountedWorld(t, e, src, "w")
	world = lines(1, 40, func(i int) string {
		switch i {
		case 3, 20, 37:
			return fmt.Sprint("world ", i)
		}
		return fmt.Sprint(i)
	})
	writeFile(t, filepath.Join(merged, "nums.txt"), world)
	if _, err := e.CaptureBases(ctx, mustWorld(t, e, "w"), mustChanges(t, e, "w")); err != nil {
		t.Fatal(err)
	}
	theirs = strings.Replace(base, "\n10\n", "\nteammate 10\n", 1)
	writeFile(t, filepath.Join(src, "nums.txt"), theirs)
	return e, src, merged, base, world, theirs
}

// After the source moves, the diff is still base vs World (the teammate's
// line is not the World's deletion), with the drift and the three hashes.
func TestDiffReportsDriftAgainstTheBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, _, base, world, theirs := driftFixture(t)
	fcs, err := e.Diff(ctx, "w", DiffOptions{Paths: []string{"nums.txt"}})
	if err != nil || len(fcs) != 1 {
		t.Fatalf("diff: %v %+v", err, fcs)
	}
	fc := fcs[0]
	if fc.Hunks != 3 || fc.Added != 3 || fc.Removed != 3 || strings.Contains(engineText(fc), "teammate") {
		t.Fatalf("the diff is not base vs World: %d hunks +%d -%d\n%s", fc.Hunks, fc.Added, fc.Removed, Patch(fcs))
	}
	if !fc.Drift || fc.BaseHash != sha(base) || fc.WorldHash != sha(world) || fc.SourceHash != sha(theirs) {
		t.Fatalf("drift %v base %s world %s source %s", fc.Drift, fc.BaseHash, fc.WorldHash, fc.SourceHash)
	}
	if fc.OldText() != base || fc.NewText() != world {
		t.Fatal("OldText/NewText are not the versions diffed")
	}
	// World vs the source now: there the teammate's line shows.
	fcs, err = e.Diff(ctx, "w", DiffOptions{Paths: []string{"nums.txt"}, Against: "source"})
	if err != nil || len(fcs) != 1 || !strings.Contains(engineText(fcs[0]), "-teammate 10") || !fcs[0].Drift {
		t.Fatalf("against source: %v\n%s", err, Patch(fcs))
	}
	// No drift: a path the source still holds at its base.
	writeFile(t, filepath.Join(e.Paths.Merged("w"), "d0", "f0.txt"), "w\n")
	fcs, err = e.Diff(ctx, "w", DiffOptions{Paths: []string{"d0/f0.txt"}})
	if err != nil || len(fcs) != 1 || fcs[0].Drift || fcs[0].BaseHash != fcs[0].SourceHash {
		t.Fatalf("no drift: %v %+v", err, fcs)
	}
	// An added file's base is absent.
	writeFile(t, filepath.Join(e.Paths.Merged("w"), "new.txt"), "n\n")
	fcs, err = e.Diff(ctx, "w", DiffOptions{Paths: []string{"new.txt"}})
	if err != nil || len(fcs) != 1 || fcs[0].BaseHash != HashAbsent || fcs[0].SourceHash != HashAbsent || fcs[0].Drift {
		t.Fatalf("added: %v %+v", err, fcs)
	}
}

func engineText(fc FileChange) string {
	return Patch([]FileChange{fc})
}

// A hunk picked on the engine's diff under drift lands as the 3-way merge.
func TestApplyPickedHunkUnderDriftMerges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src, _, _, _, theirs := driftFixture(t)
	fcs, err := e.Diff(ctx, "w", DiffOptions{Paths: []string{"nums.txt"}})
	if err != nil || len(fcs) != 1 {
		t.Fatal(err)
	}
	fc := fcs[0]
	res, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "nums.txt", Hunks: []int{2}, BaseHash: fc.BaseHash, WorldHash: fc.WorldHash}}})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(theirs, "\n20\n", "\nworld 20\n", 1)
	if got := readFile(t, filepath.Join(src, "nums.txt")); got != want {
		t.Fatalf("the source is:\n%s\nwant:\n%s", got, want)
	}
	if len(res.Paths) != 1 || res.Paths[0].Action != "merge" {
		t.Fatalf("paths: %+v", res.Paths)
	}
}

// A World file rewritten after the hunks were picked, with the same line
// count, must not publish lines the person never saw.
func TestApplyRefusesPickOnMovedWorldFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src, merged, _, _, theirs := driftFixture(t)
	fcs, err := e.Diff(ctx, "w", DiffOptions{Paths: []string{"nums.txt"}})
	if err != nil || len(fcs) != 1 {
		t.Fatal(err)
	}
	fc := fcs[0]
	sel := diffview.NewSelection(fc.Diff, false)
	if err := sel.ToggleHunk(1); err != nil {
		t.Fatal(err)
	}
	// A session keeps writing: line 20 now says something else.
	writeFile(t, filepath.Join(merged, "nums.txt"), strings.Replace(fc.NewText(), "world 20", "rm -rf / 20", 1))
	for _, pk := range []Pick{
		{Path: "nums.txt", Selection: sel, BaseHash: fc.BaseHash, WorldHash: fc.WorldHash},
		{Path: "nums.txt", Hunks: []int{2}, BaseHash: fc.BaseHash, WorldHash: fc.WorldHash},
		{Path: "nums.txt", WorldHash: fc.WorldHash},
	} {
		_, err = e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{pk}})
		var se *StalePickError
		if !errors.As(err, &se) || !errors.Is(err, ErrStalePick) || se.Side != "world" ||
			!strings.Contains(err.Error(), "nums.txt: the World's file changed since") || !strings.Contains(err.Error(), "review the diff again") {
			t.Fatalf("pick %+v on a moved World file: %v", pk, err)
		}
		if got := readFile(t, filepath.Join(src, "nums.txt")); got != theirs {
			t.Fatalf("a refused pick wrote the source:\n%s", got)
		}
	}
}

// After part of the change lands, the base moves and the hunks renumber:
// "hunk 2" of the old diff must not silently mean another hunk.
func TestApplyRefusesPickOnMovedBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src, _, _, _, _ := driftFixture(t)
	fcs, err := e.Diff(ctx, "w", DiffOptions{Paths: []string{"nums.txt"}})
	if err != nil || len(fcs) != 1 {
		t.Fatal(err)
	}
	fc := fcs[0]
	if _, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "nums.txt", Hunks: []int{1}, BaseHash: fc.BaseHash, WorldHash: fc.WorldHash}}}); err != nil {
		t.Fatal(err)
	}
	after := readFile(t, filepath.Join(src, "nums.txt"))
	_, err = e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "nums.txt", Hunks: []int{2}, BaseHash: fc.BaseHash, WorldHash: fc.WorldHash}}})
	var se *StalePickError
	if !errors.As(err, &se) || se.Side != "base" || !strings.Contains(err.Error(), "nums.txt: the base changed since the hunks were picked") {
		t.Fatalf("pick on a moved base: %v", err)
	}
	if got := readFile(t, filepath.Join(src, "nums.txt")); got != after {
		t.Fatalf("a refused pick wrote the source:\n%s", got)
	}
	// Picked again on the new diff, it applies.
	fcs, err = e.Diff(ctx, "w", DiffOptions{Paths: []string{"nums.txt"}})
	if err != nil || len(fcs) != 1 {
		t.Fatal(err)
	}
	if fcs[0].BaseHash == fc.BaseHash {
		t.Fatal("the base hash did not move with the publication")
	}
}

// A teammate reverts an applied change in the source: applying the World
// again merges to the source's own version, and says it does nothing
// instead of reporting a merge while the source stays as it is.
func TestApplyAfterTheSourceRevertedAnApplySaysNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	base, _ := lineFiveEdited(t, e, src, "f.txt", 30)
	if _, err := e.CaptureBases(ctx, mustWorld(t, e, "w"), mustChanges(t, e, "w")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "f.txt"), base) // git checkout .
	fcs, err := e.Diff(ctx, "w", DiffOptions{Paths: []string{"f.txt"}})
	if err != nil || len(fcs) != 0 {
		t.Fatalf("the World has nothing beyond its base: %v %+v", err, fcs)
	}
	fcs, err = e.Diff(ctx, "w", DiffOptions{Paths: []string{"f.txt"}, Against: "source"})
	if err != nil || len(fcs) != 1 || !fcs[0].Drift {
		t.Fatalf("against source: %v %+v", err, fcs)
	}
	res, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "f.txt"}}})
	if err != nil || len(res.Paths) != 1 || res.Paths[0].Action != "nothing" {
		t.Fatalf("apply after the revert: %v %+v", err, res)
	}
	if got := readFile(t, filepath.Join(src, "f.txt")); got != base {
		t.Fatalf("the source changed:\n%s", got)
	}
}
