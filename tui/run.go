package tui

import (
	"context"
	"errors"
	"fmt"

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

// Forward subscribes to the engine's events and sends each to the program
// from one goroutine, until ctx ends. Nothing is sent when nothing happens:
// the TUI has no timer of its own.
func Forward(ctx context.Context, eng *engine.Engine, p *tea.Program) error {
	events, err := eng.Subscribe(ctx)
	if err != nil {
		return fmt.Errorf("follow engine events: %w", err)
	}
	go func() {
		for ev := range events {
			p.Send(eventMsg(ev))
		}
	}()
	return nil
}
