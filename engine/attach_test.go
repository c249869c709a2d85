package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is an io.Writer safe to read while Attach writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// reattachResized attaches to a PTY session again with a replay (which must
// show seen), resizes it to 40x100 and waits for that in the transcript,
// types input, and waits for the session to end, which must end the attach
// without an error. It returns what the client got.
func reattachResized(ctx context.Context, t *testing.T, dir, seen, input string) *syncBuffer {
	t.Helper()
	in, feed := io.Pipe()
	defer feed.Close()
	out := &syncBuffer{}
	resize := make(chan WinSize, 1)
	done := make(chan error, 1)
	go func() { done <- Attach(ctx, dir, in, out, AttachOptions{Replay: true, Resize: resize}) }()
	waitFor(t, "the replayed screen", func() bool { return strings.Contains(out.String(), seen) })
	resize <- WinSize{Rows: 40, Cols: 100}
	waitFor(t, "the resize in the transcript", func() bool {
		records, _, _ := ReadTranscript(filepath.Join(dir, TranscriptFile), 0)
		for _, r := range records {
			if ws, ok := r.WinSize(); ok && ws == (WinSize{Rows: 40, Cols: 100}) {
				return true
			}
		}
		return false
	})
	_, _ = feed.Write([]byte(input))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Attach at the session's end returned %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Attach did not return when the session ended")
	}
	return out
}

func TestSessionTTYAttachDetach(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "tty")
	spec := w.sh(`read a; echo "got:$a"; read b; echo "got2:$b"; stty size; [ -t 0 ] && echo is-tty`)
	spec.TTY = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, err := StartSession(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(w.worldDir(), "sessions", meta.ID)

	in1, feed1 := io.Pipe()
	defer feed1.Close()
	out1 := &syncBuffer{}
	done1 := make(chan error, 1)
	go func() { done1 <- Attach(ctx, dir, in1, out1, AttachOptions{}) }()
	feed1.Write([]byte("hello\r"))
	waitFor(t, "the answer to the first input", func() bool { return strings.Contains(out1.String(), "got:hello") })
	if !strings.Contains(out1.String(), "hello\r\n") {
		t.Errorf("no terminal echo of the input: %q", out1.String())
	}
	feed1.Write([]byte{0x1d})
	if err := <-done1; !errors.Is(err, ErrDetached) {
		t.Fatalf("detach key: Attach returned %v, want ErrDetached", err)
	}
	if m, _ := ReadSessionMeta(dir); m.State != SessionRunning {
		t.Fatalf("after detaching the session is %s, want running", m.State)
	}

	out2 := reattachResized(ctx, t, dir, "got:hello", "bye\r")
	for _, want := range []string{"got2:bye", "40 100", "is-tty"} {
		if !strings.Contains(out2.String(), want) {
			t.Errorf("attached output lacks %q: %q", want, out2.String())
		}
	}
	m, err := WaitSession(ctx, dir)
	if err != nil || m.State != SessionExited {
		t.Fatalf("session end: %v %s", err, m.State)
	}
	// The transcript holds the whole terminal output.
	var pty strings.Builder
	records, _, _ := ReadTranscript(filepath.Join(dir, TranscriptFile), 0)
	for _, r := range records {
		if r.Stream == StreamPTY {
			pty.Write(r.Data)
		}
	}
	for _, want := range []string{"hello", "got:hello", "got2:bye"} {
		if !strings.Contains(pty.String(), want) {
			t.Errorf("transcript lacks %q: %q", want, pty.String())
		}
	}
	// Attaching to an ended session replays its screen and returns nil.
	out3 := &syncBuffer{}
	if err := Attach(ctx, dir, strings.NewReader(""), out3, AttachOptions{Replay: true}); err != nil || !strings.Contains(out3.String(), "got2:bye") {
		t.Errorf("attach after the end: %v %q", err, out3.String())
	}
}

func TestAttachNonTTY(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "notty")
	r := runSession(t, w.sh("true"))
	err := Attach(context.Background(), filepath.Join(w.worldDir(), "sessions", r.meta.ID), strings.NewReader(""), io.Discard, AttachOptions{})
	if !errors.Is(err, ErrNotTTY) {
		t.Errorf("Attach to a non-TTY session: %v, want ErrNotTTY", err)
	}
}
