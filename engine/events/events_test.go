package events

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Lines appended by many writers at once never interleave, and a torn last
// line (a writer killed mid-line) is not read until it is complete.
func TestAppendConcurrentAndTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "activity.jsonl")
	var wg sync.WaitGroup
	const writers, each = 8, 50
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := Append(path, Event{Type: SessionEnded, World: fmt.Sprint("w", w), Session: fmt.Sprint(i)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	evs, off, err := Read(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != writers*each {
		t.Fatalf("read %d events, want %d", len(evs), writers*each)
	}
	for _, ev := range evs {
		if ev.Type != SessionEnded || ev.Time.IsZero() {
			t.Fatalf("event %+v: want type %s and a time", ev, SessionEnded)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"type":"world.cre`); err != nil {
		t.Fatal(err)
	}
	more, off2, err := Read(path, off)
	if err != nil || len(more) != 0 || off2 != off {
		t.Fatalf("torn tail: got %d events at %d (err %v), want none at %d", len(more), off2, err, off)
	}
	if _, err := f.WriteString(`ated","world":"x"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	more, _, err = Read(path, off)
	if err != nil || len(more) != 1 || more[0].Type != WorldCreated || more[0].World != "x" {
		t.Fatalf("completed tail: got %+v (err %v), want one world.created of x", more, err)
	}
}

// A log that does not exist yet has no events and is not an error.
func TestReadMissing(t *testing.T) {
	evs, off, err := Read(filepath.Join(t.TempDir(), "none.jsonl"), 0)
	if err != nil || len(evs) != 0 || off != 0 {
		t.Fatalf("missing log: %v %d %v", evs, off, err)
	}
}
