package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/stratahq/strata/engine/events"
)

// The activity log's vocabulary and format live in the leaf engine/events
// (a session's init appends to it too); engine keeps its names.
type (
	EventType = events.Type
	Event     = events.Event
)

const (
	EventWorldCreated      = events.WorldCreated
	EventWorldRemoved      = events.WorldRemoved
	EventWorldRestored     = events.WorldRestored
	EventWorldChanged      = events.WorldChanged
	EventSessionStarted    = events.SessionStarted
	EventSessionOutput     = events.SessionOutput
	EventSessionEnded      = events.SessionEnded
	EventAttentionChanged  = events.AttentionChanged
	EventPathsChanged      = events.PathsChanged
	EventSnapshotTaken     = events.SnapshotTaken
	EventRollback          = events.Rollback
	EventFork              = events.Fork
	EventApplyDone         = events.ApplyDone
	EventApplyConflict     = events.ApplyConflict
	EventBaseCaptureFailed = events.BaseCaptureFailed
	EventFanOut            = events.FanOut
)

// activity appends an engine action to the activity log (JSON lines). Each
// line is one write(2) with O_APPEND, so lines from concurrent processes do
// not interleave. Failing to log never fails the action; it is logged.
func (e *Engine) activity(_ context.Context, ev Event) {
	if err := events.Append(e.Paths.Activity(), ev); err != nil {
		e.Log.Warn("append activity", "err", err)
	}
}

// ReadActivity returns the activity log's events from byte offset `from`,
// and the offset after the last complete line.
func (e *Engine) ReadActivity(from int64) ([]Event, int64, error) {
	return events.Read(e.Paths.Activity(), from)
}

// Subscribe delivers events until ctx is done: the activity log of every
// strata process, plus what fsnotify sees in the state root (Worlds appearing
// and going, world.toml edits, session metadata and transcript writes, and
// changes in upper layers). Events are coalesced per World and kind for
// `coalesce` so a busy build does not flood the subscriber.
func (e *Engine) Subscribe(ctx context.Context) (<-chan Event, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch state root: %w", err)
	}
	s := &subscription{e: e, w: w, out: make(chan Event, 256), watched: map[string]bool{}}
	if st, err := os.Stat(e.Paths.Activity()); err == nil {
		s.activityOff = st.Size()
	}
	s.add(e.Paths.Root)
	s.add(e.Paths.Worlds())
	if ws, err := e.Worlds(); err == nil {
		for _, wd := range ws {
			s.watchWorld(wd.Name)
		}
	}
	go s.run(ctx)
	return s.out, nil
}

type subscription struct {
	e           *Engine
	w           *fsnotify.Watcher
	out         chan Event
	mu          sync.Mutex
	watched     map[string]bool
	activityOff int64
}

// maxUpperWatches bounds inotify watches per World's upper; beyond it, paths
// changes deeper down are noticed when their ancestors change.
const maxUpperWatches = 2000

func (s *subscription) add(dir string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched[dir] {
		return true
	}
	if err := s.w.Add(dir); err != nil {
		return false
	}
	s.watched[dir] = true
	return true
}

func (s *subscription) watchWorld(name string) {
	p := s.e.Paths
	s.add(p.World(name))
	s.add(p.Sessions(name))
	if ents, err := os.ReadDir(p.Sessions(name)); err == nil {
		for _, d := range ents {
			if d.IsDir() {
				s.add(filepath.Join(p.Sessions(name), d.Name()))
			}
		}
	}
	n := 0
	_ = filepath.WalkDir(p.Upper(name), func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if n >= maxUpperWatches {
			return filepath.SkipAll
		}
		n++
		s.add(path)
		return nil
	})
}

// classify maps a path under the state root to the World, session and kind
// of event it stands for.
func (s *subscription) classify(path string, op fsnotify.Op) (Event, bool) {
	p := s.e.Paths
	if path == p.Activity() {
		return Event{}, false // handled by tailing
	}
	rel, err := filepath.Rel(p.Worlds(), path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return Event{}, false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	name := parts[0]
	if strings.HasPrefix(name, ".") || ValidateName(name) != nil {
		return Event{}, false
	}
	switch {
	case len(parts) == 1:
		if op.Has(fsnotify.Create) {
			s.watchWorld(name)
			return Event{Type: EventWorldCreated, World: name}, true
		}
		if op.Has(fsnotify.Remove) || op.Has(fsnotify.Rename) {
			return Event{Type: EventWorldRemoved, World: name}, true
		}
	case len(parts) == 2 && parts[1] == "world.toml":
		return Event{Type: EventWorldChanged, World: name}, true
	case len(parts) >= 2 && parts[1] == "upper":
		if op.Has(fsnotify.Create) {
			if st, err := os.Lstat(path); err == nil && st.IsDir() {
				s.add(path)
			}
		}
		return Event{Type: EventPathsChanged, World: name}, true
	case len(parts) == 3 && parts[1] == "sessions":
		if op.Has(fsnotify.Create) {
			s.add(path)
			return Event{Type: EventSessionStarted, World: name, Session: parts[2]}, true
		}
	case len(parts) == 4 && parts[1] == "sessions":
		switch {
		case parts[3] == "transcript":
			return Event{Type: EventSessionOutput, World: name, Session: parts[2]}, true
		case strings.HasSuffix(parts[3], ".json") && !strings.HasPrefix(parts[3], "."):
			return Event{Type: EventAttentionChanged, World: name, Session: parts[2]}, true
		case strings.HasPrefix(parts[3], ".meta.json") || strings.HasPrefix(parts[3], ".exit"):
			return Event{Type: EventAttentionChanged, World: name, Session: parts[2]}, true
		}
	}
	return Event{}, false
}

func (s *subscription) run(ctx context.Context) {
	defer close(s.out)
	defer s.w.Close()
	const coalesce = 30 * time.Millisecond
	pending := map[string]Event{}
	var order []string
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	flush := func() {
		for _, k := range order {
			select {
			case s.out <- pending[k]:
			case <-ctx.Done():
				return
			}
		}
		pending = map[string]Event{}
		order = order[:0]
		armed = false
	}
	queue := func(ev Event) {
		if ev.Time.IsZero() {
			ev.Time = time.Now().UTC()
		}
		k := string(ev.Type) + "\x00" + ev.World + "\x00" + ev.Session
		if ev.Type == EventEgressDenied || ev.Type == EventEgressAllowed {
			// One per host: each is a message the person may act on.
			k += "\x00" + fmt.Sprint(ev.Detail["host"])
		}
		if _, ok := pending[k]; !ok {
			order = append(order, k)
		}
		pending[k] = ev
		if !armed {
			timer.Reset(coalesce)
			armed = true
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case fe, ok := <-s.w.Events:
			if !ok {
				return
			}
			if fe.Name == s.e.Paths.Activity() {
				evs, off, err := s.e.ReadActivity(s.activityOff)
				if err == nil {
					s.activityOff = off
					for _, ev := range evs {
						if ev.Type == EventWorldCreated || ev.Type == EventWorldRestored {
							s.watchWorld(ev.World)
						}
						queue(ev)
					}
				}
				continue
			}
			if ev, ok := s.classify(fe.Name, fe.Op); ok {
				queue(ev)
			}
		case err, ok := <-s.w.Errors:
			if !ok {
				return
			}
			s.e.Log.Warn("watch state root", "err", err)
		case <-timer.C:
			flush()
		}
	}
}
