// Package baseidx is a World's base index (worlds/<name>/bases): the source
// content each change started from, captured while the source still held
// it, so apply can merge three ways. A leaf: the engine and the local
// runtime's session watcher both write it.
package baseidx

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/store"
)

// Record is the source content a World's change to one path started
// from, captured into the object store while the source still held it.
type Record struct {
	Path string `json:"path"`
	// PathBytes holds the exact bytes of a path that is not valid UTF-8
	// (JSON strings cannot carry them; Path is then only for display).
	PathBytes   []byte           `json:"path_bytes,omitempty"`
	Absent      bool             `json:"absent,omitempty"` // the source had no such path
	Type        overlay.FileType `json:"type,omitempty"`
	Mode        uint32           `json:"mode,omitempty"`
	Object      store.ObjectID   `json:"object,omitempty"`       // file content
	Target      string           `json:"target,omitempty"`       // symlink target
	TargetBytes []byte           `json:"target_bytes,omitempty"` // as PathBytes, for Target
	CapturedAt  time.Time        `json:"captured_at"`
	SourceMTime time.Time        `json:"source_mtime,omitempty"`
	// Late: the source was modified after the World copied the path up, so
	// what was captured may already include someone else's edit. Apply then
	// never treats the source as unchanged; it asks for a merge.
	Late bool `json:"late,omitempty"`
	// CaptureError: the base could not be read when it had to be (another
	// World's apply was about to change the source). The base is unknown,
	// so the record is Late and apply asks for a merge by hand.
	CaptureError string `json:"capture_error,omitempty"`
}

// encodeRecord is a record's JSON, its path kept byte for byte.
func encodeRecord(r Record) ([]byte, error) {
	r.PathBytes, r.TargetBytes = nil, nil
	if !utf8.ValidString(r.Path) {
		r.PathBytes = []byte(r.Path)
	}
	if !utf8.ValidString(r.Target) {
		r.TargetBytes = []byte(r.Target)
	}
	return json.Marshal(r)
}

func decodeRecord(data []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return r, err
	}
	if r.PathBytes != nil {
		r.Path, r.PathBytes = string(r.PathBytes), nil
	}
	if r.TargetBytes != nil {
		r.Target, r.TargetBytes = string(r.TargetBytes), nil
	}
	return r, nil
}

// Index is worlds/<name>/bases: one small JSON file per path, named by
// the hash of the path, created with O_EXCL so the first capture wins and
// concurrent capturers (session watchers, the engine) never clobber it.
type Index struct{ Dir string }

// File is the record file of path.
func (b Index) File(path string) string {
	h := sha256.Sum256([]byte(path))
	return filepath.Join(b.Dir, hex.EncodeToString(h[:16])+".json")
}

// Get returns the base of path, or nil when none was captured.
func (b Index) Get(path string) (*Record, error) {
	data, err := os.ReadFile(b.File(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := decodeRecord(data)
	if err != nil {
		return nil, fmt.Errorf("base record %s: %w", b.File(path), err)
	}
	if r.Path != path {
		if r.Path != strings.ToValidUTF8(path, "\ufffd") {
			return nil, nil // a hash collision is treated as "no base"
		}
		// Written before path_bytes existed, with the bytes that are not
		// UTF-8 replaced; its file name is the hash of this exact path.
		r.Path = path
	}
	return &r, nil
}

// Add records r unless a base for the path exists; it reports whether r was written.
func (b Index) Add(r Record) (bool, error) {
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return false, err
	}
	data, err := encodeRecord(r)
	if err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(b.Dir, ".tmp-")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	// link(2) fails if the name exists: the first capture wins atomically.
	if err := os.Link(tmp.Name(), b.File(r.Path)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Set replaces the base of a path (after strata itself published it). It
// does not fsync: a base record lost in a crash leaves the older base,
// which only makes the next apply merge (ours == theirs: nothing to do)
// instead of copy, never overwrite anything.
func (b Index) Set(r Record) error {
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return err
	}
	data, err := encodeRecord(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(b.Dir, ".tmp-")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), b.File(r.Path)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// Remove forgets the base of a path.
func (b Index) Remove(path string) error {
	err := os.Remove(b.File(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Objects lists the objects the index references (kept by gc).
func (b Index) Objects() []store.ObjectID {
	ents, _ := os.ReadDir(b.Dir)
	var out []store.ObjectID
	for _, d := range ents {
		if !strings.HasSuffix(d.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(b.Dir, d.Name()))
		if err != nil {
			continue
		}
		if r, err := decodeRecord(data); err == nil && r.Object != "" {
			out = append(out, r.Object)
		}
	}
	return out
}

// Capture records the lower's current version of rel as the base of the
// World's change to it, unless a base exists. upper is where the World's
// version lives; its birth time tells whether the capture may be late.
func Capture(store *store.Store, idx Index, lower, upper, rel string) (bool, error) {
	if r, err := idx.Get(rel); err != nil || r != nil {
		return false, err
	}
	rec := Record{Path: rel, CapturedAt: time.Now().UTC()}
	st, err := overlay.LstatBeneath(lower, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, overlay.ErrUnsafePath):
		// ErrUnsafePath: a parent is a symlink in the source (the World
		// replaced it with a directory), so the source holds nothing at rel
		// beneath its root; what the link points at is never read.
		rec.Absent = true
	case err != nil:
		return false, fmt.Errorf("capture base of %s: %w", rel, err)
	default:
		rec.Type = overlay.FileTypeOf(st.Mode())
		rec.Mode = fsx.UnixMode(st.Mode())
		rec.SourceMTime = st.ModTime().UTC()
		switch rec.Type {
		case overlay.TypeFile:
			f, err := overlay.OpenBeneath(lower, rel)
			if err != nil {
				return false, fmt.Errorf("capture base of %s: %w", rel, err)
			}
			id, _, _, err := store.PutOpen(f) // cloned where the file systems share extents
			f.Close()
			if err != nil {
				return false, fmt.Errorf("capture base of %s: %w", rel, err)
			}
			rec.Object = id
		case overlay.TypeSymlink:
			if rec.Target, err = overlay.ReadlinkBeneath(lower, rel); err != nil {
				return false, fmt.Errorf("capture base of %s: %w", rel, err)
			}
		}
		if born, ok := overlay.BirthTimeBeneath(upper, rel); ok && !rec.SourceMTime.Before(born) { // same clock tick: ambiguous, so careful
			rec.Late = true
		}
	}
	if m, ok := idx.Incomplete(); ok {
		// An earlier capture of this World's bases failed before another
		// World published: a change older than that failure may have started
		// from a source that has moved since, so its base is unknown.
		if born, known := overlay.BirthTimeBeneath(upper, rel); !known || born.Before(m.Since) {
			rec.Late = true
			rec.CaptureError = m.Error
		}
	}
	return idx.Add(rec)
}

// IncompleteMark is worlds/<name>/bases/incomplete: the World's change set
// or bases could not be captured when another World published to the source.
type IncompleteMark struct {
	Since time.Time `json:"since"`
	Error string    `json:"error"`
}

func (b Index) incompletePath() string { return filepath.Join(b.Dir, "incomplete") }

// MarkIncomplete records that the World's bases could not be captured now;
// the first mark wins, so Since is the oldest failure.
func (b Index) MarkIncomplete(cause error) error {
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(IncompleteMark{Since: time.Now().UTC(), Error: cause.Error()})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(b.incompletePath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Incomplete reads the mark, if the index has one.
func (b Index) Incomplete() (IncompleteMark, bool) {
	var m IncompleteMark
	data, err := os.ReadFile(b.incompletePath())
	if err != nil {
		return m, false
	}
	if json.Unmarshal(data, &m) != nil || m.Since.IsZero() {
		// Unreadable: be careful, every change so far counts as older.
		m = IncompleteMark{Since: time.Now().UTC(), Error: "an earlier capture of this World's bases failed"}
	}
	return m, true
}

// ClearIncomplete drops the mark once every change has a base record
// (those captured under the mark carry its Late flag themselves).
func (b Index) ClearIncomplete() {
	_ = os.Remove(b.incompletePath())
}

// MarkUnknown records that the base of rel could not be captured: the base
// is unknown, so the World's apply of rel asks for a merge by hand. A valid
// existing record is kept; an unreadable one is replaced.
func (b Index) MarkUnknown(rel string, cause error) error {
	rec := Record{Path: rel, CapturedAt: time.Now().UTC(), Late: true, CaptureError: cause.Error()}
	r, err := b.Get(rel)
	if err == nil && r != nil {
		return nil
	}
	if err != nil {
		return b.Set(rec)
	}
	_, err = b.Add(rec)
	return err
}
