package publish

import (
	"context"
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
	_, outcomes := crashSweep(t, tree, ops, func(k int, root, journal string) {
		if _, err := Recover(ctx, journal, []string{root}); err != nil {
			t.Fatalf("crash at step %d: recover: %v", k, err)
		}
	})
	if outcomes["new"] == 0 {
		t.Errorf("no crash point was rolled forward: %v", outcomes)
	}
}
