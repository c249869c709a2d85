// Package provlog is the provenance log's line format
// (worlds/<name>/provenance/<session>.jsonl): what a session's watcher
// writes (the local runtime) and what the engine's Provenance and Blame
// read. A leaf, so both can import it.
package provlog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/stratahq/strata/overlay"
)

// Provenance operations.
const (
	OpCreate = "create" // the path did not exist in the source
	OpWrite  = "write"  // the path existed in the source and was changed
	OpDelete = "delete" // a whiteout: the World deleted the source's path; or the session removed a path it had created
)

// Record is one line of worlds/<name>/provenance/<session>.jsonl. A path
// may have several lines per session (one per flush in which it was written
// again): readers take the earliest first, the latest last and the last op.
type Record struct {
	Path string `json:"path"`
	// PathBytes: the exact bytes of a path that is not UTF-8 (overlay.JSONPath).
	PathBytes []byte    `json:"path_bytes,omitempty"`
	Op        string    `json:"op"`
	First     time.Time `json:"first"`
	Last      time.Time `json:"last"`
}

// MarshalJSON keeps a path's exact bytes (overlay.JSONPath).
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record
	v := plain(r)
	v.Path, v.PathBytes = overlay.JSONPath(r.Path)
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Record) UnmarshalJSON(data []byte) error {
	type plain Record
	var v plain
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*r = Record(v)
	r.Path, r.PathBytes = overlay.PathFromJSON(v.Path, v.PathBytes), nil
	return nil
}

// ReadFile merges one session's lines: a path written again after
// a flush has several; the earliest first, the latest last and the op of the
// latest line win. A torn last line (a crash mid-write) is skipped.
func ReadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byPath := map[string]*Record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r Record
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Path == "" {
			continue
		}
		m := byPath[r.Path]
		if m == nil {
			byPath[r.Path] = &r
			continue
		}
		if r.First.Before(m.First) {
			m.First = r.First
		}
		if !r.Last.Before(m.Last) {
			m.Last, m.Op = r.Last, r.Op
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := make([]Record, 0, len(byPath))
	for _, r := range byPath {
		out = append(out, *r)
	}
	return out, nil
}

// JSONLine is v as one JSON line (newline included), for a single
// O_APPEND write(2).
func JSONLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
