package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratahq/strata/overlay/store"
)

// CopyOnWrite is the doctor's answer to "does this machine get O(1)
// copy-up and O(1) snapshots": kernel overlayfs clones a file on copy-up
// when the upper and the lower are on one reflink-capable file system
// (XFS with reflink, btrfs), and the object store can clone when the state
// root is on one. Wave 2 prints it in `strata doctor`.
type CopyOnWrite struct {
	StateRoot   string `json:"state_root"`
	StateRootFS string `json:"state_root_fs"`
	Source      string `json:"source,omitempty"`
	SourceFS    string `json:"source_fs,omitempty"`
	// CopyUp: a one-byte edit to a big source file clones it into the
	// World's upper instead of copying its bytes.
	CopyUp    bool   `json:"copy_up"`
	CopyUpWhy string `json:"copy_up_why"`
	// Snapshots: the state root's file system can clone objects and
	// restores.
	Snapshots    bool   `json:"snapshots"`
	SnapshotsWhy string `json:"snapshots_why"`
}

// String is the human text, two lines.
func (c CopyOnWrite) String() string {
	yes := func(b bool) string {
		if b {
			return "O(1)"
		}
		return "copies bytes"
	}
	return fmt.Sprintf("copy-up: %s — %s\nsnapshots: %s — %s", yes(c.CopyUp), c.CopyUpWhy, yes(c.Snapshots), c.SnapshotsWhy)
}

// CheckCopyOnWrite probes the state root (where Worlds' uppers and the
// object store live) and source (a tree Worlds are made over; "" = none
// given) with a reflink of a probe file each. A directory that does not
// exist yet is probed at its nearest existing parent, which is where it
// would be made. Nothing is left behind.
func CheckCopyOnWrite(stateRoot, source string) (CopyOnWrite, error) {
	c := CopyOnWrite{StateRoot: stateRoot, Source: source}
	rootDir, err := existingAncestor(stateRoot)
	if err != nil {
		return c, fmt.Errorf("state root: %w", err)
	}
	rs, err := store.ReflinkSupported(rootDir)
	if err != nil {
		return c, fmt.Errorf("state root: %w", err)
	}
	c.StateRootFS = rs.FS
	if rs.Supported {
		c.Snapshots = true
		c.SnapshotsWhy = fmt.Sprintf("the state root %s is on %s, which clones files (reflink)", stateRoot, rs.FS)
	} else {
		c.SnapshotsWhy = fmt.Sprintf("the state root %s is on %s, which has no reflinks: snapshot objects and restores copy file contents; put STRATA_HOME on XFS (mkfs.xfs -m reflink=1) or btrfs for O(1) snapshots", stateRoot, rs.FS)
	}
	if source == "" {
		c.CopyUpWhy = "no source tree given to compare with the state root"
		return c, nil
	}
	srcDir, err := existingAncestor(source)
	if err != nil {
		return c, fmt.Errorf("source: %w", err)
	}
	same, err := store.SameFS(rootDir, srcDir)
	if err != nil {
		return c, err
	}
	c.SourceFS = c.StateRootFS
	if !same {
		// The source may be read-only to us: its type is enough here.
		ss, err := store.ReflinkSupported(srcDir)
		if err == nil {
			c.SourceFS = ss.FS
		} else {
			c.SourceFS = "another file system"
		}
		c.CopyUpWhy = fmt.Sprintf("the source %s (%s) and the state root %s (%s) are different file systems, so overlayfs copy-up copies a changed file's whole contents into the upper, and strata its source version into the object store; put STRATA_HOME on the source's file system", source, c.SourceFS, stateRoot, c.StateRootFS)
		if !rs.Supported || c.SourceFS != "xfs" && c.SourceFS != "btrfs" {
			c.CopyUpWhy += ", and make that XFS with reflink or btrfs"
		}
		return c, nil
	}
	if !rs.Supported {
		c.CopyUpWhy = fmt.Sprintf("the source and the state root share one %s file system, which has no reflinks: overlayfs copy-up copies a changed file's whole contents, and strata its source version; XFS (mkfs.xfs -m reflink=1) or btrfs would clone it", rs.FS)
		return c, nil
	}
	c.CopyUp = true
	c.CopyUpWhy = fmt.Sprintf("the source and the state root share one %s file system with reflinks: kernel overlayfs clones a file on copy-up and strata's copy of its source version (the base diff and apply compare with) is a clone too, so a one-byte edit to a big file costs almost no space (the fuse backends may copy)", rs.FS)
	return c, nil
}

// CopyOnWrite is CheckCopyOnWrite for this engine's state root.
func (e *Engine) CopyOnWrite(source string) (CopyOnWrite, error) {
	return CheckCopyOnWrite(e.Paths.Root, source)
}

// existingAncestor is dir, or its nearest parent that exists; it must be a
// directory.
func existingAncestor(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return "", fmt.Errorf("%s is not a directory", d)
			}
			return d, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(d)
		if parent == d || strings.TrimSpace(parent) == "" {
			return "", err
		}
		d = parent
	}
}
