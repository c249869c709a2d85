package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A conflict resolved by hand is what the World holds afterwards: applying
// everything again keeps the resolution instead of publishing the World's
// side of the conflict over it.
func TestApplyResolutionStaysResolved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	base, merged := lineFiveEdited(t, e, src, "r.txt", 20)
	writeFile(t, filepath.Join(merged, "other.txt"), "other\n")
	if _, err := e.Apply(ctx, "w", ApplyOptions{DryRun: true}); err != nil { // captures the bases
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "r.txt"), strings.Replace(base, "line 5\n", "person 5\n", 1))
	_, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "r.txt"}}})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 {
		t.Fatalf("want a conflict: %v", err)
	}
	resolution := strings.Replace(base, "line 5\n", "world and person 5\n", 1)
	res, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "r.txt", Resolved: []byte(resolution), TheirsHash: ce.Conflicts[0].TheirsHash}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(src, "r.txt")); got != resolution {
		t.Fatalf("the resolution was not published: %+v\n%s", res.Paths, got)
	}
	if got := readFile(t, filepath.Join(merged, "r.txt")); got != resolution {
		t.Fatalf("the World does not hold the resolution:\n%s", got)
	}
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(src, "r.txt")); got != resolution {
		t.Fatalf("applying everything after the resolution undid it:\n%s", got)
	}
	if got := readFile(t, filepath.Join(src, "other.txt")); got != "other\n" {
		t.Fatalf("other.txt = %q", got)
	}
}

// A merge of some hunks only: the World keeps its unpicked hunks and takes
// on the source's edit, so applying the rest later neither loses the
// source's line nor the World's.
func TestApplyPartialMergeKeepsBothSides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	base := lines(1, 30, func(i int) string { return fmt.Sprint("line ", i) })
	writeFile(t, filepath.Join(src, "p.txt"), base)
	time.Sleep(10 * time.Millisecond)
	merged := mountedWorld(t, e, src, "w")
	world := strings.NewReplacer("line 2\n", "world 2\n", "line 28\n", "world 28\n").Replace(base)
	writeFile(t, filepath.Join(merged, "p.txt"), world)
	if _, err := e.Apply(ctx, "w", ApplyOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "p.txt"), strings.Replace(base, "line 15\n", "person 15\n", 1))
	if _, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "p.txt", Hunks: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("line 2\n", "world 2\n", "line 15\n", "person 15\n").Replace(base)
	if got := readFile(t, filepath.Join(src, "p.txt")); got != want {
		t.Fatalf("hunk 1 merged:\n%s", got)
	}
	all := strings.NewReplacer("line 2\n", "world 2\n", "line 15\n", "person 15\n", "line 28\n", "world 28\n").Replace(base)
	if got := readFile(t, filepath.Join(merged, "p.txt")); got != all {
		t.Fatalf("the World holds:\n%s\nwant its unpicked hunk and the source's edit:\n%s", got, all)
	}
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(src, "p.txt")); got != all {
		t.Fatalf("applying the rest:\n%s\nwant\n%s", got, all)
	}
}
