package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// Marker names of the foreign (non-kernel) dialects.
const (
	whPrefix       = ".wh."
	whMetaPrefix   = ".wh..wh."     // AUFS/OCI bookkeeping: .wh..wh.aufs, .wh..wh.plnk, .wh..wh..dr.*, .wh..wh.hino
	whOpaqueFile   = ".wh..wh..opq" // OCI and fuse-overlayfs opaque marker
	whOpaqueChar   = ".wh..opq"     // fuse-overlayfs char-device opaque marker
	fuseHidden     = ".fuse_hidden" // files FUSE keeps for open-but-deleted inodes
	unionfsMeta    = ".unionfs-fuse"
	unionfsMetaOld = ".unionfs" // upstream unionfs-fuse since 2015
	unionfsHidden  = "_HIDDEN~"
)

// Xattr names. The kernel uses trusted.overlay.* as root and user.overlay.*
// with the userxattr mount option; fuse-overlayfs falls back to
// user.fuseoverlayfs.* when it may not write trusted xattrs.
var (
	opaqueXattrs   = []string{"trusted.overlay.opaque", "user.overlay.opaque", "user.fuseoverlayfs.opaque"}
	redirectXattrs = []string{"trusted.overlay.redirect", "user.overlay.redirect"}
	metacopyXattrs = []string{"trusted.overlay.metacopy", "user.overlay.metacopy"}
	whiteoutXattrs = []string{"trusted.overlay.whiteout", "user.overlay.whiteout"}
)

// rules is what a dialect makes of names, device nodes and xattrs.
type rules struct {
	dialect       Dialect
	whNames       bool // .wh.NAME files are whiteouts, .wh..wh.* bookkeeping
	charWhiteouts bool // char device 0/0 is a whiteout
	xattrs        bool // overlay xattrs (opaque, and for the kernel redirect, metacopy, whiteout)
	kernelXattrs  bool // redirect, metacopy and xattr whiteouts
	unionfs       bool // .unionfs-fuse/ meta tree
}

func rulesFor(d Dialect) (rules, error) {
	switch d {
	case DialectKernel:
		return rules{dialect: d, charWhiteouts: true, xattrs: true, kernelXattrs: true}, nil
	case DialectFuseOverlayfs:
		return rules{dialect: d, whNames: true, charWhiteouts: true, xattrs: true}, nil
	case DialectOCI:
		return rules{dialect: d, whNames: true, charWhiteouts: true}, nil
	case DialectUnionfs:
		return rules{dialect: d, unionfs: true}, nil
	}
	return rules{}, fmt.Errorf("unknown overlay dialect %q", d)
}

// markerKind classifies one upper directory entry.
type markerKind uint8

const (
	entryReal     markerKind = iota
	entrySkip                // bookkeeping, never shown or reported
	entryWhiteout            // hides the lower entry named by the returned name
	entryOpaque              // marks its directory opaque
)

// classifyName decides from the name alone (no stat) where it can.
func (r rules) classifyName(name string, atRoot bool) (markerKind, string) {
	if strings.HasPrefix(name, fuseHidden) {
		return entrySkip, ""
	}
	if r.unionfs && atRoot && (name == unionfsMeta || name == unionfsMetaOld) {
		return entrySkip, ""
	}
	if r.whNames && strings.HasPrefix(name, whPrefix) {
		switch {
		case name == whOpaqueFile || name == whOpaqueChar:
			return entryOpaque, ""
		case strings.HasPrefix(name, whMetaPrefix):
			return entrySkip, ""
		}
		return entryWhiteout, name[len(whPrefix):]
	}
	return entryReal, name
}

// isWhiteoutNode reports whether an entry that classifyName called real is a
// whiteout by its type: a char device 0/0, or for the kernel a zero-size file
// carrying an overlay.whiteout xattr.
func (r rules) isWhiteoutNode(full string, info fs.FileInfo) bool {
	if r.charWhiteouts && isCharWhiteout(info) {
		return true
	}
	if r.kernelXattrs && info.Mode().IsRegular() && info.Size() == 0 {
		for _, name := range whiteoutXattrs {
			if _, ok := lgetxattr(full, name); ok {
				return true
			}
		}
	}
	return false
}

func isCharWhiteout(info fs.FileInfo) bool {
	if info.Mode()&fs.ModeCharDevice == 0 || info.Mode()&fs.ModeDevice == 0 {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// dirMarks are the xattr marks of one upper directory or file.
type dirMarks struct {
	opaque      bool
	redirect    string
	hasRedirect bool
	metacopy    bool
}

// readMarks reads the overlay xattrs of one upper entry with a single
// listxattr in the common case of none. Symlinks are not asked: overlay marks
// live on dirs and files only.
func (r rules) readMarks(full string, info fs.FileInfo) dirMarks {
	var m dirMarks
	if !r.xattrs || (!info.IsDir() && !info.Mode().IsRegular()) {
		return m
	}
	names := llistxattr(full)
	if len(names) == 0 {
		return m
	}
	for _, name := range names {
		switch {
		case info.IsDir() && hasString(opaqueXattrs, name):
			if v, ok := lgetxattr(full, name); ok && string(v) == "y" {
				m.opaque = true
			}
		case r.kernelXattrs && hasString(redirectXattrs, name):
			if v, ok := lgetxattr(full, name); ok {
				m.redirect, m.hasRedirect = string(v), true
			}
		case r.kernelXattrs && !info.IsDir() && hasString(metacopyXattrs, name):
			m.metacopy = true
		}
	}
	return m
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// DetectDialect guesses the dialect an upper directory was written in: a
// unionfs-fuse meta tree at the root means unionfs-fuse; fuse-overlayfs marks
// (a char .wh..opq, user.fuseoverlayfs.* xattrs, a .wh..wh..opq next to an
// opaque xattr, or .wh. files beside char 0/0 whiteouts) mean fuse-overlayfs;
// kernel bookkeeping xattrs (uuid, origin, impure, redirect, metacopy) mean
// kernel overlayfs; .wh. files alone mean OCI/AUFS; anything else, an empty
// upper included, is read as kernel overlayfs. The walk stops at the first
// decisive mark.
func DetectDialect(upper string) (Dialect, error) {
	info, err := os.Lstat(upper)
	if err != nil {
		return DialectAuto, fmt.Errorf("detect dialect of %s: %w", upper, err)
	}
	if !info.IsDir() {
		return DialectAuto, fmt.Errorf("detect dialect of %s: %w", upper, syscall.ENOTDIR)
	}
	for _, meta := range []string{unionfsMeta, unionfsMetaOld} {
		if fi, err := os.Lstat(filepath.Join(upper, meta)); err == nil && fi.IsDir() {
			return DialectUnionfs, nil
		}
	}
	var sawWh, sawChar bool
	errFuse, errKernel := errors.New("fuse"), errors.New("kernel")
	// kernelMark reports the bookkeeping only the kernel writes: its uuid,
	// origin file handles, impure, redirect and metacopy.
	kernelMark := func(names []string) bool {
		for _, n := range names {
			for _, p := range []string{"trusted.overlay.", "user.overlay."} {
				switch strings.TrimPrefix(n, p) {
				case "uuid", "origin", "impure", "redirect", "metacopy":
					if strings.HasPrefix(n, p) {
						return true
					}
				}
			}
		}
		return false
	}
	var walk func(dir string) error
	walk = func(dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		names := llistxattr(dir)
		if kernelMark(names) {
			return errKernel
		}
		opaqueXattr := false
		for _, n := range names {
			if strings.HasPrefix(n, "user.fuseoverlayfs.") {
				return errFuse
			}
			if hasString(opaqueXattrs, n) {
				opaqueXattr = true
			}
		}
		for _, e := range entries {
			name := e.Name()
			full := filepath.Join(dir, name)
			switch {
			case name == whOpaqueChar && e.Type()&fs.ModeCharDevice != 0:
				return errFuse
			case name == whOpaqueFile && opaqueXattr:
				return errFuse
			case strings.HasPrefix(name, whPrefix) && e.Type().IsRegular():
				sawWh = true
			case e.Type()&fs.ModeCharDevice != 0:
				if fi, err := os.Lstat(full); err == nil && isCharWhiteout(fi) {
					sawChar = true
				}
			case e.IsDir():
				if err := walk(full); err != nil {
					return err
				}
			case e.Type().IsRegular():
				names := llistxattr(full)
				for _, n := range names {
					if strings.HasPrefix(n, "user.fuseoverlayfs.") {
						return errFuse
					}
				}
				if kernelMark(names) {
					return errKernel
				}
			}
			if sawWh && sawChar {
				return errFuse
			}
		}
		return nil
	}
	switch err := walk(upper); {
	case errors.Is(err, errFuse):
		return DialectFuseOverlayfs, nil
	case errors.Is(err, errKernel):
		return DialectKernel, nil
	case err != nil:
		return DialectAuto, fmt.Errorf("detect dialect of %s: %w", upper, err)
	case sawWh:
		return DialectOCI, nil
	}
	return DialectKernel, nil
}

// llistxattr lists the xattr names of path without following a final
// symlink; errors (no xattr support, a vanished file) read as none.
func llistxattr(path string) []string {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil
	}
	var small [512]byte
	buf := small[:]
	for {
		n, _, errno := syscall.Syscall(syscall.SYS_LLISTXATTR, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if errno == syscall.ERANGE && len(buf) < 1<<16 {
			buf = make([]byte, len(buf)*8)
			continue
		}
		if errno != 0 || n == 0 {
			return nil
		}
		var names []string
		for _, name := range bytes.Split(buf[:n], []byte{0}) {
			if len(name) > 0 {
				names = append(names, string(name))
			}
		}
		return names
	}
}

// lgetxattr reads one xattr without following a final symlink.
func lgetxattr(path, name string) ([]byte, bool) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil, false
	}
	a, err := syscall.BytePtrFromString(name)
	if err != nil {
		return nil, false
	}
	buf := make([]byte, 4096)
	n, _, errno := syscall.Syscall6(syscall.SYS_LGETXATTR, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if errno != 0 {
		return nil, false
	}
	return buf[:n], true
}
