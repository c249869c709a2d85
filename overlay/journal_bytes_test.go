package overlay

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// A publication of names that are not UTF-8 crashes at every step; recovery
// must finish it (or undo it) under the exact bytes: a journal that wrote
// the names lossily (a\xff and a\xfe both as a\ufffd) would roll forward
// under the wrong name or leave temps behind.
func TestPublishCrashNonUTF8NamesRecoverExactly(t *testing.T) {
	ctx := context.Background()
	tree := map[string]string{
		"a\xfe":   "old-fe",
		"b\xff":   "bye",
		"d\xff/x": "x",
		"l\xfe":   "-> a\xfe",
	}
	ops := []PublishOp{
		{Path: "a\xff", Kind: OpWrite, Data: []byte("new-ff")},
		{Path: "a\xfe", Kind: OpWrite, Data: []byte("new-fe"), ExpectHash: sha256Hex([]byte("old-fe"))},
		{Path: "b\xff", Kind: OpDelete},
		{Path: "d\xff/y\xfe", Kind: OpWrite, Data: []byte("y")},
		{Path: "l\xfe", Kind: OpSymlink, Target: "a\xff"},
	}
	base := t.TempDir()
	oldRoot, newRoot := filepath.Join(base, "old"), filepath.Join(base, "new")
	pubWriteTree(t, oldRoot, tree)
	pubWriteTree(t, newRoot, tree)
	oldHash := pubTreeHash(t, oldRoot)
	var maxStep atomic.Int64
	publishHook = func(step int) { maxStep.Store(max(maxStep.Load(), int64(step))) }
	_, err := Publish(ctx, newRoot, filepath.Join(base, "j-new"), ops, PublishOptions{})
	publishHook = nil
	if err != nil {
		t.Fatal(err)
	}
	total := int(maxStep.Load())
	newHash := pubTreeHash(t, newRoot)
	outcomes := map[string]int{}
	for k := 1; k <= total; k++ {
		dir := filepath.Join(base, "r")
		root, journal := filepath.Join(dir, "root"), filepath.Join(dir, "journal")
		_ = os.RemoveAll(dir)
		pubWriteTree(t, root, tree)
		if !publishCrashingAt(t, k, func() { _, _ = Publish(ctx, root, journal, ops, PublishOptions{}) }) {
			t.Fatalf("step %d: no crash", k)
		}
		if _, err := Recover(ctx, journal, []string{root}); err != nil {
			t.Fatalf("crash at step %d: recover: %v", k, err)
		}
		switch pubTreeHash(t, root) {
		case oldHash:
			outcomes["old"]++
		case newHash:
			outcomes["new"]++
		default:
			t.Fatalf("crash at step %d of %d: tree is neither old nor new:\n%s", k, total, pubDiffStates(pubTreeState(t, newRoot), pubTreeState(t, root)))
		}
		pubAssertClean(t, root, journal)
	}
	t.Logf("%d crash points: %v", total, outcomes)
	if outcomes["new"] == 0 {
		t.Errorf("no crash point was rolled forward: %v", outcomes)
	}
}
