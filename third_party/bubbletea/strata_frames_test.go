package tea

// Tests for the strata patch (PATCHES.md): the renderer goroutine sleeps
// until a frame is requested, and coalesces bursts to at most fps frames.

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// countingRenderer counts the renderer goroutine's flushes.
type countingRenderer struct {
	nilRenderer
	flushes atomic.Int64
}

func (r *countingRenderer) flush(bool) error {
	r.flushes.Add(1)
	return nil
}

type frameModel struct{ n int }

type bumpMsg struct{}

func (m frameModel) Init() Cmd { return nil }

func (m frameModel) Update(msg Msg) (Model, Cmd) {
	if _, ok := msg.(bumpMsg); ok {
		m.n++
	}
	return m, nil
}

func (m frameModel) View() View { return NewView("frame " + strconv.Itoa(m.n)) }

func startFrames(t *testing.T) (*Program, *countingRenderer) {
	t.Helper()
	var in, out bytes.Buffer
	r := &countingRenderer{}
	p := NewProgram(frameModel{}, WithInput(&in), WithOutput(&out), WithFPS(60))
	p.renderer = r
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := p.Run(); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() {
		p.Quit()
		<-done
	})
	return p, r
}

func TestRendererSleepsWhenIdle(t *testing.T) {
	_, r := startFrames(t)
	time.Sleep(200 * time.Millisecond) // start-up: first frame and the initial messages
	before := r.flushes.Load()
	time.Sleep(500 * time.Millisecond) // 30 frame intervals at 60 fps
	if n := r.flushes.Load() - before; n != 0 {
		t.Errorf("idle program flushed %d times in 500ms; want 0", n)
	}
}

func TestRendererWakesOnChange(t *testing.T) {
	p, r := startFrames(t)
	time.Sleep(200 * time.Millisecond)
	before := r.flushes.Load()
	p.Send(bumpMsg{})
	deadline := time.Now().Add(2 * time.Second)
	for r.flushes.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("a changed view was never flushed")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRendererCoalescesBursts(t *testing.T) {
	p, r := startFrames(t)
	time.Sleep(200 * time.Millisecond)
	before := r.flushes.Load()
	start := time.Now()
	for range 2000 {
		p.Send(bumpMsg{})
	}
	time.Sleep(100 * time.Millisecond)
	elapsed := time.Since(start)
	n := r.flushes.Load() - before
	// At most one frame per 1/60 s, plus the leading frame.
	if limit := int64(elapsed/(time.Second/60)) + 1; n > limit || n == 0 {
		t.Errorf("2000 updates in %v gave %d flushes; want 1..%d", elapsed, n, limit)
	}
}
