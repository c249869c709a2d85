package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/session"
)

// writerVersion is version n of the racing writer's file: "v<n>\n" repeated
// and cut at size, as `yes v<n> | head -c size` writes it.
func writerVersion(n, size int) []byte {
	line := []byte("v" + strconv.Itoa(n) + "\n")
	return bytes.Repeat(line, size/len(line)+1)[:size]
}

// checkWhole reports whether data is exactly one complete writer version of
// the given size.
func checkWhole(data []byte, size int) (int, bool) {
	line, _, ok := bytes.Cut(data, []byte("\n"))
	if !ok || len(line) < 2 || line[0] != 'v' {
		return 0, false
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil {
		return 0, false
	}
	return n, bytes.Equal(data, writerVersion(n, size))
}

// A session rewrites a 3 MB file in a loop while the person applies it again
// and again: every apply publishes one complete version the writer wrote, or
// refuses, naming the path and the session writing it. Never a torn, short or
// empty file reported as a success. At 12 MB the file is streamed from the
// World into the publication after the pause: a version written meanwhile
// fails the hash check and the apply captures again.
func TestApplyRacingWriterPublishesWholeVersions(t *testing.T) {
	t.Parallel()
	for _, size := range []int{3_000_000, 12_000_000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) { testApplyRacingWriter(t, size) })
	}
}

func testApplyRacingWriter(t *testing.T, versionSize int) {
	ctx := context.Background()
	e, src := evidenceEngine(t)
	merged := mountedWorld(t, e, src, "w")
	meta := startScript(t, e, "w", `n=0; while :; do n=$((n+1)); yes "v$n" | head -c `+strconv.Itoa(versionSize)+` > f.bin; sleep 0.01; done`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := os.Stat(filepath.Join(merged, "f.bin")); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never wrote f.bin")
		}
		time.Sleep(5 * time.Millisecond)
	}
	published, refused, same := map[int]bool{}, 0, 0
	for i := 0; i < 24; i++ {
		res, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "f.bin"}}})
		if err != nil && strings.Contains(err.Error(), "the World has no change at this path") {
			// The last apply's version is still the World's (the World
			// took it on, and the writer has not rewritten it since).
			same++
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrWorldWriting) {
				t.Fatalf("apply %d: %v", i, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "session "+meta.ID+" is still writing f.bin") || !strings.Contains(msg, "then apply again") {
				t.Fatalf("apply %d: the refusal does not name the path and the session: %v", i, err)
			}
			refused++
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, "f.bin"))
		if err != nil {
			t.Fatal(err)
		}
		n, ok := checkWhole(data, versionSize)
		if !ok {
			t.Fatalf("apply %d reported %+v but published a torn version: %d bytes, first line %q", i, res.Paths, len(data), firstLine(data))
		}
		published[n] = true
	}
	t.Logf("24 applies racing the writer: %d published whole (%d distinct versions), %d refused, %d found the World as the last apply left it", 24-refused-same, len(published), refused, same)
	if len(published) == 0 {
		t.Fatal("no apply published anything: the race says nothing")
	}
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	if len(line) > 20 {
		line = line[:20]
	}
	return string(line)
}

// A session holding a picked file open for writing (a log, an editor, a
// writer between two writes) makes apply refuse after its retries, naming
// the path and the session; a file open only for reading does not.
func TestApplyRefusesFileOpenForWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, src := evidenceEngine(t)
	merged := mountedWorld(t, e, src, "w")
	meta := startScript(t, e, "w", `printf 'half of a ' > held.txt; echo done > read.txt; exec 3>>held.txt 4<read.txt; touch ready; exec sleep 60`)
	deadline := time.Now().Add(10 * time.Second)
	for !fileExists(filepath.Join(merged, "ready")) {
		if time.Now().After(deadline) {
			t.Fatal("the session never got ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	_, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}, {Path: "read.txt"}}})
	var we *WritingError
	if !errors.As(err, &we) || !errors.Is(err, ErrWorldWriting) {
		t.Fatalf("apply of a file held open for writing: %v", err)
	}
	if len(we.Paths) != 1 || we.Paths[0].Path != "held.txt" || len(we.Paths[0].Sessions) != 1 || we.Paths[0].Sessions[0] != meta.ID {
		t.Fatalf("writers: %+v", we.Paths)
	}
	want := "session " + meta.ID + " is still writing held.txt; wait for it or stop it"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	t.Logf("refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
	for _, rel := range []string{"held.txt", "read.txt"} {
		if _, err := os.Lstat(filepath.Join(src, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s reached the source of a refused apply: %v", rel, err)
		}
	}
	// Read-only is no obstacle.
	if _, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "read.txt"}}}); err != nil {
		t.Fatalf("apply of a file open only for reading: %v", err)
	}
	if got := readFile(t, filepath.Join(src, "read.txt")); got != "done\n" {
		t.Fatalf("read.txt = %q", got)
	}
}

// A session recorded as starting whose init has not written its pid yet (the
// window between the init starting the command and recording it) may already
// write a picked file: apply refuses, naming it, and nothing reaches the
// source. Once the session is known to be gone (lost: no init past the grace)
// it is no obstacle.
func TestApplyRefusesWhileSessionInitUnreported(t *testing.T) {
	ctx := context.Background()
	e, src := evidenceEngine(t)
	merged := mountedWorld(t, e, src, "w")
	writeFile(t, filepath.Join(merged, "held.txt"), "half of a ")
	id := NewSessionID()
	dir := e.SessionDir("w", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	meta := SessionMeta{ID: id, World: "w", Argv: []string{"sh"}, Source: src, Runtime: RuntimeLocal, StartedAt: time.Now(), State: SessionStarting, Attention: AttentionRunning}
	if err := session.WriteMetaPath(dir, meta); err != nil {
		t.Fatal(err)
	}
	_, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}})
	if !errors.Is(err, ErrWorldWriting) || !strings.Contains(err.Error(), "session "+id+" is still writing held.txt") {
		t.Fatalf("apply while a session's init has not reported: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(src, "held.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("held.txt reached the source: %v", err)
	}
	// Past the grace with no init, the session is lost: nothing of it runs.
	meta.StartedAt = time.Now().Add(-time.Hour)
	if err := session.WriteMetaPath(dir, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "w", ApplyOptions{Picks: []Pick{{Path: "held.txt"}}}); err != nil {
		t.Fatalf("apply once the starting session is known lost: %v", err)
	}
	if got := readFile(t, filepath.Join(src, "held.txt")); got != "half of a " {
		t.Fatalf("held.txt = %q", got)
	}
}
