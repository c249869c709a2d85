package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay/store"
)

// A snapshot becomes durable in three fsync rounds, each round's fsyncs in
// parallel (the file system commits them together), each rename only after
// everything it makes reachable is on disk:
//
//  1. the new objects and their directories, and the manifest under a
//     temporary name; then the manifest is renamed into place;
//  2. the snapshots directory (that rename), and the new timeline under a
//     temporary name; then the timeline is renamed into place;
//  3. the World's directory (that rename).
//
// A crash (or power loss) at any moment leaves the old timeline, or the new
// one with a manifest whose objects are all there: never a timeline entry
// without its manifest, nor a manifest naming a missing object. Five serial
// rounds (objects, manifest, snapshots dir, timeline, World dir) were most of
// an incremental snapshot's wall time.

// stagedFile is a file written and fsynced under a temporary name beside its
// path; commit renames it into place (the caller syncs the directory).
type stagedFile struct{ tmp, path string }

// stageFile writes data to a temporary file beside path and fsyncs it.
func stageFile(path string, data []byte, perm os.FileMode) (_ *stagedFile, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	// CreateTemp makes the file 0600; perm must not depend on umask.
	if err = tmp.Chmod(perm); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return nil, fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return nil, fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	return &stagedFile{tmp: tmp.Name(), path: path}, nil
}

// commit renames the staged file into place.
func (f *stagedFile) commit() error {
	if err := os.Rename(f.tmp, f.path); err != nil {
		f.abort()
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}

// abort removes a staged file that will not be committed (nil-safe).
func (f *stagedFile) abort() {
	if f != nil {
		_ = os.Remove(f.tmp)
	}
}

// syncDir makes a directory's entries (a rename into it) durable.
func syncDir(dir string) error {
	if err := fsx.FsyncPath(dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// together runs fns at once and returns the first error (in fns' order)
// after all have returned.
func together(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = fn()
		}()
	}
	errs[0] = fns[0]()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// commitSnapshot makes snapshot s of World w durable and adds it to the
// timeline tl as its head: its new objects (unsynced) and its manifest m,
// then the timeline, in the three rounds above.
func (e *Engine) commitSnapshot(st *store.Store, w *World, tl *Timeline, s *Snapshot, m *store.Manifest, unsynced []store.ObjectID, start time.Time) error {
	data, err := store.EncodeManifest(m)
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	var mf *stagedFile
	if err := together(
		func() (err error) { mf, err = stageFile(e.manifestPath(s.ID), data, 0o644); return err },
		func() error { return st.SyncObjects(unsynced) },
	); err != nil {
		mf.abort()
		return err
	}
	if err := mf.commit(); err != nil {
		return err
	}
	killPoint("snapshot.manifest")
	s.Duration = time.Since(start).Round(time.Microsecond).String()
	tl.Snapshots = append(tl.Snapshots, *s)
	tl.Head = s.ID
	tdata, err := json.MarshalIndent(tl, "", "  ")
	if err != nil {
		return fmt.Errorf("write timeline: %w", err)
	}
	path := e.timelinePath(w.Name)
	var tf *stagedFile
	if err := together(
		func() (err error) { tf, err = stageFile(path, append(tdata, '\n'), 0o644); return err },
		func() error { return syncDir(filepath.Dir(e.manifestPath(s.ID))) },
	); err != nil {
		tf.abort()
		return err
	}
	if err := tf.commit(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}
