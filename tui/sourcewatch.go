package tui

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	tea "github.com/stratahq/strata/third_party/bubbletea"
)

// sourceChangedMsg says the source file under review (file, absolute)
// changed on disk: the engine's events follow the Worlds, not the source.
type sourceChangedMsg struct{ file string }

// sourceWatch follows the one source file the Diff pane shows, so the
// diff follows an edit of the source (an editor, a git checkout) as it
// follows the World's. It watches the file's directory: editors replace
// a file by renaming a new one over it.
type sourceWatch struct {
	w    *fsnotify.Watcher
	log  *slog.Logger
	mu   sync.Mutex
	file string // followed; "" none
	dir  string // watched
	// asked numbers the follow requests in the order the model made
	// them; done is the last one carried out. Cmds run concurrently, so
	// an older request that runs late is dropped.
	asked atomic.Uint64
	done  uint64
}

// sourceSettle coalesces the burst of events one save makes.
const sourceSettle = 50 * time.Millisecond

func newSourceWatch(log *slog.Logger) (*sourceWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &sourceWatch{w: w, log: log}, nil
}

// follow makes file the one followed ("" none).
func (s *sourceWatch) follow(file string) { s.followAs(s.asked.Add(1), file) }

// followAs is request seq of follow; it runs in a tea.Cmd.
func (s *sourceWatch) followAs(seq uint64, file string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq < s.done {
		return // a newer request ran first
	}
	s.done = seq
	dir := ""
	if file != "" {
		dir = filepath.Dir(file)
	}
	s.file = file
	if dir == s.dir {
		return
	}
	if s.dir != "" {
		_ = s.w.Remove(s.dir)
	}
	s.dir = ""
	if dir == "" {
		return
	}
	if err := s.w.Add(dir); err != nil {
		// The diff still follows the World and a reload; say why not the source.
		s.log.Debug("tui: cannot follow the source file", "file", file, "error", err)
		return
	}
	s.dir = dir
}

func (s *sourceWatch) followed(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.file != "" && filepath.Clean(name) == s.file
}

// run sends a sourceChangedMsg for each settled change of the followed
// file, until ctx ends.
func (s *sourceWatch) run(ctx context.Context, send func(tea.Msg)) {
	defer s.w.Close()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	pending := ""
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-s.w.Events:
			if !ok {
				return
			}
			if s.followed(ev.Name) && !ev.Has(fsnotify.Chmod) {
				pending = filepath.Clean(ev.Name)
				settle.Reset(sourceSettle)
			}
		case err, ok := <-s.w.Errors:
			if !ok {
				return
			}
			s.log.Warn("tui: following the source file", "error", err)
		case <-settle.C:
			if pending != "" && s.followed(pending) {
				send(sourceChangedMsg{file: pending})
			}
			pending = ""
		}
	}
}

// followSource is the Cmd that points w at file (nil w: nothing followed,
// as in tests that send sourceChangedMsg themselves).
func followSource(w *sourceWatch, file string) tea.Cmd {
	if w == nil {
		return nil
	}
	seq := w.asked.Add(1) // in the order the model asks
	return func() tea.Msg {
		w.followAs(seq, file)
		return nil
	}
}
