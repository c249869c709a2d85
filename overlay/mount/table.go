package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// Table is the mount table as read once from /proc/self/mountinfo, for a
// caller that asks about many mount points in one go (a listing of 100
// Worlds): the kernel formats the whole table on every read, and with one
// overlay per World that read grows with the Worlds, so reading it once per
// World made a listing quadratic.
type Table struct {
	at map[string][]MountInfo // mount point -> mounts there, bottom first
}

// tableReads counts the reads of /proc/self/mountinfo in this process.
var tableReads atomic.Int64

// TableReads is how many times this process has read /proc/self/mountinfo:
// tests and the benchmark use it to prove a listing reads it once.
func TableReads() int64 { return tableReads.Load() }

// ReadTable reads /proc/self/mountinfo.
func ReadTable() (*Table, error) {
	tableReads.Add(1)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	all, err := ParseMountInfo(f)
	if err != nil {
		return nil, err
	}
	t := &Table{at: make(map[string][]MountInfo, len(all))}
	for _, m := range all {
		t.at[m.MountPoint] = append(t.at[m.MountPoint], m)
	}
	return t, nil
}

// MountedAt is the package's MountedAt answered from the table: whether
// something was mounted at target when the table was read and, if so, the
// file system type of the topmost mount.
func (t *Table) MountedAt(target string) (fstype string, mounted bool, err error) {
	abs, ok, err := mountPoint(target)
	if err != nil || !ok {
		return "", false, err
	}
	ms := t.at[abs]
	if len(ms) == 0 {
		return "", false, nil
	}
	return ms[len(ms)-1].FSType, true, nil
}

// mountPoint is target as mountinfo shows it (absolute, symlinks resolved);
// ok is false when target does not exist (nothing can be mounted there).
func mountPoint(target string) (string, bool, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return "", false, fmt.Errorf("mount point %s: %w", target, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	switch {
	case err == nil:
		return resolved, true, nil
	case errors.Is(err, os.ErrNotExist):
		return "", false, nil
	}
	return abs, true, nil
}
