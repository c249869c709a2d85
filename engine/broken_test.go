package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A broken World's bases are what its diff and apply will need once its
// world.toml is fixed: gc must not drop them while it is there.
func TestGCKeepsBrokenWorldBases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := testEngine(t)
	w, err := e.Create(ctx, CreateOptions{Name: "w", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Paths.Upper("w"), "d0", "f0.txt"), []byte("changed\n"), 0o644); err == nil {
		t.Fatal("upper has no d0 yet; expected the write to fail")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(e.Paths.Upper("w"), "d0"), 0o755))
	must(os.WriteFile(filepath.Join(e.Paths.Upper("w"), "d0", "f0.txt"), []byte("changed\n"), 0o644))
	cs, err := e.Changes(ctx, w, false)
	must(err)
	if n, err := e.CaptureBases(ctx, w, cs); err != nil || n == 0 {
		t.Fatalf("capture bases: %d, %v", n, err)
	}
	objs := e.bases("w").Objects()
	if len(objs) == 0 {
		t.Fatal("no base objects")
	}
	must(os.WriteFile(e.Paths.WorldFile("w"), []byte("id = 1\n"), 0o644))

	if _, err := e.World("w"); !errors.Is(err, ErrWorldBroken) {
		t.Fatalf("World of a broken world.toml: %v", err)
	}
	if ws, _ := e.Worlds(); len(ws) != 0 {
		t.Fatalf("Worlds lists a broken World as usable: %v", ws)
	}
	if bs, _ := e.BrokenWorlds(); len(bs) != 1 || bs[0].Name != "w" {
		t.Fatalf("BrokenWorlds: %v", bs)
	}
	st, err := e.store()
	must(err)
	st.GCGrace = -1
	if _, err := e.GC(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range objs {
		if _, err := os.Stat(st.Path(id)); err != nil {
			t.Errorf("gc dropped base object %s of a broken World: %v", id, err)
		}
	}
	res, err := e.Remove(ctx, "w", RemoveOptions{Purge: true})
	if err != nil || !res.Purged || res.Broken == "" {
		t.Fatalf("remove --purge of a broken World: %+v, %v", res, err)
	}
	if _, err := os.Lstat(e.Paths.World("w")); !os.IsNotExist(err) {
		t.Fatalf("purge left %s: %v", e.Paths.World("w"), err)
	}
}
