package tui

import (
	"context"
	"errors"
	"fmt"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
)

// Run opens the TUI on the terminal until the person quits or ctx ends.
func Run(ctx context.Context, eng *engine.Engine, o Options) error {
	m, err := New(ctx, eng, o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sw, err := newSourceWatch(m.log())
	if err != nil {
		// The diff still follows the World's events and a reload.
		m.log().Warn("tui: cannot follow source files", "error", err)
	} else {
		m.srcWatch = sw
	}
	// At most 30 frames a second, matching the transcript's coalescing.
	// The renderer (patched: third_party/bubbletea/PATCHES.md) sleeps
	// while the view does not change.
	p := tea.NewProgram(*m, tea.WithContext(ctx), tea.WithFPS(30))
	if err := Forward(ctx, eng, p); err != nil {
		return err
	}
	if sw != nil {
		go sw.run(ctx, p.Send)
	}
	_, err = p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tui: %w", err)
	}
	return nil
}

// Forward subscribes to the engine's events and sends them to the program
// from one goroutine, until ctx ends. Nothing is sent when nothing happens:
// the TUI has no timer of its own.
func Forward(ctx context.Context, eng *engine.Engine, p *tea.Program) error {
	events, err := eng.Subscribe(ctx)
	if err != nil {
		return fmt.Errorf("follow engine events: %w", err)
	}
	go forward(events, p.Send, outputWindow)
	return nil
}

// outputWindow is how long session output events gather before they go to
// the program as one message: a frame at 30 a second.
const outputWindow = time.Second / 30

// forward sends events to send until events closes. Session output events
// (each only says "this transcript grew") gather for window and go as one
// eventsMsg, one per World and session: Bubble Tea draws the whole screen
// after every message, and 100 sessions printing 10 lines a second each
// would otherwise make that 1,000 screens a second. Any other event first
// sends the output gathered before it, so the order between a session's
// output and its end holds.
func forward(events <-chan engine.Event, send func(tea.Msg), window time.Duration) {
	var batch []engine.Event
	seen := map[[2]string]bool{}
	timer := time.NewTimer(window)
	timer.Stop()
	armed := false
	flush := func() {
		if armed {
			timer.Stop() // Go 1.23+: no stale tick is delivered after Stop
		}
		armed = false
		if len(batch) == 0 {
			return
		}
		send(eventsMsg(batch))
		batch = nil
		clear(seen)
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				flush()
				return
			}
			if ev.Type != engine.EventSessionOutput {
				flush()
				send(eventMsg(ev))
				continue
			}
			k := [2]string{ev.World, ev.Session}
			if !seen[k] {
				seen[k] = true
				batch = append(batch, ev)
			}
			if !armed {
				timer.Reset(window)
				armed = true
			}
		case <-timer.C:
			armed = false
			flush()
		}
	}
}
