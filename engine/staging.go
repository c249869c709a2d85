package engine

import (
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

// stagingPrefix starts the name of a World being built in worlds/ (never
// listed: Worlds skips dot names); forkRecordPrefix a fork's commit record.
const (
	stagingPrefix = ".new-"
	// makingPrefix names a staging dir in the moment between its making
	// and its lock (newStagedWorld); sweeps pass over it.
	makingPrefix     = ".mk" + stagingPrefix
	forkRecordPrefix = ".fork-"
)

// stagedWorld is a World being built under worlds/.new-NAME-XXXX. The
// building process holds an flock on the directory, so sweepStaging can
// tell a build that crashed (lock free: remove it) from one in progress.
type stagedWorld struct {
	name string
	dir  string
	lock int // flock'd fd of dir; -1 once released
}

func newStagedWorld(worlds, name string) (*stagedWorld, error) {
	// Made and locked under a name sweeps pass over, then renamed to its
	// staging name (the lock goes with the directory): a sweep never finds
	// a staging dir before its maker holds it. A crash in between leaves
	// an empty dir that strata ignores.
	tmp, err := os.MkdirTemp(worlds, makingPrefix+name+"-")
	if err != nil {
		return nil, err
	}
	fd, err := lockDirNB(tmp)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	dir := filepath.Join(worlds, stagingPrefix+strings.TrimPrefix(filepath.Base(tmp), makingPrefix))
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_NOREPLACE); err != nil {
		_ = unix.Close(fd)
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	return &stagedWorld{name: name, dir: dir, lock: fd}, nil
}

// lockDirNB takes an exclusive flock on dir without waiting.
func lockDirNB(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = unix.Close(fd)
		return -1, &fs.PathError{Op: "flock", Path: dir, Err: err}
	}
	return fd, nil
}

// upper is the staged World's upper layer directory.
func (sw *stagedWorld) upper(w *World) string {
	return runtimeOf(nil, w.Backend).UpperIn(sw.dir)
}

// publish renames the complete staged World into place; a World of the same
// name is never replaced.
func (sw *stagedWorld) publish(e *Engine) error {
	if err := renameNoReplace(sw.dir, e.Paths.World(sw.name)); err != nil {
		if errors.Is(err, ErrWorldExists) {
			return fmt.Errorf("new world %q: %w (strata rm %s, or pick another name)", sw.name, ErrWorldExists, sw.name)
		}
		return fmt.Errorf("new world %q: %w", sw.name, err)
	}
	sw.dir = ""
	sw.release()
	return nil
}

func (sw *stagedWorld) release() {
	if sw.lock >= 0 {
		_ = unix.Close(sw.lock)
		sw.lock = -1
	}
}

// discard removes what is still staged (nothing once published).
func (sw *stagedWorld) discard() {
	if sw.dir != "" {
		_ = removeAllForce(sw.dir)
		sw.dir = ""
	}
	sw.release()
}

// forkRecord is worlds/.fork-ID.json, written once every World of a fork is
// completely staged and removed once all are published. A fork that crashed
// with a record on disk is rolled forward by the next strata (every World
// published); one that crashed without leaves only staging directories,
// which are removed: a fork lands whole or not at all.
type forkRecord struct {
	Worlds []forkRecordWorld `json:"worlds"`
}

type forkRecordWorld struct {
	Name    string `json:"name"`
	Staging string `json:"staging"` // base name in worlds/
}

func writeForkRecord(path string, staged []*stagedWorld) error {
	var rec forkRecord
	for _, sw := range staged {
		rec.Worlds = append(rec.Worlds, forkRecordWorld{Name: sw.name, Staging: filepath.Base(sw.dir)})
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return overlay.WriteFileAtomic(path, data, 0o644)
}

// sweepStaging finishes or removes what crashed Creates and Forks left in
// worlds/: pending fork records are rolled forward, then staging
// directories no live process holds are removed. It costs one readdir of
// worlds/ when there is nothing to do.
func (e *Engine) sweepStaging() {
	dir := e.Paths.Worlds()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var records, stagings []string
	for _, d := range ents {
		switch n := d.Name(); {
		case strings.HasPrefix(n, forkRecordPrefix) && strings.HasSuffix(n, ".json"):
			records = append(records, n)
		case strings.HasPrefix(n, stagingPrefix) && d.IsDir():
			stagings = append(stagings, n)
		case strings.HasPrefix(n, makingPrefix) && d.IsDir():
			// A create that crashed before naming its staging dir left it
			// empty; one a minute old is not being made any more.
			if fi, err := d.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				_ = os.Remove(filepath.Join(dir, n))
			}
		}
	}
	if len(records) == 0 && len(stagings) == 0 {
		return
	}
	listed := map[string]bool{}
	for _, n := range records {
		for _, s := range e.rollForwardFork(filepath.Join(dir, n)) {
			listed[s] = true
		}
	}
	for _, n := range stagings {
		if listed[n] {
			continue // its fork's record is being rolled forward elsewhere
		}
		p := filepath.Join(dir, n)
		fd, err := lockDirNB(p)
		if err != nil {
			continue // being built, or gone
		}
		e.Log.Warn("remove a World a crashed create or fork left half-made", "dir", p)
		_ = removeAllForce(p)
		_ = unix.Close(fd)
	}
}

// rollForwardFork publishes the Worlds of a crashed fork's record and
// removes the record. It returns the staging names the record still lists
// when another process (the fork itself, or another sweep) holds them.
func (e *Engine) rollForwardFork(path string) (busy []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var rec forkRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		// Written atomically, so never torn: an unreadable record is damage.
		e.Log.Error("unreadable fork record", "path", path, "err", err)
		return nil
	}
	for _, fw := range rec.Worlds {
		if ValidateName(fw.Name) != nil || !strings.HasPrefix(fw.Staging, stagingPrefix) || strings.ContainsRune(fw.Staging, '/') {
			e.Log.Error("fork record names a bad World", "path", path, "world", fw.Name, "staging", fw.Staging)
			return nil
		}
	}
	var held []int
	defer func() {
		for _, fd := range held {
			_ = unix.Close(fd)
		}
	}()
	for _, fw := range rec.Worlds {
		p := filepath.Join(e.Paths.Worlds(), fw.Staging)
		fd, err := lockDirNB(p)
		if errors.Is(err, unix.EWOULDBLOCK) {
			for _, w := range rec.Worlds {
				busy = append(busy, w.Staging)
			}
			return busy // the fork (or another sweep) is still at it
		}
		if err == nil {
			held = append(held, fd)
		}
	}
	for _, fw := range rec.Worlds {
		p := filepath.Join(e.Paths.Worlds(), fw.Staging)
		if _, err := os.Lstat(p); err != nil {
			continue // published already
		}
		if err := renameNoReplace(p, e.Paths.World(fw.Name)); err != nil {
			e.Log.Error("finish a crashed fork", "world", fw.Name, "err", err)
			_ = removeAllForce(p)
			continue
		}
		e.Log.Info("finished a crashed fork", "world", fw.Name)
	}
	_ = os.Remove(path)
	return nil
}
