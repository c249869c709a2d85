package engine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/stratahq/strata/engine/provlog"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
)

// Provenance operations (provlog).
const (
	OpCreate = provlog.OpCreate
	OpWrite  = provlog.OpWrite
	OpDelete = provlog.OpDelete
)

// PathWrite is one session's writes to one path, as its watcher saw them.
type PathWrite struct {
	// World is set for a write inherited through a fork: the session ran in
	// that World, before the snapshot this one was forked from.
	World   string   `json:"world,omitempty"`
	Session string   `json:"session"`
	Command []string `json:"command,omitempty"` // the session's argv
	Op      string   `json:"op"`                // create, write or delete
	// First and Last are when the session first and last wrote the path: the
	// TUI opens the session's transcript near these moments.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

func (e *Engine) provenanceDir(name string) string {
	return filepath.Join(e.Paths.World(name), "provenance")
}

// inheritedProvenance is the file, in a forked World's provenance dir, of
// the writes it inherited: its parent's, up to the snapshot it was forked
// from, each naming the World it was made in.
const inheritedProvenance = "inherited.jsonl"

// inheritedWrite is one line of inheritedProvenance.
type inheritedWrite struct {
	Path      string `json:"path"`
	PathBytes []byte `json:"path_bytes,omitempty"` // overlay.JSONPath
	PathWrite
}

// MarshalJSON keeps a path's exact bytes (overlay.JSONPath).
func (r inheritedWrite) MarshalJSON() ([]byte, error) {
	type plain inheritedWrite
	v := plain(r)
	v.Path, v.PathBytes = overlay.JSONPath(r.Path)
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *inheritedWrite) UnmarshalJSON(data []byte) error {
	type plain inheritedWrite
	var v plain
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*r = inheritedWrite(v)
	r.Path, r.PathBytes = overlay.PathFromJSON(v.Path, v.PathBytes), nil
	return nil
}

// inheritProvenance gives the fork child the parent's provenance as of
// snap: writes first made after the snapshot are not in the child, and a
// later last write is cut to the snapshot's time.
func inheritProvenance(dir, parent string, prov map[string][]PathWrite, snap *Snapshot) error {
	var buf []byte
	paths := make([]string, 0, len(prov))
	for p := range prov {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		for _, w := range prov[p] {
			if w.First.After(snap.Time) {
				continue
			}
			if w.World == "" {
				w.World = parent
			}
			if w.Last.After(snap.Time) {
				w.Last = snap.Time
			}
			line, err := provlog.JSONLine(inheritedWrite{Path: p, PathWrite: w})
			if err != nil {
				return err
			}
			buf = append(buf, line...)
		}
	}
	if len(buf) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return overlay.WriteFileAtomic(filepath.Join(dir, inheritedProvenance), buf, 0o644)
}

// readInherited reads a forked World's inherited writes into out.
func readInherited(dir string, out map[string][]PathWrite) error {
	f, err := os.Open(filepath.Join(dir, inheritedProvenance))
	if errorsIsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r inheritedWrite
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Path == "" || r.World == "" {
			continue
		}
		out[r.Path] = append(out[r.Path], r.PathWrite)
	}
	return sc.Err()
}

// Provenance merges the World's per-session write records: for each path,
// the sessions that wrote it, in the order of their first write.
func (e *Engine) Provenance(name string) (map[string][]PathWrite, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	dir := e.provenanceDir(name)
	ents, err := os.ReadDir(dir)
	if errorsIsNotExist(err) {
		return map[string][]PathWrite{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("provenance of world %q: %w", name, err)
	}
	argv := map[string][]string{}
	if ss, err := ListSessions(e.Paths.World(name)); err == nil {
		for _, s := range ss {
			argv[s.ID] = s.Argv
		}
	}
	out := map[string][]PathWrite{}
	for _, d := range ents {
		session, ok := strings.CutSuffix(d.Name(), ".jsonl")
		if !ok || d.IsDir() || !fsx.ValidName(session) || d.Name() == inheritedProvenance {
			continue
		}
		recs, err := provlog.ReadFile(filepath.Join(dir, d.Name()))
		if err != nil {
			return nil, fmt.Errorf("provenance of world %q: %w", name, err)
		}
		for _, r := range recs {
			out[r.Path] = append(out[r.Path], PathWrite{Session: session, Command: argv[session], Op: r.Op, First: r.First, Last: r.Last})
		}
	}
	if err := readInherited(dir, out); err != nil {
		return nil, fmt.Errorf("provenance of world %q: %w", name, err)
	}
	for _, ws := range out {
		sort.Slice(ws, func(i, j int) bool {
			if !ws[i].First.Equal(ws[j].First) {
				return ws[i].First.Before(ws[j].First)
			}
			return ws[i].Session < ws[j].Session
		})
	}
	return out, nil
}

// Blame is the provenance of one path (relative to the source, or absolute
// inside it): the sessions that wrote it, oldest first.
func (e *Engine) Blame(name, path string) (string, []PathWrite, error) {
	w, err := e.World(name)
	if err != nil {
		return "", nil, err
	}
	// A World with trees names its paths TREE:rel (main: included, as
	// ResolveTreePath gives them): the source's were looked up as
	// "main:rel" and never found.
	if tree, r := w.SplitTreePath(path); tree != MainTree {
		return "", nil, fmt.Errorf("blame in world %q: %s is in tree %s: provenance is recorded for the source only (the session watcher watches the source's upper, not the trees')", name, path, tree)
	} else if r != path && !filepath.IsAbs(path) {
		path = r
	}
	rel, err := e.relToSource(w, path)
	if err != nil {
		return "", nil, fmt.Errorf("blame in world %q: %w", name, err)
	}
	prov, err := e.Provenance(name)
	if err != nil {
		return rel, nil, err
	}
	return rel, prov[rel], nil
}
