package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unsafe"
)

// This file is the one place that knows how each dialect spells the layer
// vocabulary: whiteout and opaque marker names, the unionfs-fuse meta tree,
// the overlay xattrs and the char 0/0 whiteout device. Everything else (the
// change reader, capture, restore, the probe, the engine's session watcher
// and apply) asks it instead of spelling a marker itself.

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

// UnionfsMetaDirs are the meta trees unionfs-fuse may keep at an upper's
// root; the first is the one strata writes.
var UnionfsMetaDirs = []string{unionfsMeta, unionfsMetaOld}

// Xattr names. The kernel uses trusted.overlay.* as root and user.overlay.*
// with the userxattr mount option; fuse-overlayfs falls back to
// user.fuseoverlayfs.* when it may not write trusted xattrs.
const (
	xattrTrustedOverlay = "trusted.overlay."
	xattrUserOverlay    = "user.overlay."
	xattrFuseOverlayfs  = "user.fuseoverlayfs."
	OpaqueValue         = "y"
)

var (
	kernelXattrPrefixes  = []string{xattrTrustedOverlay, xattrUserOverlay}
	overlayXattrPrefixes = []string{xattrTrustedOverlay, xattrUserOverlay, xattrFuseOverlayfs}
	kernelOpaqueXattrs   = []string{xattrTrustedOverlay + "opaque", xattrUserOverlay + "opaque"}
	fuseOpaqueXattrs     = []string{xattrTrustedOverlay + "opaque", xattrUserOverlay + "opaque", xattrFuseOverlayfs + "opaque"}
	redirectXattrs       = []string{xattrTrustedOverlay + "redirect", xattrUserOverlay + "redirect"}
	metacopyXattrs       = []string{xattrTrustedOverlay + "metacopy", xattrUserOverlay + "metacopy"}
	whiteoutXattrs       = []string{xattrTrustedOverlay + "whiteout", xattrUserOverlay + "whiteout"}
)

// Rules is what a dialect makes of names, device nodes and xattrs.
type Rules struct {
	dialect       Dialect
	whNames       bool // .wh.NAME files are whiteouts, .wh..wh.* bookkeeping
	charWhiteouts bool // char device 0/0 is a whiteout
	xattrs        bool // overlay xattrs (opaque, and for the kernel redirect, metacopy, whiteout)
	kernelXattrs  bool // redirect, metacopy and xattr whiteouts
	unionfs       bool // .unionfs-fuse/ meta tree
	opaqueXattrs  []string
	noFileMarks   bool // the upper was only mounted with metacopy=off (Layers.NoFileMarks)
}

func RulesFor(d Dialect) (Rules, error) {
	switch d {
	case DialectKernel:
		return Rules{dialect: d, charWhiteouts: true, xattrs: true, kernelXattrs: true, opaqueXattrs: kernelOpaqueXattrs}, nil
	case DialectFuseOverlayfs:
		return Rules{dialect: d, whNames: true, charWhiteouts: true, xattrs: true, opaqueXattrs: fuseOpaqueXattrs}, nil
	case DialectOCI:
		return Rules{dialect: d, whNames: true, charWhiteouts: true}, nil
	case DialectUnionfs:
		return Rules{dialect: d, unionfs: true}, nil
	}
	return Rules{}, fmt.Errorf("unknown overlay dialect %q", d)
}

// Marker is what one upper directory entry, or one xattr on it, means in a
// dialect.
type Marker uint8

const (
	MarkerPlain    Marker = iota // the World's own entry (or a user xattr)
	MarkerSkip                   // bookkeeping, never shown or reported
	MarkerWhiteout               // hides the lower entry it names
	MarkerOpaque                 // marks its directory opaque
	MarkerRedirect               // (xattr) a renamed dir's origin
	MarkerMetacopy               // (xattr) a metadata-only copy-up
)

// ClassifyName decides from the name alone (no stat) where it can; for a
// whiteout it returns the name of the entry hidden.
func (r Rules) ClassifyName(name string, atRoot bool) (Marker, string) {
	if strings.HasPrefix(name, fuseHidden) {
		return MarkerSkip, ""
	}
	if r.unionfs && atRoot && isUnionfsMeta(name) {
		return MarkerSkip, ""
	}
	if r.whNames && strings.HasPrefix(name, whPrefix) && len(name) > len(whPrefix) {
		switch {
		case name == whOpaqueFile || name == whOpaqueChar:
			return MarkerOpaque, ""
		case strings.HasPrefix(name, whMetaPrefix):
			return MarkerSkip, ""
		}
		return MarkerWhiteout, name[len(whPrefix):]
	}
	return MarkerPlain, name
}

func isUnionfsMeta(name string) bool { return name == unionfsMeta || name == unionfsMetaOld }

// isWhiteoutNode reports whether an entry that classifyName called plain is
// a whiteout by its type: a char device 0/0, or for the kernel a zero-size
// file carrying an overlay.whiteout xattr.
func (r Rules) isWhiteoutNode(full string, info fs.FileInfo) bool {
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

// IsWhiteoutDev is isCharWhiteout for a raw stat's mode and rdev: whether
// the dialect reads it as the char 0/0 whiteout device.
func (r Rules) IsWhiteoutDev(mode uint32, rdev uint64) bool {
	return r.charWhiteouts && isCharWhiteoutDev(mode, rdev)
}

func isCharWhiteout(info fs.FileInfo) bool {
	if info.Mode()&fs.ModeCharDevice == 0 || info.Mode()&fs.ModeDevice == 0 {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

func isCharWhiteoutDev(mode uint32, rdev uint64) bool {
	return mode&syscall.S_IFMT == syscall.S_IFCHR && rdev == 0
}

// MknodWhiteout makes the char 0/0 whiteout device at p.
func MknodWhiteout(p string) error {
	return syscall.Mknod(p, syscall.S_IFCHR, 0)
}

// ClassifyXattr says what the xattr name means on an upper entry in r's
// dialect: an opaque mark, a redirect, a metacopy or whiteout mark, other
// overlay bookkeeping (skip), or a user's own xattr (plain).
func (r Rules) ClassifyXattr(name string) Marker {
	if !IsOverlayXattr(name) {
		return MarkerPlain
	}
	switch {
	case r.xattrs && slices.Contains(r.opaqueXattrs, name):
		return MarkerOpaque
	case r.kernelXattrs && slices.Contains(redirectXattrs, name):
		return MarkerRedirect
	case r.kernelXattrs && slices.Contains(metacopyXattrs, name):
		return MarkerMetacopy
	case r.kernelXattrs && slices.Contains(whiteoutXattrs, name):
		return MarkerWhiteout
	}
	return MarkerSkip
}

// IsOverlayXattr reports whether name is any overlay's bookkeeping rather
// than a user's attribute.
func IsOverlayXattr(name string) bool {
	for _, p := range overlayXattrPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// IsOpaqueValue reports whether an opaque xattr's value marks the dir opaque.
func IsOpaqueValue(v []byte) bool { return string(v) == OpaqueValue }

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
func (r Rules) readMarks(full string, info fs.FileInfo) dirMarks {
	var m dirMarks
	if !r.xattrs || (!info.IsDir() && !info.Mode().IsRegular()) {
		return m
	}
	if !info.IsDir() && (!r.kernelXattrs || r.noFileMarks) {
		// A file's only marks are the kernel's redirect and metacopy: in
		// the other dialects an xattr read per file is wasted, and so it
		// is in a kernel upper only ever mounted with metacopy=off (a
		// file gets a redirect only as a metacopy; a whiteout is the 0/0
		// device lstat sees; opaque and dir redirects are on dirs).
		return m
	}
	names := llistxattr(full)
	if len(names) == 0 {
		return m
	}
	for _, name := range names {
		switch r.ClassifyXattr(name) {
		case MarkerOpaque:
			if v, ok := lgetxattr(full, name); ok && info.IsDir() && IsOpaqueValue(v) {
				m.opaque = true
			}
		case MarkerRedirect:
			if v, ok := lgetxattr(full, name); ok {
				m.redirect, m.hasRedirect = string(v), true
			}
		case MarkerMetacopy:
			if !info.IsDir() {
				m.metacopy = true
			}
		}
	}
	return m
}

// whiteoutName is the OCI/AUFS marker file that hides base in its directory.
func whiteoutName(base string) string { return whPrefix + base }

// UnionfsHiddenPath is the upper-relative path of the marker in the meta
// tree meta that hides rel.
func UnionfsHiddenPath(meta, rel string) string { return meta + "/" + rel + unionfsHidden }

// UnionfsHiddenTarget turns a meta-tree entry name into the name it hides.
func UnionfsHiddenTarget(name string) (string, bool) {
	t, ok := strings.CutSuffix(name, unionfsHidden)
	return t, ok && t != ""
}

// deletionMarkers lists the upper-relative paths, other than rel itself,
// where dialect d may spell rel's deletion by name (DialectAuto: where any
// dialect may).
func deletionMarkers(d Dialect, rel string) []string {
	dir, base := path.Split(rel)
	var out []string
	if d == DialectAuto || d == DialectOCI || d == DialectFuseOverlayfs {
		out = append(out, dir+whiteoutName(base))
	}
	if d == DialectAuto || d == DialectUnionfs {
		for _, meta := range UnionfsMetaDirs {
			out = append(out, UnionfsHiddenPath(meta, rel))
		}
	}
	return out
}

// DeletionMarkers lists the upper-relative (slash) paths, other than rel
// itself, where dialect d may keep a marker spelling rel's deletion by name:
// removing them (and rel) makes the path read from the lower again.
// DialectAuto lists every dialect's.
func DeletionMarkers(d Dialect, rel string) []string { return deletionMarkers(d, rel) }

// WhiteoutSpelling says how d marks rel deleted: by the char 0/0 device at
// rel itself (node), or by an empty marker file at the upper-relative path
// file.
func WhiteoutSpelling(d Dialect, rel string) (node bool, file string) {
	switch d {
	case DialectOCI:
		dir, base := path.Split(rel)
		return false, dir + whiteoutName(base)
	case DialectUnionfs:
		return false, UnionfsHiddenPath(UnionfsMetaDirs[0], rel)
	}
	return true, ""
}

// OpaqueSpelling is how a dialect marks one directory opaque: an xattr on
// it, char 0/0 nodes and empty files inside it, or a dir in the meta tree.
type OpaqueSpelling struct {
	Xattrs  []string // set to opaqueValue on the dir
	Nodes   []string // char 0/0 names inside the dir
	Files   []string // empty marker files inside the dir
	MetaDir string   // upper-relative dir to create (unionfs)
}

// OpaqueSpellingFor says how d marks the upper dir rel opaque; userXattr
// picks the kernel's user.overlay.* names. A layer root has no lower dir to
// hide in the name-marker dialects, so it gets nothing there.
func OpaqueSpellingFor(d Dialect, rel string, userXattr bool) OpaqueSpelling {
	switch d {
	case DialectKernel:
		if userXattr {
			return OpaqueSpelling{Xattrs: []string{xattrUserOverlay + "opaque"}}
		}
		return OpaqueSpelling{Xattrs: []string{xattrTrustedOverlay + "opaque"}}
	case DialectFuseOverlayfs:
		// fuse-overlayfs itself writes all three marks; it honours any one.
		return OpaqueSpelling{Xattrs: []string{xattrTrustedOverlay + "opaque"}, Nodes: []string{whOpaqueChar}, Files: []string{whOpaqueFile}}
	case DialectOCI:
		if rel == "" {
			return OpaqueSpelling{}
		}
		return OpaqueSpelling{Files: []string{whOpaqueFile}}
	case DialectUnionfs:
		if rel == "" {
			return OpaqueSpelling{}
		}
		return OpaqueSpelling{MetaDir: UnionfsHiddenPath(UnionfsMetaDirs[0], rel)}
	}
	return OpaqueSpelling{}
}

// UpperMark is what one upper entry means: Marker, and for a whiteout the
// path (relative to the World's root) it deletes, otherwise the entry's own.
type UpperMark struct {
	Marker Marker
	Target string
	IsDir  bool
}

// InMetaTree reports whether the upper-relative path rel lies in a meta tree
// of dialect d (unionfs-fuse's .unionfs-fuse/), which is classified rather
// than shown as the World's own files.
func InMetaTree(d Dialect, rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return d == DialectUnionfs && isUnionfsMeta(first)
}

// ClassifyUpperEntry says what the upper entry rel (slash-separated,
// relative to upper) means in dialect d: a whiteout of Target, an opaque
// mark or bookkeeping (Skip/Opaque, nothing to report), or a plain entry.
// It stats the entry when its name does not decide; an entry gone since is
// an error wrapping fs.ErrNotExist. DialectAuto reads as the kernel's.
func ClassifyUpperEntry(d Dialect, upper, rel string) (UpperMark, error) {
	if d == DialectAuto {
		d = DialectKernel
	}
	r, err := RulesFor(d)
	if err != nil {
		return UpperMark{}, err
	}
	if InMetaTree(d, rel) {
		_, rest, _ := strings.Cut(rel, "/")
		if hidden, ok := UnionfsHiddenTarget(rest); ok {
			return UpperMark{Marker: MarkerWhiteout, Target: hidden}, nil
		}
		return UpperMark{Marker: MarkerSkip}, nil
	}
	dir, name := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	switch kind, hidden := r.ClassifyName(name, dir == ""); kind {
	case MarkerWhiteout:
		return UpperMark{Marker: MarkerWhiteout, Target: JoinRel(dir, hidden)}, nil
	case MarkerSkip, MarkerOpaque:
		return UpperMark{Marker: kind}, nil
	}
	full := filepath.Join(upper, filepath.FromSlash(rel))
	info, err := os.Lstat(full)
	if err != nil {
		return UpperMark{}, err
	}
	if r.isWhiteoutNode(full, info) {
		return UpperMark{Marker: MarkerWhiteout, Target: rel}, nil
	}
	return UpperMark{Marker: MarkerPlain, Target: rel, IsDir: info.IsDir()}, nil
}

// UpperDeletes reports whether the upper of dialect d marks rel deleted,
// by a whiteout node at rel or a name marker elsewhere.
func UpperDeletes(d Dialect, upper, rel string) bool {
	if m, err := ClassifyUpperEntry(d, upper, rel); err == nil && m.Marker == MarkerWhiteout {
		return true
	}
	for _, p := range deletionMarkers(d, rel) {
		if _, err := os.Lstat(filepath.Join(upper, filepath.FromSlash(p))); err == nil {
			return true
		}
	}
	return false
}

// UpperOpaque reports whether the upper of dialect d marks the dir rel
// opaque, by an xattr, a marker inside it, or a meta-tree dir.
func UpperOpaque(d Dialect, upper, rel string) bool {
	r, err := RulesFor(d)
	if err != nil {
		return false
	}
	full := filepath.Join(upper, filepath.FromSlash(rel))
	info, err := os.Lstat(full)
	if err != nil || !info.IsDir() {
		return false
	}
	if r.readMarks(full, info).opaque {
		return true
	}
	if r.whNames {
		for _, name := range []string{whOpaqueFile, whOpaqueChar} {
			if m, _ := r.ClassifyName(name, false); m != MarkerOpaque {
				continue
			}
			if _, err := os.Lstat(filepath.Join(full, name)); err == nil {
				return true
			}
		}
	}
	if r.unionfs {
		for _, meta := range UnionfsMetaDirs {
			if fi, err := os.Lstat(filepath.Join(upper, filepath.FromSlash(UnionfsHiddenPath(meta, rel)))); err == nil && fi.IsDir() {
				return true
			}
		}
	}
	return false
}

// UnionfsMetaRoot names the unionfs-fuse meta tree upper holds, if any.
func UnionfsMetaRoot(upper string) (string, bool) {
	for _, meta := range UnionfsMetaDirs {
		if fi, err := os.Lstat(filepath.Join(upper, meta)); err == nil && fi.IsDir() {
			return meta, true
		}
	}
	return "", false
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
	if _, ok := UnionfsMetaRoot(upper); ok {
		return DialectUnionfs, nil
	}
	var sawWh, sawChar bool
	errFuse, errKernel := errors.New("fuse"), errors.New("kernel")
	// kernelMark reports the bookkeeping only the kernel writes: its uuid,
	// origin file handles, impure, redirect and metacopy.
	kernelMark := func(names []string) bool {
		for _, n := range names {
			for _, p := range kernelXattrPrefixes {
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
			if strings.HasPrefix(n, xattrFuseOverlayfs) {
				return errFuse
			}
			if slices.Contains(fuseOpaqueXattrs, n) {
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
					if strings.HasPrefix(n, xattrFuseOverlayfs) {
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
	llistxattrCalls.Add(1)
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
