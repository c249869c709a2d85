package overlay

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsafePath marks a path that would leave the root or pass through a
// symlink: a source tree is never written or read through a link.
var ErrUnsafePath = errors.New("unsafe path")

// ErrInvalidPath marks a path that is not a clean, relative, slash-separated
// path under the root.
var ErrInvalidPath = errors.New("invalid path")

// beneathResolve is what every lookup under a root uses: stay beneath the
// starting directory and follow no link of any kind.
const beneathResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Openat2Missing is set once the kernel answers ENOSYS (or a test forces the
// fallback), so later lookups go straight to per-component openat.
var Openat2Missing atomic.Bool

// ValidateRelPath reports whether rel is a clean relative slash path naming
// something strictly under a root: not empty, not absolute, no NUL, no empty,
// "." or ".." component.
func ValidateRelPath(rel string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, rel, why) }
	switch {
	case rel == "":
		return bad("empty")
	case strings.IndexByte(rel, 0) >= 0:
		return bad("contains NUL")
	case strings.HasPrefix(rel, "/"):
		return bad("absolute")
	}
	for _, comp := range strings.Split(rel, "/") {
		switch comp {
		case "":
			return bad("empty component")
		case ".", "..":
			return bad("contains " + comp)
		}
	}
	return nil
}

// classifyResolveErr turns the errors that mean "this path escapes or goes
// through a link" into ErrUnsafePath, keeping the errno for errors.Is.
func classifyResolveErr(rel string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%w: %s: %w", ErrUnsafePath, rel, err)
	}
	return err
}

// OpenBeneathFd opens rel under dirfd following no symlink in any component
// (the last one included, unless flags carries O_PATH|O_NOFOLLOW, which then
// yields the link itself). rel must already be validated; "." opens dirfd's
// directory again.
func OpenBeneathFd(dirfd int, rel string, flags int) (int, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !Openat2Missing.Load() {
		for {
			fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: uint64(flags), Resolve: beneathResolve})
			if err == nil {
				return fd, nil
			}
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				// EAGAIN: a concurrent rename raced the lookup; retrying is what the man page asks.
				continue
			}
			if errors.Is(err, unix.ENOSYS) {
				Openat2Missing.Store(true)
				break
			}
			if errors.Is(err, unix.ENAMETOOLONG) {
				// Deeper than PATH_MAX: one component at a time has no such
				// limit (a single name too long fails there the same way).
				return openComponentsFd(dirfd, rel, flags)
			}
			if errors.Is(err, unix.ENOTDIR) && isSymlinkBeneath(dirfd, rel) {
				// O_DIRECTORY|O_NOFOLLOW on a final symlink answers ENOTDIR; it is a link.
				err = unix.ELOOP
			}
			return -1, classifyResolveErr(rel, err)
		}
	}
	return openComponentsFd(dirfd, rel, flags)
}

// isSymlinkBeneath reports whether rel under dirfd is itself a symlink,
// looking it up without following anything.
func isSymlinkBeneath(dirfd int, rel string) bool {
	fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneathResolve})
	if err != nil {
		return false
	}
	defer CloseFd(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// openComponentsFd is the openat2 fallback: one openat per component with
// O_NOFOLLOW, so a symlink anywhere fails with ELOOP (or ENOTDIR) instead of
// being followed. Validated paths have no "..", so nothing climbs out.
func openComponentsFd(dirfd int, rel string, flags int) (int, error) {
	if rel == "." {
		fd, err := unix.Openat(dirfd, ".", flags, 0)
		return fd, err
	}
	comps := strings.Split(rel, "/")
	cur := dirfd
	closeCur := func() {
		if cur != dirfd {
			CloseFd(cur)
		}
	}
	for i, comp := range comps {
		last := i == len(comps)-1
		f := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			f = flags
		}
		next, err := OpenatRetry(cur, comp, f)
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) {
				// O_NOFOLLOW|O_DIRECTORY on a symlink answers ENOTDIR; say it is a link.
				var st unix.Stat_t
				if unix.Fstatat(cur, comp, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					err = unix.ELOOP
				}
			}
			closeCur()
			return -1, classifyResolveErr(rel, err)
		}
		closeCur()
		cur = next
	}
	return cur, nil
}

func OpenatRetry(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// OpenRootFd opens the root directory itself. The root is configuration, not
// input: it may be reached through links, but nothing under it may.
func OpenRootFd(root string) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open root %s: %w", root, err)
	}
	return fd, nil
}

// OpenBeneath opens the regular file or directory rel under root for
// reading without following any symlink on the way, the last component
// included: a link anywhere fails with ErrUnsafePath.
func OpenBeneath(root, rel string) (*os.File, error) {
	if err := ValidateRelPath(rel); err != nil {
		return nil, err
	}
	rootFd, err := OpenRootFd(root)
	if err != nil {
		return nil, err
	}
	defer CloseFd(rootFd)
	fd, err := OpenBeneathFd(rootFd, rel, unix.O_RDONLY)
	if err != nil {
		return nil, &fs.PathError{Op: "open beneath", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// ReadFileBeneath reads the regular file rel under root the way OpenBeneath
// opens it, returning its content and the info of the very inode read.
func ReadFileBeneath(root, rel string) ([]byte, fs.FileInfo, error) {
	f, err := OpenBeneath(root, rel)
	if err != nil {
		return nil, nil, err
	}
	defer CloseQuiet(f)
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	if !info.Mode().IsRegular() {
		return nil, nil, &fs.PathError{Op: "read beneath", Path: rel, Err: fmt.Errorf("not a regular file (%s)", info.Mode().Type())}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", rel, err)
	}
	return data, info, nil
}

// LstatBeneath describes rel under root without following a symlink in any
// component; a symlink as the last component is described, not followed.
func LstatBeneath(root, rel string) (fs.FileInfo, error) {
	if err := ValidateRelPath(rel); err != nil {
		return nil, err
	}
	rootFd, err := OpenRootFd(root)
	if err != nil {
		return nil, err
	}
	defer CloseFd(rootFd)
	fd, err := OpenBeneathFd(rootFd, rel, unix.O_PATH)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat beneath", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer CloseQuiet(f)
	info, err := f.Stat()
	if err != nil {
		return nil, &fs.PathError{Op: "lstat beneath", Path: rel, Err: err}
	}
	return info, nil
}

// BirthTimeBeneath is rel's creation time under root (statx btime), when
// the file system records it; rel is reached the way LstatBeneath does, so
// it may be deeper than PATH_MAX.
func BirthTimeBeneath(root, rel string) (time.Time, bool) {
	if ValidateRelPath(rel) != nil {
		return time.Time{}, false
	}
	rootFd, err := OpenRootFd(root)
	if err != nil {
		return time.Time{}, false
	}
	defer CloseFd(rootFd)
	fd, err := OpenBeneathFd(rootFd, rel, unix.O_PATH)
	if err != nil {
		return time.Time{}, false
	}
	defer CloseFd(fd)
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &sx); err != nil || sx.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}, false
	}
	return time.Unix(sx.Btime.Sec, int64(sx.Btime.Nsec)), true
}

// ReadlinkBeneath reads the symlink rel under root, its parent directories
// reached without following links.
func ReadlinkBeneath(root, rel string) (string, error) {
	if err := ValidateRelPath(rel); err != nil {
		return "", err
	}
	rootFd, err := OpenRootFd(root)
	if err != nil {
		return "", err
	}
	defer CloseFd(rootFd)
	dirFd, base, err := OpenParentBeneath(rootFd, rel)
	if err != nil {
		return "", &fs.PathError{Op: "readlink beneath", Path: rel, Err: err}
	}
	defer CloseFd(dirFd)
	target, err := Readlinkat(dirFd, base)
	if err != nil {
		return "", &fs.PathError{Op: "readlink beneath", Path: rel, Err: err}
	}
	return target, nil
}

// OpenParentBeneath opens the directory holding rel and returns its fd and
// rel's last component.
func OpenParentBeneath(rootFd int, rel string) (int, string, error) {
	dir, base := SplitRel(rel)
	fd, err := OpenBeneathFd(rootFd, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return fd, base, nil
}

// SplitRel splits a validated rel into its parent ("." for the root) and name.
func SplitRel(rel string) (string, string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ".", rel
	}
	return rel[:i], rel[i+1:]
}

func Readlinkat(dirFd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirFd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// Deep trees. A World can hold a tree deeper than PATH_MAX (a hostile
// agent only needs mkdir and chdir, one step at a time), but no syscall
// takes a path that long. Walks that name entries by path re-anchor before
// a directory's path grows too long: the directory is opened (a final link
// not followed) and from then on named /proc/self/fd/N, so every path a
// syscall sees stays short and each lookup below starts from a descriptor.

// AnchorAt is the length from which a directory path is re-anchored: a
// name (at most 255 bytes) or two may still be appended to what it returns.
const AnchorAt = unix.PathMax - 2*256

func FdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// AnchorDir returns dir itself while it is short, else a short name for
// the same directory, held open until release is called. dir must be
// short enough to open: built from an anchored parent plus one name.
func AnchorDir(dir string) (string, func(), error) {
	if len(dir) < AnchorAt || dir == "" {
		return dir, func() {}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return FdPath(fd), func() { CloseFd(fd) }, nil
}

// ShortPathBeneath names root/rel for a syscall however deep rel is: the
// joined path while short, else /proc/self/fd/N/NAME with N rel's parent,
// reached one component at a time without following a link. The last
// component is not resolved, so lstat-like calls keep their meaning.
func ShortPathBeneath(root, rel string) (string, func(), error) {
	full := root + "/" + rel
	if len(full) < AnchorAt {
		return full, func() {}, nil
	}
	if err := ValidateRelPath(rel); err != nil {
		return "", nil, err
	}
	rootFd, err := OpenRootFd(root)
	if err != nil {
		return "", nil, err
	}
	defer CloseFd(rootFd)
	dir, base := SplitRel(rel)
	fd, err := OpenBeneathFd(rootFd, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return "", nil, &fs.PathError{Op: "open beneath", Path: dir, Err: err}
	}
	return FdPath(fd) + "/" + base, func() { CloseFd(fd) }, nil
}

// CloseFd closes a descriptor only read or used for lookups, where a close
// error carries no information.
func CloseFd(fd int) { _ = unix.Close(fd) }

func CloseQuiet(f *os.File) { _ = f.Close() }

// OpenSourceFile opens a content source without following a final symlink:
// a link planted where a file was expected must not pull in what it names.
func OpenSourceFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open source file: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("source file %s is not a regular file", path)
	}
	return f, nil
}
