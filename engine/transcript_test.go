package engine

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFollowTranscript follows a live session from a second reader and stops at
// its end with everything delivered, in order, streams apart.
func TestFollowTranscript(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "follow")
	meta, err := StartSession(context.Background(), w.sh(`for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; sleep 0.02; done`))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(w.worldDir(), "sessions", meta.ID)
	var out, errOut bytes.Buffer
	var times []time.Time
	err = FollowTranscript(context.Background(), dir, 0, func(r Record) error {
		times = append(times, r.Time)
		if r.Stream == StreamStdout {
			out.Write(r.Data)
		} else {
			errOut.Write(r.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "out1\nout2\nout3\nout4\nout5\n" || errOut.String() != "err1\nerr2\nerr3\nerr4\nerr5\n" {
		t.Errorf("followed stdout %q stderr %q", out.String(), errOut.String())
	}
	if !slices.IsSortedFunc(times, func(a, b time.Time) int { return a.Compare(b) }) {
		t.Errorf("record times not in order")
	}

	// A follower stops when its context does, and a callback error stops it too.
	meta, err = StartSession(context.Background(), w.sh(`echo first; sleep 5`))
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(w.worldDir(), "sessions", meta.ID)
	defer killAndWait(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var got strings.Builder
	err = FollowTranscript(ctx, dir, 0, func(r Record) error { got.Write(r.Data); return nil })
	if !errors.Is(err, context.DeadlineExceeded) || got.String() != "first\n" {
		t.Errorf("follow with deadline: %v, %q", err, got.String())
	}
	stop := errors.New("stop")
	if err := FollowTranscript(context.Background(), dir, 0, func(Record) error { return stop }); err != stop {
		t.Errorf("callback error: %v", err)
	}
}
