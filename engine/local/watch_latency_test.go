package local

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/provlog"
)

// A short command's end does not wait for the watcher to finish watching a
// big upper: the walk that adds a watch per upper directory runs off the
// start path and, once the session's processes are gone, stops where it is
// (the end walk looks at every directory anyway). It used to run to the
// end first, so every `strata exec W -- true` in a World with many changed
// directories paid a watch per directory and a walk of the whole upper
// before its end was recorded. Nothing is lost: a file written in a
// directory that never got its watch is recorded by the end walk.
func TestWatcherFinishStopsTheWatchWalk(t *testing.T) {
	f := newWatchFixture(t)
	const dirs = 6000
	for i := range dirs {
		if err := os.MkdirAll(filepath.Join(f.merged, "many", fmt.Sprintf("d%04d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	last := filepath.Join(f.merged, "many", fmt.Sprintf("d%04d", dirs-1), "f.txt")
	writeFile(t, last, "before the session\n")
	time.Sleep(3 * CtimeSlack)
	spec := f.spec()
	spec.MaxWatches = 2 * dirs // the bound plays no part here
	w, err := openUpperWatch(spec, "s-walk")
	if err != nil {
		t.Fatal(err)
	}
	// Written by the session in a directory the watch walk reaches last.
	writeFile(t, last, "by the session\n")
	w.start()
	w.finish()
	if len(w.dirs) >= dirs {
		t.Errorf("finish waited for the watch walk: %d directories watched of %d", len(w.dirs), dirs+2)
	}
	got := provOf(t, f, "s-walk")
	rel := filepath.Join("many", fmt.Sprintf("d%04d", dirs-1), "f.txt")
	if r, ok := got[rel]; !ok || r.Op != provlog.OpCreate {
		// Absent from the source: a write to it is a "create".
		t.Errorf("%s: recorded %+v (%v), want a create: the end walk must cover unwatched directories", rel, r, ok)
	}
	if _, ok := got[filepath.Join("many", "d0000")]; ok {
		t.Errorf("many/d0000 recorded, but this session never wrote it")
	}
}
