package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// A World being created is never swept by another strata's Open: its
// staging dir is locked before a sweep can see it (agent fan-out creates
// Worlds while the agents' supervisors open engines).
func TestCreateRacingSweeps(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "a.txt"), "a\n")
	e, err := Open(context.Background(), Options{StateRoot: filepath.Join(base, "state"), Config: (&Config{}).withDefaults(), Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				e.sweepStaging()
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 60 {
		if _, err := e.Create(context.Background(), CreateOptions{Name: fmt.Sprintf("w%d", i), Source: src}); err != nil {
			t.Fatalf("create %d while sweeps run: %v", i, err)
		}
	}
}
