package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratahq/strata/engine/cgroup"
	"github.com/stratahq/strata/overlay/mount"
)

// TrashKeep is how long a removed World stays restorable.
const TrashKeep = 7 * 24 * time.Hour

// ErrUnsavedWork is returned by Remove when the World holds changes that
// were never applied or snapshotted.
var ErrUnsavedWork = errors.New("world holds unsaved work")

// RemoveOptions are the flags of `strata rm`.
type RemoveOptions struct {
	Force bool // move to the trash even with unsaved work
	Purge bool // delete for good
	Kill  bool // stop running sessions first
}

// RemoveResult says where the World went.
type RemoveResult struct {
	World   string `json:"world"`
	Trash   string `json:"trash,omitempty"` // trash entry id, when moved to the trash
	Purged  bool   `json:"purged"`
	Changes int    `json:"changes"`
	Unsaved int    `json:"unsaved"`
	Killed  int    `json:"killed_sessions"`
	// Broken says why the World's world.toml could not be read, when it
	// could not; such a World is removed without the unsaved-work check.
	Broken  string `json:"broken,omitempty"`
	Warning string `json:"warning,omitempty"`
}

// Remove deletes a World, by default refusing when that would lose work.
func (e *Engine) Remove(ctx context.Context, name string, o RemoveOptions) (*RemoveResult, error) {
	lk, err := e.lockWorld(ctx, name)
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	w, err := e.World(name)
	var broken *BrokenWorldError
	if errors.As(err, &broken) {
		return e.removeBroken(ctx, broken, o)
	}
	if err != nil {
		return nil, err
	}
	res := &RemoveResult{World: name}
	running := e.runningSessions(w)
	if len(running) > 0 && !o.Kill {
		return nil, fmt.Errorf("remove world %q: %w (%d: %s); stop them with strata kill, or pass --kill", name, ErrSessionsRunning, len(running), strings.Join(running, ", "))
	}
	// A World whose changes cannot be read (damaged upper, odd content)
	// can still go with --force or --purge: refusing would leave it forever.
	unsaved := 0
	cs, err := e.Changes(ctx, w, false)
	if err == nil {
		res.Changes = len(cs.Changes)
		unsaved, err = e.unsavedChanges(ctx, w, cs)
	}
	if err != nil {
		if !o.Force && !o.Purge {
			return nil, fmt.Errorf("remove world %q: its changes cannot be read, so strata cannot tell whether work would be lost: %w; "+
				"pass --force to move it to the trash for 7 days, or --purge to delete it", name, err)
		}
		e.Log.Warn("remove a world whose changes cannot be read", "world", name, "err", err)
		res.Warning = fmt.Sprintf("its changes could not be read (%v); removed anyway (--force/--purge)", err)
	}
	res.Unsaved = unsaved
	if unsaved > 0 && !o.Force && !o.Purge {
		return nil, fmt.Errorf("remove world %q: %w: %d changed paths were never applied or snapshotted; "+
			"review them with strata status %s, keep them with strata snap %s or strata apply %s, "+
			"or pass --force to move the World to the trash for 7 days (--purge deletes it)",
			name, ErrUnsavedWork, unsaved, name, name, name)
	}
	for _, id := range running {
		if err := e.killSession(w, id); err == nil {
			res.Killed++
		}
	}
	if err := e.runtimeFor(w).Destroy(ctx, w); err != nil {
		return nil, fmt.Errorf("remove world %q: %w", name, err)
	}
	if err := e.unmountLocked(ctx, w); err != nil {
		return nil, fmt.Errorf("remove world %q: %w", name, err)
	}
	cgroup.RemoveWorld(w)
	if o.Purge {
		if err := removeAllForce(e.Paths.World(name)); err != nil {
			return nil, fmt.Errorf("purge world %q: %w", name, err)
		}
		res.Purged = true
	} else {
		id := name + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := os.Rename(e.Paths.World(name), filepath.Join(e.Paths.Trash(), id)); err != nil {
			return nil, fmt.Errorf("move world %q to the trash: %w", name, err)
		}
		res.Trash = id
	}
	_ = os.Remove(filepath.Join(e.Paths.Worlds(), "."+name+".lock"))
	e.activity(ctx, Event{Type: EventWorldRemoved, World: name, Detail: map[string]any{"purged": res.Purged, "trash": res.Trash, "changes": res.Changes}})
	return res, nil
}

// removeBroken removes a World whose world.toml cannot be read. Nothing in
// it can be trusted to say what it holds, so it is never refused for unsaved
// work: plain rm moves it to the trash (nothing lost), --purge deletes its
// directory with its layers, sessions, bases and timeline. Its sessions are
// killed and its view unmounted first, by the paths alone.
func (e *Engine) removeBroken(ctx context.Context, b *BrokenWorldError, o RemoveOptions) (*RemoveResult, error) {
	name := b.Name
	res := &RemoveResult{World: name, Broken: b.Reason()}
	ss, _ := ListSessions(e.Paths.World(name))
	var running []string
	for _, s := range ss {
		if s.State == SessionRunning || s.State == SessionStarting {
			running = append(running, s.ID)
		}
	}
	if len(running) > 0 && !o.Kill {
		return nil, fmt.Errorf("remove world %q: %w (%d: %s); stop them with strata kill, or pass --kill", name, ErrSessionsRunning, len(running), strings.Join(running, ", "))
	}
	for _, id := range running {
		if err := KillSession(e.SessionDir(name, id), syscall.SIGKILL); err == nil {
			res.Killed++
		}
	}
	merged := e.Paths.Merged(name)
	if e.mountedAt(merged) {
		if err := mount.Unmount(ctx, merged); err != nil {
			return nil, fmt.Errorf("remove broken world %q: unmount %s: %w", name, merged, err)
		}
	}
	// Never follow a path out of the World: a merged view still mounted
	// (unmount raced a session) would make the removal reach through it.
	if e.mountedAt(merged) {
		return nil, fmt.Errorf("remove broken world %q: %s is still mounted; stop its sessions and retry", name, merged)
	}
	cgroup.RemoveBrokenWorld(name)
	if o.Purge {
		if err := removeAllForce(e.Paths.World(name)); err != nil {
			return nil, fmt.Errorf("purge broken world %q: %w", name, err)
		}
		res.Purged = true
	} else {
		id := name + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := os.Rename(e.Paths.World(name), filepath.Join(e.Paths.Trash(), id)); err != nil {
			return nil, fmt.Errorf("move broken world %q to the trash: %w", name, err)
		}
		res.Trash = id
	}
	_ = os.Remove(filepath.Join(e.Paths.Worlds(), "."+name+".lock"))
	e.Log.Info("removed broken world", "world", name, "purged", res.Purged, "trash", res.Trash, "reason", b.Reason())
	e.activity(ctx, Event{Type: EventWorldRemoved, World: name, Detail: map[string]any{"purged": res.Purged, "trash": res.Trash, "broken": b.Reason()}})
	return res, nil
}

// removeAllForce removes a tree even where a World's files have mode 000.
func removeAllForce(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// TrashEntry is one removed World kept for restore.
type TrashEntry struct {
	ID      string    `json:"id"`
	World   string    `json:"world"`
	Source  string    `json:"source"`
	Removed time.Time `json:"removed"`
	Expires time.Time `json:"expires"`
}

// Trash lists removed Worlds, newest first, and purges expired ones.
func (e *Engine) Trash(ctx context.Context) ([]TrashEntry, error) {
	ents, err := os.ReadDir(e.Paths.Trash())
	if err != nil {
		return nil, fmt.Errorf("list trash: %w", err)
	}
	var out []TrashEntry
	for _, d := range ents {
		name, ns, ok := strings.Cut(d.Name(), ".")
		for ok && strings.Contains(ns, ".") { // names may contain dots; the stamp is last
			var more string
			more, ns, _ = strings.Cut(ns, ".")
			name += "." + more
		}
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			continue
		}
		removed := time.Unix(0, n).UTC()
		if time.Since(removed) > TrashKeep {
			_ = removeAllForce(filepath.Join(e.Paths.Trash(), d.Name()))
			continue
		}
		te := TrashEntry{ID: d.Name(), World: name, Removed: removed, Expires: removed.Add(TrashKeep)}
		if w, err := readWorldFile(filepath.Join(e.Paths.Trash(), d.Name(), "world.toml")); err == nil {
			te.Source = w.Source
		}
		out = append(out, te)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Removed.After(out[j].Removed) })
	return out, nil
}

// RestoreWorld brings a World back from the trash, under its own name or as.
// ref is a trash id or a World name (its newest trash entry).
func (e *Engine) RestoreWorld(ctx context.Context, ref, as string) (*World, error) {
	entries, err := e.Trash(ctx)
	if err != nil {
		return nil, err
	}
	var te *TrashEntry
	for i := range entries {
		if entries[i].ID == ref || (te == nil && entries[i].World == ref) {
			te = &entries[i]
			if entries[i].ID == ref {
				break
			}
		}
	}
	if te == nil {
		return nil, fmt.Errorf("restore world %q: not in the trash (strata trash lists it)", ref)
	}
	name := te.World
	if as != "" {
		name = as
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	src := filepath.Join(e.Paths.Trash(), te.ID)
	w, err := readWorldFile(filepath.Join(src, "world.toml"))
	if err != nil {
		return nil, fmt.Errorf("restore world %q: %w", ref, err)
	}
	w.Name = name
	if err := writeWorldFile(filepath.Join(src, "world.toml"), w); err != nil {
		return nil, err
	}
	if err := renameNoReplace(src, e.Paths.World(name)); err != nil {
		return nil, fmt.Errorf("restore world %q as %q: %w", ref, name, err)
	}
	e.activity(ctx, Event{Type: EventWorldRestored, World: name, Detail: map[string]any{"trash": te.ID}})
	return w, nil
}
