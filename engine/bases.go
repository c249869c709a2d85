package engine

import (
	"context"
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

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

// BaseRecord is the source content a World's change to one path started
// from, captured into the object store while the source still held it.
type BaseRecord struct {
	Path        string           `json:"path"`
	Absent      bool             `json:"absent,omitempty"` // the source had no such path
	Type        overlay.FileType `json:"type,omitempty"`
	Mode        uint32           `json:"mode,omitempty"`
	Object      overlay.ObjectID `json:"object,omitempty"` // file content
	Target      string           `json:"target,omitempty"` // symlink target
	CapturedAt  time.Time        `json:"captured_at"`
	SourceMTime time.Time        `json:"source_mtime,omitempty"`
	// Late: the source was modified after the World copied the path up, so
	// what was captured may already include someone else's edit. Apply then
	// never treats the source as unchanged; it asks for a merge.
	Late bool `json:"late,omitempty"`
}

// BaseIndex is worlds/<name>/bases: one small JSON file per path, named by
// the hash of the path, created with O_EXCL so the first capture wins and
// concurrent capturers (session watchers, the engine) never clobber it.
type BaseIndex struct{ Dir string }

func (b BaseIndex) file(path string) string {
	h := sha256.Sum256([]byte(path))
	return filepath.Join(b.Dir, hex.EncodeToString(h[:16])+".json")
}

// Get returns the base of path, or nil when none was captured.
func (b BaseIndex) Get(path string) (*BaseRecord, error) {
	data, err := os.ReadFile(b.file(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r BaseRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("base record %s: %w", b.file(path), err)
	}
	if r.Path != path {
		return nil, nil // a hash collision is treated as "no base"
	}
	return &r, nil
}

// Add records r unless a base for the path exists; it reports whether r was written.
func (b BaseIndex) Add(r BaseRecord) (bool, error) {
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return false, err
	}
	data, err := json.Marshal(r)
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
	if err := os.Link(tmp.Name(), b.file(r.Path)); err != nil {
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
func (b BaseIndex) Set(r BaseRecord) error {
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(r)
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
	if err := os.Rename(tmp.Name(), b.file(r.Path)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// Remove forgets the base of a path.
func (b BaseIndex) Remove(path string) error {
	err := os.Remove(b.file(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Objects lists the objects the index references (kept by gc).
func (b BaseIndex) Objects() []overlay.ObjectID {
	ents, _ := os.ReadDir(b.Dir)
	var out []overlay.ObjectID
	for _, d := range ents {
		if !strings.HasSuffix(d.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(b.Dir, d.Name()))
		if err != nil {
			continue
		}
		var r BaseRecord
		if json.Unmarshal(data, &r) == nil && r.Object != "" {
			out = append(out, r.Object)
		}
	}
	return out
}

// CaptureBase records the lower's current version of rel as the base of the
// World's change to it, unless a base exists. upper is where the World's
// version lives; its birth time tells whether the capture may be late.
func CaptureBase(store *overlay.Store, idx BaseIndex, lower, upper, rel string) (bool, error) {
	if r, err := idx.Get(rel); err != nil || r != nil {
		return false, err
	}
	rec := BaseRecord{Path: rel, CapturedAt: time.Now().UTC()}
	st, err := overlay.LstatBeneath(lower, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR):
		rec.Absent = true
	case err != nil:
		return false, fmt.Errorf("capture base of %s: %w", rel, err)
	default:
		rec.Type = overlay.FileTypeOf(st.Mode())
		rec.Mode = ModeBits(st.Mode())
		rec.SourceMTime = st.ModTime().UTC()
		switch rec.Type {
		case overlay.TypeFile:
			f, err := overlay.OpenBeneath(lower, rel)
			if err != nil {
				return false, fmt.Errorf("capture base of %s: %w", rel, err)
			}
			id, _, _, err := store.Put(f)
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
		if born, ok := birthTime(filepath.Join(upper, filepath.FromSlash(rel))); ok && !rec.SourceMTime.Before(born) { // same clock tick: ambiguous, so careful
			rec.Late = true
		}
	}
	return idx.Add(rec)
}

// birthTime is a file's creation time (statx btime), when the fs records it.
func birthTime(path string) (time.Time, bool) {
	var sx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &sx); err != nil || sx.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}, false
	}
	return time.Unix(sx.Btime.Sec, int64(sx.Btime.Nsec)), true
}

// ModeBits is a mode's permission bits plus setuid, setgid and sticky, as
// the octal number chmod takes.
func ModeBits(m fs.FileMode) uint32 {
	s := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		s |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		s |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		s |= 0o1000
	}
	return s
}

func (e *Engine) bases(name string) BaseIndex {
	return BaseIndex{Dir: filepath.Join(e.Paths.World(name), "bases")}
}

// CaptureBases records a base for every changed path that lacks one. The
// engine calls it at status, snapshot, session end and before publishing.
func (e *Engine) CaptureBases(ctx context.Context, w *World, cs *overlay.ChangeSet) (int, error) {
	st, err := e.store()
	if err != nil {
		return 0, err
	}
	idx := e.bases(w.Name)
	n := 0
	for _, c := range cs.Changes {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		ok, err := CaptureBase(st, idx, w.Source, e.Paths.Upper(w.Name), c.Path)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// baseContent returns the base text of a path: the captured base, or when
// none was captured, the source now (capturing it first).
func (e *Engine) baseOf(ctx context.Context, w *World, rel string) (*BaseRecord, []byte, error) {
	st, err := e.store()
	if err != nil {
		return nil, nil, err
	}
	idx := e.bases(w.Name)
	r, err := idx.Get(rel)
	if err != nil {
		return nil, nil, fmt.Errorf("base of %s: %w", rel, err)
	}
	if r == nil {
		if _, err := CaptureBase(st, idx, w.Source, e.Paths.Upper(w.Name), rel); err != nil {
			return nil, nil, err
		}
		if r, err = idx.Get(rel); err != nil || r == nil {
			return nil, nil, fmt.Errorf("base of %s: %v", rel, err)
		}
	}
	if r.Object == "" {
		return r, nil, nil
	}
	data, err := st.ReadAll(r.Object)
	if err != nil {
		return r, nil, fmt.Errorf("base of %s: %w", rel, err)
	}
	return r, data, nil
}
