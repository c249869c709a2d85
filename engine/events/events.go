// Package events is the activity log's vocabulary and format
// (<state>/activity.jsonl, one JSON object a line): what the engine appends
// for its actions and a session's init appends when its command ends. A
// leaf, so the runtimes can write it without importing the engine.
package events

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// EventType names what happened. The names are stable: they are the "type"
// field of the activity log and of `strata events --json`.
type Type string

const (
	WorldCreated     Type = "world.created"
	WorldRemoved     Type = "world.removed"
	WorldRestored    Type = "world.restored"
	WorldChanged     Type = "world.changed"
	SessionStarted   Type = "session.started"
	SessionOutput    Type = "session.output"
	SessionEnded     Type = "session.ended"
	AttentionChanged Type = "attention.changed"
	PathsChanged     Type = "paths.changed"
	SnapshotTaken    Type = "snapshot.taken"
	Rollback         Type = "rollback"
	Fork             Type = "fork"
	ApplyDone        Type = "apply.done"
	ApplyConflict    Type = "apply.conflict"
	// BaseCaptureFailed: another World's apply could not record this
	// World's bases; detail: by, paths ("" = the whole World), warnings.
	BaseCaptureFailed Type = "base.capture_failed"
	FanOut            Type = "fanout" // detail: worlds, argv, results (FanOutResult per World)
)

// Event is one thing that happened to a World.
type Event struct {
	Time    time.Time      `json:"time"`
	Type    Type           `json:"type"`
	World   string         `json:"world,omitempty"`
	Session string         `json:"session,omitempty"`
	Detail  map[string]any `json:"detail,omitempty"`
}

// Line is ev as one JSON line (newline included): one O_APPEND write(2)
// of it never interleaves with another process's line.
func Line(ev Event) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Append adds ev to the log at path (created if missing) in one write(2);
// a zero Time is now.
func Append(path string, ev Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	line, err := Line(ev)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read returns the log's events from byte offset from, and the offset
// after the last complete line (a partial last line is read again next
// time). A missing log has none.
func Read(path string, from int64) ([]Event, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, from, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, from, err
	}
	var out []Event
	r := bufio.NewReader(f)
	off := from
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break
		}
		off += int64(len(line))
		var ev Event
		if json.Unmarshal(line, &ev) == nil {
			out = append(out, ev)
		}
	}
	return out, off, nil
}
