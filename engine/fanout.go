package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stratahq/strata/overlay/store"
)

// FanOutResult is one World's line of a fan-out summary.
type FanOutResult struct {
	World    string   `json:"world"`
	Session  string   `json:"session,omitempty"`
	ExitCode int      `json:"exit_code"`
	Signal   string   `json:"signal,omitempty"`
	Duration string   `json:"duration"`
	Changed  []string `json:"changed"` // paths this run changed in the World's upper
	Error    string   `json:"error,omitempty"`
}

// FanOut runs one command in many Worlds at once. Output records are handed
// to out (called from several goroutines; out must be safe for that), and
// each World's summary says which paths this run changed.
func (e *Engine) FanOut(ctx context.Context, worlds []string, o ExecOptions, out func(world string, r Record)) []FanOutResult {
	res := make([]FanOutResult, len(worlds))
	var wg sync.WaitGroup
	for i, name := range worlds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &res[i]
			r.World = name
			r.Changed = []string{}
			start := time.Now()
			defer func() { r.Duration = time.Since(start).Round(time.Millisecond).String() }()
			w, err := e.World(name)
			if err != nil {
				r.Error, r.ExitCode = err.Error(), 1
				return
			}
			before, err := e.captureNow(ctx, w)
			if err != nil {
				r.Error, r.ExitCode = err.Error(), 1
				return
			}
			meta, err := e.Exec(ctx, name, o)
			if err != nil {
				r.Error, r.ExitCode = err.Error(), 1
				return
			}
			r.Session = meta.ID
			dir := e.SessionDir(name, meta.ID)
			if err := FollowTranscript(ctx, dir, 0, func(rec Record) error { out(name, rec); return nil }); err != nil {
				r.Error = err.Error()
			}
			end, err := WaitSession(ctx, dir)
			if err != nil {
				r.Error, r.ExitCode = err.Error(), 1
				return
			}
			r.ExitCode, r.Signal = end.ExitCode, end.Signal
			if end.Error != "" && r.Error == "" {
				r.Error = end.Error
			}
			after, err := e.captureNow(ctx, w)
			if err != nil {
				r.Error = fmt.Sprintf("list changed paths: %v", err)
				return
			}
			for _, d := range store.DiffManifests(before, after) {
				r.Changed = append(r.Changed, d.Path)
			}
		}()
	}
	wg.Wait()
	e.activity(ctx, Event{Type: EventFanOut, Detail: map[string]any{"worlds": worlds, "argv": o.Argv, "results": res}})
	return res
}
