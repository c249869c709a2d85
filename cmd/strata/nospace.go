package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/stratahq/strata/overlay/publish"
)

// noSpaceError is a command stopped by a full file system, told the way a
// person can act on it: which path was being written, on which file system,
// what to do, and what became of the work.
type noSpaceError struct {
	path, where, next string
	err               error
}

func (e *noSpaceError) Error() string {
	at := ""
	if e.path != "" {
		at = " writing " + e.path
	}
	if e.where != "" {
		at += " (" + e.where + ")"
	}
	return fmt.Sprintf("no space left on device%s: %s\n  (%v)", at, e.next, e.err)
}

func (e *noSpaceError) Unwrap() error { return e.err }

// explainNoSpace rewrites an ENOSPC (or EDQUOT) error of command cmd; any
// other error comes back as it is.
func (a *app) explainNoSpace(cmd string, err error) error {
	if err == nil || !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	ne := &noSpaceError{err: err}
	var pe *publish.PublishPathError
	var fe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		ne.path = filepath.Join(pe.Root, pe.Path)
	case errors.As(err, &fe) && filepath.IsAbs(fe.Path):
		ne.path = fe.Path
	case errors.As(err, &le) && filepath.IsAbs(le.New):
		ne.path = le.New
	}
	if ne.path != "" {
		ne.where = a.fileSystemOf(ne.path)
	} else if a.eng != nil {
		// The path is not in the error (an object store temp, say): the
		// state root is where strata itself writes.
		ne.where = "strata's state root " + a.eng.Paths.Root + ", $STRATA_HOME"
	}
	if ne.where != "" {
		dir := ne.path
		if dir == "" {
			dir = a.eng.Paths.Root
		}
		if free, ok := freeSpace(dir); ok {
			ne.where += ", has " + humanSize(free) + " free"
		}
	}
	switch cmd {
	case "apply":
		if errors.Is(err, publish.ErrIncomplete) {
			ne.next = "free space; the publication was committed and completes on the next strata start (strata doctor shows it)"
		} else {
			ne.next = "free space and run strata apply again; nothing was published"
		}
	case "snap", "fork", "rollback":
		ne.next = fmt.Sprintf("free space (strata gc drops objects no snapshot needs) and run strata %s again; no snapshot was recorded", cmd)
	case "exec", "shell":
		ne.next = fmt.Sprintf("free space and run strata %s again; the command did not start", cmd)
	default:
		ne.next = fmt.Sprintf("free space and run strata %s again", cmd)
	}
	return ne
}

// fileSystemOf says whose file system p is on: strata's state root, a
// World's source, or just the one holding p.
func (a *app) fileSystemOf(p string) string {
	if a.eng == nil {
		return ""
	}
	if within(p, a.eng.Paths.Root) {
		return "strata's state root " + a.eng.Paths.Root + ", $STRATA_HOME"
	}
	if ws, err := a.eng.Worlds(); err == nil {
		for _, w := range ws {
			if within(p, w.Source) {
				return "the source's file system"
			}
		}
	}
	return ""
}

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// freeSpace is what an unprivileged writer may still use on the file system
// holding p (or its nearest existing parent).
func freeSpace(p string) (int64, bool) {
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(p, &st); err == nil {
			return int64(st.Bavail) * st.Bsize, true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return 0, false
		}
		p = parent
	}
}
