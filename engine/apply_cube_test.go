package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/cube/cubetest"
)

// A cube World takes on a merge too: its sandbox sees the merged result
// afterwards, and applying everything again keeps the source's line.
func TestCubeApplyMergeStaysMerged(t *testing.T) {
	t.Parallel()
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

// A cube session holding a picked file open for writing in its sandbox makes
// apply refuse, naming it; nothing reaches the source.
func TestCubeApplyRefusesFileOpenForWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ce := newCubeEnv(t, cubetest.Options{})
	ce.create("w", CreateOptions{})
	meta, err := ce.e.Exec(ctx, "w", ExecOptions{Argv: []string{"sh", "-c", "exec 3>>held.txt; echo partial >&3; touch ready; exec sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ce.e.Kill(context.Background(), "w", meta.ID, syscall.SIGKILL) })
	deadline := time.Now().Add(10 * time.Second)
	for !fileExists(filepath.Join(ce.e.Paths.Upper("w"), "ready")) {
		if time.Now().After(deadline) {
			t.Fatal("the session never got ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}})
	if !errors.Is(err, ErrWorldWriting) || !strings.Contains(err.Error(), "session "+meta.ID+" is still writing held.txt") {
		t.Fatalf("apply of a file a cube session holds open for writing: %v", err)
	}
	if fileExists(filepath.Join(ce.src, "held.txt")) {
		t.Fatal("held.txt reached the source")
	}
	// The sandbox's other files are no obstacle.
	if _, err := ce.e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "ready"}}}); err != nil {
		t.Fatal(err)
	}
}
