package overlaytest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// A spec describes a tree one entry per line; fields are separated by spaces
// and any field may be a Go-quoted string (so names with spaces, newlines or
// non-UTF-8 bytes survive). Blank lines and lines starting with # are skipped.
//
//	dir PATH [MODE]
//	file PATH [MODE] [CONTENT]
//	sparse PATH MODE SIZE          a file of SIZE bytes holding no data (metacopy uppers)
//	symlink PATH TARGET
//	whiteout PATH                  a char device 0/0, mode 0000
//	char PATH MAJOR MINOR [MODE]
//	fifo PATH [MODE]
//	xattr PATH NAME VALUE          PATH "." is the root
//
// MODE is octal (0644). Missing parents are created with mode 0755. Device
// nodes and trusted.* xattrs need root.

// Build materialises spec under root (which must exist).
func Build(t testing.TB, root, spec string) {
	t.Helper()
	if err := BuildDir(root, spec); err != nil {
		t.Fatalf("build %s: %v", root, err)
	}
}

// BuildDir is Build for callers without a testing.TB.
func BuildDir(root, spec string) error {
	for n, line := range strings.Split(spec, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields, err := SplitFields(line)
		if err != nil {
			return fmt.Errorf("line %d: %w", n+1, err)
		}
		if err := buildEntry(root, fields); err != nil {
			return fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
	}
	return nil
}

func buildEntry(root string, f []string) error {
	if len(f) < 2 {
		return errors.New("want at least a kind and a path")
	}
	kind, rel := f[0], f[1]
	full := filepath.Join(root, rel)
	if rel == "." {
		full = root
	}
	if kind != "xattr" {
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
	}
	mode := func(i int, def uint32) (uint32, error) {
		if len(f) <= i {
			return def, nil
		}
		m, err := strconv.ParseUint(f[i], 8, 32)
		return uint32(m), err
	}
	switch kind {
	case "dir":
		m, err := mode(2, 0o755)
		if err != nil {
			return err
		}
		if err := os.Mkdir(full, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return syscall.Chmod(full, m)
	case "file", "sparse":
		m, err := mode(2, 0o644)
		if err != nil {
			return err
		}
		var content []byte
		if kind == "file" && len(f) > 3 {
			content = []byte(f[3])
		}
		if err := os.WriteFile(full, content, 0o600); err != nil {
			return err
		}
		if kind == "sparse" {
			if len(f) < 4 {
				return errors.New("sparse needs a size")
			}
			size, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				return err
			}
			if err := os.Truncate(full, size); err != nil {
				return err
			}
		}
		return syscall.Chmod(full, m)
	case "symlink":
		if len(f) < 3 {
			return errors.New("symlink needs a target")
		}
		return os.Symlink(f[2], full)
	case "whiteout":
		return mknod(full, syscall.S_IFCHR, 0, 0, 0)
	case "char":
		if len(f) < 4 {
			return errors.New("char needs major and minor")
		}
		major, err1 := strconv.ParseUint(f[2], 10, 32)
		minor, err2 := strconv.ParseUint(f[3], 10, 32)
		m, err3 := mode(4, 0o644)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		return mknod(full, syscall.S_IFCHR, m, uint32(major), uint32(minor))
	case "fifo":
		m, err := mode(2, 0o644)
		if err != nil {
			return err
		}
		return mknod(full, syscall.S_IFIFO, m, 0, 0)
	case "xattr":
		if len(f) < 4 {
			return errors.New("xattr needs a name and a value")
		}
		return lsetxattr(full, f[2], []byte(f[3]))
	}
	return fmt.Errorf("unknown kind %q", kind)
}

func mknod(path string, typ, perm, major, minor uint32) error {
	dev := int((major << 8) | (minor & 0xff) | ((minor &^ 0xff) << 12))
	if err := syscall.Mknod(path, typ|perm, dev); err != nil {
		return err
	}
	return syscall.Chmod(path, perm)
}

// SplitFields splits a spec line into fields, unquoting Go-quoted ones.
func SplitFields(line string) ([]string, error) {
	var fields []string
	for {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			return fields, nil
		}
		if line[0] == '"' {
			end := 1
			for end < len(line) && line[end] != '"' {
				if line[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(line) {
				return nil, fmt.Errorf("unterminated quote in %q", line)
			}
			s, err := strconv.Unquote(line[:end+1])
			if err != nil {
				return nil, fmt.Errorf("unquote %s: %w", line[:end+1], err)
			}
			fields = append(fields, s)
			line = line[end+1:]
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		fields = append(fields, line[:end])
		line = line[end:]
	}
}

// DumpXattrs says which xattr names Dump keeps: overlay and union marks, not
// origin file handles (they name inodes of the machine that made them).
func DumpXattrs(name string) bool {
	if strings.HasSuffix(name, ".origin") {
		return false
	}
	return strings.HasPrefix(name, "trusted.overlay.") || strings.HasPrefix(name, "user.overlay.") ||
		strings.HasPrefix(name, "user.fuseoverlayfs.")
}

// Dump writes the tree under root as a spec that Build turns back into the
// same tree (char 0/0 mode 0000 as whiteout, files with no data blocks as
// sparse, overlay xattrs kept).
func Dump(t testing.TB, root string) string {
	t.Helper()
	s, err := DumpDir(root)
	if err != nil {
		t.Fatalf("dump %s: %v", root, err)
	}
	return s
}

// DumpDir is Dump for callers without a testing.TB.
func DumpDir(root string) (string, error) {
	var b strings.Builder
	if err := dumpXattrs(&b, root, "."); err != nil {
		return "", err
	}
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			p := e.Name()
			if rel != "" {
				p = rel + "/" + p
			}
			full := filepath.Join(dir, e.Name())
			var st syscall.Stat_t
			if err := syscall.Lstat(full, &st); err != nil {
				return err
			}
			perm := st.Mode & 0o7777
			q := strconv.Quote(p)
			switch st.Mode & syscall.S_IFMT {
			case syscall.S_IFDIR:
				fmt.Fprintf(&b, "dir %s %04o\n", q, perm)
			case syscall.S_IFREG:
				if st.Size > 0 && (st.Blocks == 0 || isMetacopy(full)) {
					fmt.Fprintf(&b, "sparse %s %04o %d\n", q, perm, st.Size)
				} else {
					data, err := os.ReadFile(full)
					if err != nil {
						return err
					}
					fmt.Fprintf(&b, "file %s %04o %s\n", q, perm, strconv.Quote(string(data)))
				}
			case syscall.S_IFLNK:
				target, err := os.Readlink(full)
				if err != nil {
					return err
				}
				fmt.Fprintf(&b, "symlink %s %s\n", q, strconv.Quote(target))
			case syscall.S_IFCHR:
				major, minor := (st.Rdev>>8)&0xfff, (st.Rdev&0xff)|((st.Rdev>>12)&0xfff00)
				if st.Rdev == 0 && perm == 0 {
					fmt.Fprintf(&b, "whiteout %s\n", q)
				} else {
					fmt.Fprintf(&b, "char %s %d %d %04o\n", q, major, minor, perm)
				}
			case syscall.S_IFIFO:
				fmt.Fprintf(&b, "fifo %s %04o\n", q, perm)
			default:
				return fmt.Errorf("%s: cannot dump mode %o", full, st.Mode)
			}
			if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
				if err := dumpXattrs(&b, full, p); err != nil {
					return err
				}
			}
			if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				if err := walk(full, p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return "", err
	}
	return b.String(), nil
}

// isMetacopy reports whether a kernel overlay upper file holds metadata
// only (its data still lives in the lower).
func isMetacopy(full string) bool {
	names, _ := llistxattr(full)
	for _, n := range names {
		if strings.HasSuffix(n, "overlay.metacopy") {
			return true
		}
	}
	return false
}

func dumpXattrs(b *strings.Builder, full, rel string) error {
	names, err := llistxattr(full)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if !DumpXattrs(name) {
			continue
		}
		value, err := lgetxattr(full, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "xattr %s %s %s\n", strconv.Quote(rel), name, strconv.Quote(string(value)))
	}
	return nil
}

func llistxattr(path string) ([]string, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	for {
		n, _, errno := syscall.Syscall(syscall.SYS_LLISTXATTR, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if errno == syscall.ERANGE {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errno == syscall.ENOTSUP {
			return nil, nil
		}
		if errno != 0 {
			return nil, &fs.PathError{Op: "llistxattr", Path: path, Err: errno}
		}
		var names []string
		for _, name := range bytes.Split(buf[:n], []byte{0}) {
			if len(name) > 0 {
				names = append(names, string(name))
			}
		}
		return names, nil
	}
}

func lgetxattr(path, name string) ([]byte, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil, err
	}
	a, err := syscall.BytePtrFromString(name)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	n, _, errno := syscall.Syscall6(syscall.SYS_LGETXATTR, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if errno != 0 {
		return nil, &fs.PathError{Op: "lgetxattr " + name, Path: path, Err: errno}
	}
	return buf[:n], nil
}

func lsetxattr(path, name string, value []byte) error {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	a, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	var v unsafe.Pointer
	if len(value) > 0 {
		v = unsafe.Pointer(&value[0])
	}
	_, _, errno := syscall.Syscall6(syscall.SYS_LSETXATTR, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(a)), uintptr(v), uintptr(len(value)), 0, 0)
	if errno != 0 {
		return &fs.PathError{Op: "lsetxattr " + name, Path: path, Err: errno}
	}
	return nil
}
