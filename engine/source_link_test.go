package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/overlay"
)

// A World's source moved away and a symlink to a decoy (or to another
// tree) took its place: exec, apply, rollback and fork refuse, naming the
// source and where it now leads, and nothing is written to the decoy or to
// the real source. Before, exec mounted the decoy as the World's lower and
// apply published into it.
func TestSourceReplacedBySymlinkIsRefused(t *testing.T) {
	e, src := testEngine(t)
	ctx := context.Background()
	if _, err := e.Create(ctx, CreateOptions{Name: "w", Source: src, MountBackend: overlay.BackendKernel}); err != nil {
		t.Fatal(err)
	}
	if out, code := execIn(t, e, "w", IsolationSandbox, "echo edit > "+src+"/new.txt"); code != 0 {
		t.Fatal(out)
	}
	if _, err := e.Snapshot(ctx, "w", SnapshotOptions{Message: "one"}); err != nil {
		t.Fatal(err)
	}
	w0, _ := e.World("w")
	if err := e.unmountLocked(ctx, w0); err != nil {
		t.Fatal(err)
	}
	decoy := filepath.Join(filepath.Dir(src), "decoy")
	if err := os.MkdirAll(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(src, src+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(decoy, src); err != nil {
		t.Fatal(err)
	}
	beforeD, beforeR := snapshotDir(t, decoy), snapshotDir(t, src+".real")
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrSourceMissing) || !strings.Contains(err.Error(), decoy) {
			t.Errorf("%s with the source -> %s: %v, want a refusal naming where it leads", what, decoy, err)
		}
	}
	_, err := e.Exec(ctx, "w", ExecOptions{Argv: []string{"/bin/true"}, Env: []string{defaultPath}, Isolation: IsolationSandbox, Network: boundary.NetworkNone})
	refused("exec", err)
	_, err = e.Apply(ctx, "w", ApplyOptions{})
	refused("apply", err)
	w, _ := e.World("w")
	refused("CheckSource", e.CheckSource(w))
	_, err = e.Fork(ctx, "w", ForkOptions{N: 1})
	refused("fork", err)
	if got := snapshotDir(t, decoy); got != beforeD {
		t.Errorf("the decoy was written:\n%s", got)
	}
	if got := snapshotDir(t, src+".real"); got != beforeR {
		t.Errorf("the real source was written:\n%s", got)
	}
	// Put back, everything works again.
	_ = os.Remove(src)
	if err := os.Rename(src+".real", src); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "w", ApplyOptions{}); err != nil {
		t.Fatalf("apply after the source is back: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(src, "new.txt")); err != nil || string(b) != "edit\n" {
		t.Fatalf("new.txt in the source = %q, %v", b, err)
	}
}
