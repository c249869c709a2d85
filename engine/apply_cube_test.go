package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/cube/cubetest"
)

// A cube World takes on a merge too: its sandbox sees the merged result
// afterwards, and applying everything again keeps the source's line.
func TestCubeApplyMergeStaysMerged(t *testing.T) {
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	base := lines(1, 20, func(i int) string { return fmt.Sprint("line ", i) })
	writeFile(t, filepath.Join(ce.src, "m.txt"), base)
	ce.create("w", CreateOptions{})
	ce.mustSh("w", "sed -i 's/^line 15$/world 15/' m.txt && echo other > other.txt")
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ce.src, "m.txt"), strings.Replace(base, "line 3\n", "person 3\n", 1))
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "m.txt"}}}); err != nil {
		t.Fatal(err)
	}
	both := strings.NewReplacer("line 3\n", "person 3\n", "line 15\n", "world 15\n").Replace(base)
	if got := readFile(t, filepath.Join(ce.src, "m.txt")); got != both {
		t.Fatalf("merge:\n%s", got)
	}
	if got := ce.mustSh("w", "cat m.txt"); got != both {
		t.Fatalf("the sandbox sees:\n%s\nwant the merged result", got)
	}
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(ce.src, "m.txt")); got != both {
		t.Fatalf("applying everything after the merge undid it:\n%s", got)
	}
}
