package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
)

// TestForwardGathersSessionOutput: many sessions printing at once reach the
// program as a few messages a second, not one per write (Bubble Tea draws
// the whole screen after every message: 100 sessions printing 10 lines a
// second made that 1,000 screens a second), and no session's output is
// lost: every session that wrote is in a message after its last write.
func TestForwardGathersSessionOutput(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	const sessions = 40
	newWorld(t, eng, src, "w1", "")
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%02d", i)
		if err := os.MkdirAll(eng.SessionDir("w1", ids[i]), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	outputMsgs := 0
	got := map[string]time.Time{} // session: when its output last reached the program
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := tea.NewProgram(quietModel{}, tea.WithContext(ctx), tea.WithInput(bytes.NewReader(nil)), tea.WithOutput(io.Discard),
		tea.WithoutSignals(), tea.WithWindowSize(80, 24),
		tea.WithFilter(func(_ tea.Model, msg tea.Msg) tea.Msg {
			var evs []engine.Event
			switch m := msg.(type) {
			case eventMsg:
				evs = []engine.Event{engine.Event(m)}
			case eventsMsg:
				evs = m
			}
			mu.Lock()
			defer mu.Unlock()
			counted := false
			for _, ev := range evs {
				if ev.Type != engine.EventSessionOutput {
					continue
				}
				if !counted {
					outputMsgs++
					counted = true
				}
				got[ev.Session] = time.Now()
			}
			return msg
		}))
	if err := Forward(ctx, eng, p); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := p.Run(); done <- err }()
	defer func() { p.Quit(); <-done }()
	time.Sleep(200 * time.Millisecond) // the watches are in place
	files := make([]*os.File, sessions)
	for i, id := range ids {
		f, err := os.OpenFile(filepath.Join(eng.SessionDir("w1", id), "transcript"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	// Every session writes a line each 10 ms for a second.
	const span = time.Second
	start := time.Now()
	for n := 0; time.Since(start) < span; n++ {
		for i, f := range files {
			if _, err := fmt.Fprintf(f, "%s line %d\n", ids[i], n); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	lastWrite := time.Now()
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	elapsed := lastWrite.Sub(start)
	t.Logf("%d sessions writing for %v: %d messages carrying output", sessions, elapsed.Round(time.Millisecond), outputMsgs)
	// 30 frames a second, and a few more for the gathering's edges.
	if limit := int(elapsed.Seconds()*30) + 10; outputMsgs > limit {
		t.Errorf("%d messages carried session output in %v, want at most %d (about one a frame)", outputMsgs, elapsed.Round(time.Millisecond), limit)
	}
	for _, id := range ids {
		if at, ok := got[id]; !ok {
			t.Errorf("session %s's output never reached the program", id)
		} else if at.Before(lastWrite.Add(-100 * time.Millisecond)) {
			t.Errorf("session %s's last output reached the program %v before its last write: the end of its output was dropped", id, lastWrite.Sub(at))
		}
	}
}

// TestForwardKeepsOrder: output gathered before another event is sent
// before it (a session's last lines, then its end); a lone output event is
// not held once the window passes; nothing is dropped when events close.
func TestForwardKeepsOrder(t *testing.T) {
	events := make(chan engine.Event)
	var mu sync.Mutex
	var sent []tea.Msg
	done := make(chan struct{})
	go func() {
		forward(events, func(m tea.Msg) { mu.Lock(); sent = append(sent, m); mu.Unlock() }, 20*time.Millisecond)
		close(done)
	}()
	out := func(w, s string) engine.Event {
		return engine.Event{Type: engine.EventSessionOutput, World: w, Session: s}
	}
	events <- out("w1", "a")
	events <- out("w1", "a")
	events <- out("w1", "b")
	events <- engine.Event{Type: engine.EventSessionEnded, World: "w1", Session: "a"}
	events <- out("w2", "c")
	time.Sleep(200 * time.Millisecond) // the window passes with nothing more
	mu.Lock()
	n := len(sent)
	mu.Unlock()
	events <- out("w3", "d")
	close(events)
	<-done
	if n != 3 {
		t.Fatalf("%d messages before the last event, want 3 (batch, end, the lone output after its window): %#v", n, sent)
	}
	want := []string{"batch w1/a w1/b", "event session.ended w1/a", "batch w2/c", "batch w3/d"}
	if len(sent) != len(want) {
		t.Fatalf("sent %#v, want %v", sent, want)
	}
	for i, m := range sent {
		var s string
		switch m := m.(type) {
		case eventsMsg:
			s = "batch"
			for _, ev := range m {
				s += " " + ev.World + "/" + ev.Session
			}
		case eventMsg:
			s = "event " + string(m.Type) + " " + m.World + "/" + m.Session
		}
		if s != want[i] {
			t.Errorf("message %d: %q, want %q", i, s, want[i])
		}
	}
}

// quietModel draws nothing: the test counts messages, not frames.
type quietModel struct{}

func (quietModel) Init() tea.Cmd                         { return nil }
func (q quietModel) Update(tea.Msg) (tea.Model, tea.Cmd) { return q, nil }
func (quietModel) View() tea.View                        { return tea.NewView("") }
