package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
)

// ManifestVersion is the manifest format this package writes.
const ManifestVersion = 1

// EntryKind is the type of one manifest entry, whatever the dialect spelled it as.
type EntryKind uint8

const (
	EntryFile EntryKind = iota + 1
	EntryDir
	EntrySymlink
	EntryWhiteout // the path is deleted: the lower's version is hidden
	EntryOther    // device, fifo or socket (Mode carries its S_IFMT type)
)

var entryKindNames = [...]string{EntryFile: "file", EntryDir: "dir", EntrySymlink: "symlink", EntryWhiteout: "whiteout", EntryOther: "other"}

// entryKindCodes are the one-letter codes of the manifest encoding.
var entryKindCodes = [...]byte{EntryFile: 'f', EntryDir: 'd', EntrySymlink: 'l', EntryWhiteout: 'w', EntryOther: 'o'}

func (k EntryKind) String() string {
	if int(k) < len(entryKindNames) && entryKindNames[k] != "" {
		return entryKindNames[k]
	}
	return "unknown"
}

// ManifestEntry is one path of a frozen upper layer, in dialect-neutral form.
type ManifestEntry struct {
	Path   string            // slash-separated, relative to the upper root; "" only for Manifest.Root
	Kind   EntryKind         //
	Mode   uint32            // permission, setuid, setgid and sticky bits; for EntryOther also the S_IFMT type
	Size   int64             // files: content size
	MTime  int64             // modification time, ns since the epoch
	UID    int               //
	GID    int               //
	Object ObjectID          // files: content in the Store
	Target string            // symlinks: the link text, byte for byte
	Opaque bool              // dirs: the lower's directory of the same path is hidden
	Rdev   uint64            // EntryOther devices: device number
	Xattrs map[string][]byte // user-meaningful extended attributes; overlay bookkeeping is never kept
}

// FileMode is the entry's type and permission bits as an fs.FileMode
// (a whiteout reports as a character device).
func (e *ManifestEntry) FileMode() fs.FileMode {
	m := fsx.FileMode(e.Mode)
	switch e.Kind {
	case EntryDir:
		m |= fs.ModeDir
	case EntrySymlink:
		m |= fs.ModeSymlink
	case EntryWhiteout:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case EntryOther:
		switch e.Mode & 0o170000 {
		case 0o010000:
			m |= fs.ModeNamedPipe
		case 0o140000:
			m |= fs.ModeSocket
		case 0o020000:
			m |= fs.ModeDevice | fs.ModeCharDevice
		case 0o060000:
			m |= fs.ModeDevice
		}
	}
	return m
}

// Manifest is one upper layer frozen exactly: every entry (empty dirs too),
// with whiteouts and opaque dirs in dialect-neutral form.
type Manifest struct {
	Version int
	Dialect overlay.Dialect // dialect the upper was captured from
	Root    ManifestEntry   // the upper directory itself (mode, owner, times, opaque)
	Entries []ManifestEntry // sorted by Path in byte order, unique
}

// Lookup returns the entry at path, or nil.
func (m *Manifest) Lookup(path string) *ManifestEntry {
	i, ok := slices.BinarySearchFunc(m.Entries, path, func(e ManifestEntry, p string) int { return strings.Compare(e.Path, p) })
	if !ok {
		return nil
	}
	return &m.Entries[i]
}

// Objects yields the object id of every file entry (with repeats), for
// building GC's live set.
func (m *Manifest) Objects() iter.Seq[ObjectID] {
	return func(yield func(ObjectID) bool) {
		for i := range m.Entries {
			if m.Entries[i].Kind == EntryFile && !yield(m.Entries[i].Object) {
				return
			}
		}
	}
}

// CorruptManifestError says a manifest file is truncated, altered or malformed.
type CorruptManifestError struct {
	Path   string
	Reason string
}

func (e *CorruptManifestError) Error() string {
	return fmt.Sprintf("corrupt manifest %s: %s", e.Path, e.Reason)
}

const manifestMagic = "strata-manifest"

// EncodeManifest renders m in the manifest format:
//
//	strata-manifest 1
//	dialect "kernel"
//	<k> <mode> <uid> <gid> <size> <mtime-ns> <object|-> <o|-> <rdev> <"path"> <"target"> [<"xattr"> <"value">]...
//	sum <entries> <sha256 of every byte above>
//
// k is f, d, l, w or o; mode is octal; strings are Go-quoted, which keeps
// every byte of a name (newlines, invalid UTF-8) and round-trips exactly.
// The first entry line is the root, with path "".
func EncodeManifest(m *Manifest) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(64 + 160*len(m.Entries))
	fmt.Fprintf(&b, "%s %d\ndialect %s\n", manifestMagic, ManifestVersion, strconv.Quote(string(m.Dialect)))
	root := m.Root
	root.Path, root.Kind = "", EntryDir
	encodeEntry(&b, &root)
	prev := ""
	for i := range m.Entries {
		e := &m.Entries[i]
		if err := validManifestPath(e.Path); err != nil {
			return nil, fmt.Errorf("encode manifest: %w", err)
		}
		if i > 0 && e.Path <= prev {
			return nil, fmt.Errorf("encode manifest: entries not sorted or not unique at %q", e.Path)
		}
		if e.Kind == 0 || int(e.Kind) >= len(entryKindCodes) {
			return nil, fmt.Errorf("encode manifest: %q has unknown kind %d", e.Path, e.Kind)
		}
		if e.Kind == EntryFile && !e.Object.Valid() {
			return nil, fmt.Errorf("encode manifest: file %q has invalid object id %q", e.Path, e.Object)
		}
		prev = e.Path
		encodeEntry(&b, e)
	}
	sum := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, "sum %d %s\n", len(m.Entries)+1, hex.EncodeToString(sum[:]))
	return b.Bytes(), nil
}

func encodeEntry(b *bytes.Buffer, e *ManifestEntry) {
	b.WriteByte(entryKindCodes[e.Kind])
	b.WriteByte(' ')
	b.WriteString(strconv.FormatUint(uint64(e.Mode), 8))
	for _, n := range [...]int64{int64(e.UID), int64(e.GID), e.Size, e.MTime} {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(n, 10))
	}
	b.WriteByte(' ')
	if e.Object == "" {
		b.WriteByte('-')
	} else {
		b.WriteString(string(e.Object))
	}
	if e.Opaque {
		b.WriteString(" o ")
	} else {
		b.WriteString(" - ")
	}
	b.WriteString(strconv.FormatUint(e.Rdev, 10))
	b.WriteByte(' ')
	b.WriteString(strconv.Quote(e.Path))
	b.WriteByte(' ')
	b.WriteString(strconv.Quote(e.Target))
	if len(e.Xattrs) > 0 {
		names := make([]string, 0, len(e.Xattrs))
		for n := range e.Xattrs {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			b.WriteByte(' ')
			b.WriteString(strconv.Quote(n))
			b.WriteByte(' ')
			b.WriteString(strconv.Quote(string(e.Xattrs[n])))
		}
	}
	b.WriteByte('\n')
}

// DecodeManifest parses data written by EncodeManifest; name labels errors.
func DecodeManifest(name string, data []byte) (*Manifest, error) {
	corrupt := func(format string, args ...any) error {
		return &CorruptManifestError{Path: name, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) == 0 {
		return nil, corrupt("empty file")
	}
	if data[len(data)-1] != '\n' {
		return nil, corrupt("does not end with a newline (truncated?)")
	}
	body := data[:len(data)-1]
	cut := bytes.LastIndexByte(body, '\n')
	trailer := string(body[cut+1:])
	body = data[:cut+1]
	fields := strings.Fields(trailer)
	if len(fields) != 3 || fields[0] != "sum" {
		return nil, corrupt("missing checksum trailer (truncated?)")
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != fields[2] {
		return nil, corrupt("checksum mismatch")
	}
	count, err := strconv.Atoi(fields[1])
	if err != nil {
		return nil, corrupt("bad entry count %q", fields[1])
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) < 3 {
		return nil, corrupt("too short")
	}
	head := strings.Fields(lines[0])
	if len(head) != 2 || head[0] != manifestMagic {
		return nil, corrupt("not a strata manifest")
	}
	version, err := strconv.Atoi(head[1])
	if err != nil || version != ManifestVersion {
		return nil, corrupt("unsupported version %q", head[1])
	}
	dialectText, ok := strings.CutPrefix(lines[1], "dialect ")
	if !ok {
		return nil, corrupt("line 2: missing dialect")
	}
	dialect, err := strconv.Unquote(dialectText)
	if err != nil {
		return nil, corrupt("line 2: bad dialect: %v", err)
	}
	entryLines := lines[2:]
	if len(entryLines) != count {
		return nil, corrupt("trailer says %d entries, found %d", count, len(entryLines))
	}
	m := &Manifest{Version: version, Dialect: overlay.Dialect(dialect), Entries: make([]ManifestEntry, 0, count-1)}
	for i, line := range entryLines {
		e, err := decodeEntry(line)
		if err != nil {
			return nil, corrupt("line %d: %v", i+3, err)
		}
		if i == 0 {
			if e.Path != "" || e.Kind != EntryDir {
				return nil, corrupt("line 3: first entry must be the root directory")
			}
			m.Root = e
			continue
		}
		if err := validManifestPath(e.Path); err != nil {
			return nil, corrupt("line %d: %v", i+3, err)
		}
		if n := len(m.Entries); n > 0 && e.Path <= m.Entries[n-1].Path {
			return nil, corrupt("line %d: %q out of order", i+3, e.Path)
		}
		if e.Kind == EntryFile && !e.Object.Valid() {
			return nil, corrupt("line %d: file %q has invalid object id", i+3, e.Path)
		}
		m.Entries = append(m.Entries, e)
	}
	return m, nil
}

func decodeEntry(line string) (ManifestEntry, error) {
	var e ManifestEntry
	word := func() (string, error) {
		w, rest, _ := strings.Cut(line, " ")
		if w == "" {
			return "", errors.New("missing field")
		}
		line = rest
		return w, nil
	}
	quoted := func() (string, error) {
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			return "", fmt.Errorf("bad quoted string: %w", err)
		}
		s, err := strconv.Unquote(q)
		if err != nil {
			return "", err
		}
		line = line[len(q):]
		if line != "" {
			if line[0] != ' ' {
				return "", errors.New("junk after quoted string")
			}
			line = line[1:]
		}
		return s, nil
	}
	var nums [9]string
	for i := range nums {
		w, err := word()
		if err != nil {
			return e, err
		}
		nums[i] = w
	}
	if len(nums[0]) != 1 {
		return e, fmt.Errorf("bad kind %q", nums[0])
	}
	for k, c := range entryKindCodes {
		if c != 0 && c == nums[0][0] {
			e.Kind = EntryKind(k)
		}
	}
	if e.Kind == 0 {
		return e, fmt.Errorf("bad kind %q", nums[0])
	}
	mode, err := strconv.ParseUint(nums[1], 8, 32)
	if err != nil {
		return e, fmt.Errorf("bad mode: %w", err)
	}
	e.Mode = uint32(mode)
	var ints [4]int64
	for i := range ints {
		if ints[i], err = strconv.ParseInt(nums[2+i], 10, 64); err != nil {
			return e, fmt.Errorf("bad number: %w", err)
		}
	}
	e.UID, e.GID, e.Size, e.MTime = int(ints[0]), int(ints[1]), ints[2], ints[3]
	if nums[6] != "-" {
		e.Object = ObjectID(nums[6])
		if !e.Object.Valid() {
			return e, fmt.Errorf("bad object id %q", nums[6])
		}
	}
	switch nums[7] {
	case "o":
		e.Opaque = true
	case "-":
	default:
		return e, fmt.Errorf("bad flags %q", nums[7])
	}
	if e.Rdev, err = strconv.ParseUint(nums[8], 10, 64); err != nil {
		return e, fmt.Errorf("bad rdev: %w", err)
	}
	if e.Path, err = quoted(); err != nil {
		return e, err
	}
	if e.Target, err = quoted(); err != nil {
		return e, err
	}
	for line != "" {
		name, err := quoted()
		if err != nil {
			return e, err
		}
		if line == "" {
			return e, errors.New("xattr without value")
		}
		value, err := quoted()
		if err != nil {
			return e, err
		}
		if e.Xattrs == nil {
			e.Xattrs = make(map[string][]byte)
		}
		e.Xattrs[name] = []byte(value)
	}
	return e, nil
}

// validManifestPath rejects anything that could escape the upper when joined to it.
func validManifestPath(p string) error {
	if p == "" || p[0] == '/' {
		return fmt.Errorf("invalid path %q", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." || strings.IndexByte(part, 0) >= 0 {
			return fmt.Errorf("invalid path %q", p)
		}
	}
	return nil
}

// WriteManifest writes m to path atomically (temp file, fsync, rename).
func WriteManifest(path string, m *Manifest) error {
	data, err := EncodeManifest(m)
	if err != nil {
		return fmt.Errorf("write manifest %s: %w", path, err)
	}
	if err := overlay.WriteFileAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("write manifest %s: %w", path, err)
	}
	return nil
}

// ReadManifest reads a manifest; damage gives *CorruptManifestError.
func ReadManifest(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return DecodeManifest(path, data)
}

// DeltaKind is a set of ways one path differs between two manifests.
type DeltaKind uint16

const (
	DeltaAdded   DeltaKind = 1 << iota // only b has an entry
	DeltaRemoved                       // only a has an entry
	DeltaType                          // the kind differs (file, dir, symlink, whiteout, other)
	DeltaContent                       // file content (object) differs
	DeltaMode                          // permission or special bits differ
	DeltaTarget                        // symlink target differs
	DeltaOwner                         // uid or gid differs
	DeltaOpaque                        // a dir became opaque or stopped being opaque
	DeltaXattrs                        // extended attributes differ
)

var deltaNames = []string{"added", "removed", "type", "content", "mode", "target", "owner", "opaque", "xattrs"}

// String lists the set's members, e.g. "content,mode".
func (k DeltaKind) String() string {
	var parts []string
	for i, n := range deltaNames {
		if k&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// ManifestDelta is one path that differs between two manifests.
type ManifestDelta struct {
	Path   string
	Change DeltaKind
	A, B   *ManifestEntry // nil where that manifest has no entry
}

// DiffManifests lists the paths whose entries differ from a to b, sorted by
// path. Times are not compared: a directory's mtime moves whenever a child
// changes, which would bury the real changes.
func DiffManifests(a, b *Manifest) []ManifestDelta {
	var out []ManifestDelta
	i, j := 0, 0
	for i < len(a.Entries) || j < len(b.Entries) {
		switch {
		case j == len(b.Entries) || (i < len(a.Entries) && a.Entries[i].Path < b.Entries[j].Path):
			out = append(out, ManifestDelta{Path: a.Entries[i].Path, Change: DeltaRemoved, A: &a.Entries[i]})
			i++
		case i == len(a.Entries) || b.Entries[j].Path < a.Entries[i].Path:
			out = append(out, ManifestDelta{Path: b.Entries[j].Path, Change: DeltaAdded, B: &b.Entries[j]})
			j++
		default:
			ea, eb := &a.Entries[i], &b.Entries[j]
			if k := entryDelta(ea, eb); k != 0 {
				out = append(out, ManifestDelta{Path: ea.Path, Change: k, A: ea, B: eb})
			}
			i++
			j++
		}
	}
	return out
}

func entryDelta(a, b *ManifestEntry) DeltaKind {
	if a.Kind != b.Kind || (a.Kind == EntryOther && (a.Mode&0o170000 != b.Mode&0o170000 || a.Rdev != b.Rdev)) {
		return DeltaType
	}
	var k DeltaKind
	if a.Kind == EntryFile && a.Object != b.Object {
		k |= DeltaContent
	}
	if a.Kind != EntryWhiteout && a.Kind != EntrySymlink && a.Mode != b.Mode {
		k |= DeltaMode
	}
	if a.Target != b.Target {
		k |= DeltaTarget
	}
	if a.Kind != EntryWhiteout && (a.UID != b.UID || a.GID != b.GID) {
		k |= DeltaOwner
	}
	if a.Opaque != b.Opaque {
		k |= DeltaOpaque
	}
	if !xattrsEqual(a.Xattrs, b.Xattrs) {
		k |= DeltaXattrs
	}
	return k
}

func xattrsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for n, v := range a {
		w, ok := b[n]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
