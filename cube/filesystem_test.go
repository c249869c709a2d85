package cube_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

func TestFilesystemRPCs(t *testing.T) {
	_, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	if _, err := c.MakeDir(ctx, sb, "/tmp/fs/a/b"); err != nil {
		t.Fatalf("make dir: %v", err)
	}
	if _, err := c.MakeDir(ctx, sb, "/tmp/fs/a/b"); !errors.Is(err, cube.ErrConflict) {
		t.Errorf("make an existing dir: %v, want ErrConflict", err)
	}
	if err := c.WriteFile(ctx, sb, "/tmp/fs/a/f.txt", []byte("12345")); err != nil {
		t.Fatal(err)
	}
	e, err := c.Stat(ctx, sb, "/tmp/fs/a/f.txt")
	if err != nil || e.Type != cube.EntryFile || e.Size != 5 || e.Name != "f.txt" || e.Path != "/tmp/fs/a/f.txt" || e.ModifiedTime.IsZero() {
		t.Fatalf("stat = %+v, %v", e, err)
	}
	list, err := c.ListDir(ctx, sb, "/tmp/fs", 3)
	if err != nil || len(list) != 3 {
		t.Fatalf("list = %+v, %v; want a, a/b, a/f.txt", list, err)
	}
	moved, err := c.Move(ctx, sb, "/tmp/fs/a/f.txt", "/tmp/fs/g.txt")
	if err != nil || moved.Path != "/tmp/fs/g.txt" {
		t.Fatalf("move = %+v, %v", moved, err)
	}
	if _, err := c.Stat(ctx, sb, "/tmp/fs/a/f.txt"); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("stat the moved-away path: %v, want ErrNotFound", err)
	}
	if err := c.Remove(ctx, sb, "/tmp/fs"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, sb, "/tmp/fs"); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("remove twice: %v, want ErrNotFound", err)
	}
}
