// Package overlaytest holds helpers for tests of layered trees: recording a
// directory tree into a comparable value, diffing two recordings, building
// or dumping trees (with whiteout devices and xattrs) from a compact text
// spec or a map (WriteTree), scripted operations on a tree (Step), and loop
// file system images (LoopFS: XFS with reflinks, btrfs, ext4). It does not
// import overlay, so overlay's own tests can use it.
package overlaytest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/stratahq/strata/fsx"
)

// Node is one recorded path: its type, permission bits (with setuid, setgid
// and sticky), size, content hash for files and target for symlinks.
type Node struct {
	Type   string      // file, dir, symlink or other
	Mode   fs.FileMode // fs.ModePerm | ModeSetuid | ModeSetgid | ModeSticky bits
	Size   int64       // files only
	Hash   string      // sha256 of the content, files only
	Target string      // symlinks only
}

// ModeBits are the permission bits a Node records.
const ModeBits = fsx.PermBits

// Tree maps slash-separated relative paths to their Node. The root itself is
// not recorded.
type Tree map[string]Node

// FileNode builds the Node of a regular file.
func FileNode(mode fs.FileMode, content []byte) Node {
	sum := sha256.Sum256(content)
	return Node{Type: "file", Mode: mode & ModeBits, Size: int64(len(content)), Hash: hex.EncodeToString(sum[:])}
}

// DirNode builds the Node of a directory.
func DirNode(mode fs.FileMode) Node { return Node{Type: "dir", Mode: mode & ModeBits} }

// SymlinkNode builds the Node of a symlink. Symlink permission bits are not
// meaningful on Linux, so they are not recorded.
func SymlinkNode(target string) Node { return Node{Type: "symlink", Target: target} }

// OtherNode builds the Node of a device, fifo or socket.
func OtherNode(mode fs.FileMode) Node {
	return Node{Type: "other", Mode: mode & (ModeBits | fs.ModeType)}
}

// Record walks root without following symlinks and records every path below
// it. Top-level names listed in skip are left out with everything under them.
func Record(t testing.TB, root string, skip ...string) Tree {
	t.Helper()
	tree, err := RecordDir(root, skip...)
	if err != nil {
		t.Fatalf("record %s: %v", root, err)
	}
	return tree
}

// RecordDir is Record for callers without a testing.TB.
func RecordDir(root string, skip ...string) (Tree, error) {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	tree := Tree{}
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if rel == "" && skipped[e.Name()] {
				continue
			}
			p := e.Name()
			if rel != "" {
				p = rel + "/" + e.Name()
			}
			full := filepath.Join(dir, e.Name())
			info, err := os.Lstat(full)
			if err != nil {
				return err
			}
			switch {
			case info.Mode().IsRegular():
				data, err := os.ReadFile(full)
				if err != nil {
					return err
				}
				tree[p] = FileNode(info.Mode(), data)
			case info.IsDir():
				tree[p] = DirNode(info.Mode())
				if err := walk(full, p); err != nil {
					return err
				}
			case info.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(full)
				if err != nil {
					return err
				}
				tree[p] = SymlinkNode(target)
			default:
				tree[p] = OtherNode(info.Mode())
			}
		}
		return nil
	}
	return tree, walk(root, "")
}

// Paths returns the recorded paths in byte order.
func (t Tree) Paths() []string {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// String describes a node in one line.
func (n Node) String() string {
	switch n.Type {
	case "file":
		return fmt.Sprintf("file %04o size=%d sha256=%.12s", fsx.UnixMode(n.Mode), n.Size, n.Hash)
	case "dir":
		return fmt.Sprintf("dir %04o", fsx.UnixMode(n.Mode))
	case "symlink":
		return "symlink -> " + strconv.Quote(n.Target)
	}
	return fmt.Sprintf("other %v", n.Mode)
}

// DiffTrees lists, in path order, every difference between a and b in a
// human-readable line; it returns nil when they are equal.
func DiffTrees(a, b Tree) []string {
	all := map[string]bool{}
	for p := range a {
		all[p] = true
	}
	for p := range b {
		all[p] = true
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var diffs []string
	for _, p := range paths {
		na, inA := a[p]
		nb, inB := b[p]
		switch {
		case !inA:
			diffs = append(diffs, fmt.Sprintf("%q: only in second: %v", p, nb))
		case !inB:
			diffs = append(diffs, fmt.Sprintf("%q: only in first: %v", p, na))
		case na != nb:
			diffs = append(diffs, fmt.Sprintf("%q: %v != %v", p, na, nb))
		}
	}
	return diffs
}
