package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/overlay/mount"
)

// A listing reads the mount table once, not once per World: with one overlay
// per mounted World the kernel formats a table that grows with the Worlds on
// every read, so a read per World made `strata ls` of 100 Worlds take a
// second. The answers stay those of Info, World by World, in order: which
// are mounted, their changes, and the broken World after the rest. Not
// parallel: the read counter is the process's.
func TestInfosReadMountTableOnce(t *testing.T) {
	ctx := context.Background()
	e, src := testEngine(t)
	const n = 12
	for i := range n {
		name := fmt.Sprintf("w%02d", i)
		if i%2 == 0 {
			merged := mountedWorld(t, e, src, name)
			for j := range i / 2 {
				if err := os.WriteFile(filepath.Join(merged, fmt.Sprintf("new%d", j)), []byte("x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		} else if _, err := e.Create(ctx, CreateOptions{Name: name, Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Create(ctx, CreateOptions{Name: "zz-broken", Source: src}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.Paths.WorldFile("zz-broken"), []byte("id = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, broken, err := e.Listing("")
	if err != nil || len(ws) != n || len(broken) != 1 {
		t.Fatalf("Listing: %d Worlds, %d broken, %v; want %d, 1", len(ws), len(broken), err, n)
	}

	before := mount.TableReads()
	infos := e.Infos(ctx, ws, broken)
	if reads := mount.TableReads() - before; reads != 1 {
		t.Errorf("Infos of %d Worlds and a broken one read /proc/self/mountinfo %d times, want 1", n, reads)
	}

	if len(infos) != n+1 {
		t.Fatalf("Infos: %d rows, want %d", len(infos), n+1)
	}
	for i, wi := range infos[:n] {
		want := e.Info(ctx, ws[i])
		if wi.Name != want.Name || wi.Mounted != want.Mounted || wi.Changes != want.Changes || wi.Status != want.Status {
			t.Errorf("row %d: Infos says %s mounted=%v changes=%d %s; Info says %s mounted=%v changes=%d %s",
				i, wi.Name, wi.Mounted, wi.Changes, wi.Status, want.Name, want.Mounted, want.Changes, want.Status)
		}
		if wantMounted := i%2 == 0; wi.Mounted != wantMounted || wi.Changes != i/2*(i%2^1) {
			t.Errorf("%s: mounted=%v changes=%d, want mounted=%v changes=%d", wi.Name, wi.Mounted, wi.Changes, wantMounted, i/2*(i%2^1))
		}
	}
	if b := infos[n]; b.Name != "zz-broken" || b.Status != string(StateBroken) {
		t.Errorf("last row: %s %s, want zz-broken broken", b.Name, b.Status)
	}
}
