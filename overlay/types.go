package overlay

import (
	"io/fs"
	"time"
)

// Kind says how a path differs between the World's view and the lower tree.
type Kind uint8

const (
	Added Kind = iota + 1
	Modified
	Deleted
	TypeChanged
)

var kindNames = [...]string{Added: "added", Modified: "modified", Deleted: "deleted", TypeChanged: "type_changed"}

// String returns the stable name used in JSON output: added, modified,
// deleted, type_changed.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Letter is the one-letter glyph reviewers know from git: A, M, D, T.
func (k Kind) Letter() string {
	switch k {
	case Added:
		return "A"
	case Modified:
		return "M"
	case Deleted:
		return "D"
	case TypeChanged:
		return "T"
	}
	return "?"
}

// FileType is the type of a file system entry as strata reports it.
type FileType uint8

const (
	TypeFile FileType = iota + 1
	TypeDir
	TypeSymlink
	TypeOther // device, fifo or socket that is not a whiteout
)

var typeNames = [...]string{TypeFile: "file", TypeDir: "dir", TypeSymlink: "symlink", TypeOther: "other"}

// String returns the stable name used in JSON output: file, dir, symlink, other.
func (t FileType) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "unknown"
}

// FileTypeOf maps a mode to a FileType.
func FileTypeOf(m fs.FileMode) FileType {
	switch {
	case m.IsRegular():
		return TypeFile
	case m.IsDir():
		return TypeDir
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	}
	return TypeOther
}

// Change is one path that differs between the World's view and the lower.
type Change struct {
	Path      string      // slash-separated, relative to the layer root, never "" or "."
	Kind      Kind        //
	Type      FileType    // type in the World's view; for Deleted, the type the lower had
	LowerType FileType    // type in the lower (0 when the lower has no such path)
	Mode      fs.FileMode // type and permission bits in the World (the lower's for Deleted)
	Size      int64       // size in the World (the lower's for Deleted); 0 for dirs
	Target    string      // symlink target in the World
	Whiteout  bool        // the deletion was recorded by a whiteout marker
	Opaque    bool        // the path is, or lies under, an opaque (replaced) directory
	Ignored   bool        // matched an ignore rule; present only with ReadOptions.IncludeIgnored
	Note      string      // free text for the reviewer, e.g. "moved from src/a (overlay redirect)"
}

// ChangeSet is the sorted list of changes of one upper layer.
type ChangeSet struct {
	Dialect Dialect  // the dialect the upper was read in
	Changes []Change // sorted by Path (byte order)
}

// Dialect is the on-disk convention an upper layer uses for deletions and
// replaced directories.
type Dialect string

const (
	DialectAuto          Dialect = ""               // detect from the upper
	DialectKernel        Dialect = "kernel"         // kernel overlayfs
	DialectFuseOverlayfs Dialect = "fuse-overlayfs" // fuse-overlayfs
	DialectUnionfs       Dialect = "unionfs-fuse"   // unionfs-fuse -o cow
	DialectOCI           Dialect = "oci"            // OCI image layers and AUFS
)

// Layers names the two directories of one World's view. Read operations on
// Layers resolve a path exactly as a mounted overlay would, without a mount.
type Layers struct {
	Upper   string
	Lower   string
	Dialect Dialect // DialectAuto: detect from Upper
	// NoFileMarks says every mount of Upper passed metacopy=off (strata's
	// own kernel mounts, recorded in world.toml), so no file in it carries
	// a redirect or metacopy xattr: the change walk reads xattrs of
	// directories only. Leave it false for an upper mounted any other way.
	NoFileMarks bool
}

// Layer says which layer an entry was served from.
type Layer uint8

const (
	LayerUpper Layer = iota + 1
	LayerLower
)

// Entry is one resolved path of a World's view.
type Entry struct {
	Path     string // slash-separated, relative to the root
	Name     string // base name
	Type     FileType
	Mode     fs.FileMode
	Size     int64
	ModTime  time.Time
	Target   string // symlink target
	Layer    Layer  // which layer holds it
	RealPath string // absolute path of the entry on disk in that layer
}

// Backend is a way to mount an overlay.
type Backend string

const (
	BackendAuto          Backend = "auto"
	BackendKernel        Backend = "kernel"
	BackendFuseOverlayfs Backend = "fuse-overlayfs"
	BackendUnionfs       Backend = "unionfs-fuse"
)

// Dialect is the upper-layer dialect this backend writes.
func (b Backend) Dialect() Dialect {
	switch b {
	case BackendKernel:
		return DialectKernel
	case BackendFuseOverlayfs:
		return DialectFuseOverlayfs
	case BackendUnionfs:
		return DialectUnionfs
	}
	return DialectAuto
}
