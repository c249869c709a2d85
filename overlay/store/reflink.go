package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CloneMethod says how CloneFile copied a file's bytes.
type CloneMethod string

const (
	// CloneReflink: FICLONE; the copy shares the source's extents (O(1),
	// no data written) until either is changed.
	CloneReflink CloneMethod = "reflink"
	// CloneCopyRange: copy_file_range; the kernel copies (or, on some
	// file systems, shares) without the bytes passing through this process.
	CloneCopyRange CloneMethod = "copy_file_range"
	// ClonePlain: read and write.
	ClonePlain CloneMethod = "copy"
)

// ReflinkSupport is the answer of ReflinkSupported for one directory.
type ReflinkSupport struct {
	Dir       string
	FS        string // file system type from statfs ("xfs", "btrfs", "ext4", "tmpfs", ...)
	Supported bool
	// Reason says why not when !Supported ("" when it is).
	Reason string
}

// ReflinkSupported finds whether files in dir can be reflinked: it clones
// a probe file there with FICLONE (and removes both). An error means the
// probe could not be made at all (dir missing, not writable); a file system
// that refuses the clone is an answer, not an error.
func ReflinkSupported(dir string) (ReflinkSupport, error) {
	r := ReflinkSupport{Dir: dir, FS: fsTypeName(dir)}
	src, err := os.CreateTemp(dir, ".strata-reflink-probe-*")
	if err != nil {
		return r, fmt.Errorf("reflink probe in %s: %w", dir, err)
	}
	defer os.Remove(src.Name())
	defer src.Close()
	if _, err := src.Write([]byte("strata reflink probe\n")); err != nil {
		return r, fmt.Errorf("reflink probe in %s: %w", dir, err)
	}
	dst, err := os.CreateTemp(dir, ".strata-reflink-probe-*")
	if err != nil {
		return r, fmt.Errorf("reflink probe in %s: %w", dir, err)
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
	err = unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	switch {
	case err == nil:
		r.Supported = true
	case cloneUnsupported(err):
		r.Reason = fmt.Sprintf("the %s file system of %s does not support reflinks (FICLONE: %v)", r.FS, dir, err)
	default:
		return r, fmt.Errorf("reflink probe in %s: FICLONE: %w", dir, err)
	}
	return r, nil
}

// cloneUnsupported is true for the errors FICLONE returns when the file
// system (or the pair of files) cannot share extents.
func cloneUnsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EXDEV) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)
}

// CloneFile copies the regular file src to dst (created, or truncated if it
// exists, with src's permission bits): by FICLONE where the file system
// shares extents, else copy_file_range, else a plain copy. It says which
// it used. On error dst is removed.
func CloneFile(dst, src string) (method CloneMethod, err error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("clone %s: %w", src, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return "", fmt.Errorf("clone %s: %w", src, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("clone %s: not a regular file (%s)", src, fi.Mode().Type())
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return "", fmt.Errorf("clone %s to %s: %w", src, dst, err)
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("clone %s to %s: %w", src, dst, cerr)
		}
		if err != nil {
			_ = os.Remove(dst)
			method = ""
		}
	}()
	// O_CREATE does not change the mode of a file that exists.
	if err := out.Chmod(fi.Mode().Perm()); err != nil {
		return "", fmt.Errorf("clone %s to %s: %w", src, dst, err)
	}
	cerr := unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	if cerr == nil {
		return CloneReflink, nil
	}
	if !cloneUnsupported(cerr) {
		return "", fmt.Errorf("clone %s to %s: FICLONE: %w", src, dst, cerr)
	}
	m, err := copyRange(out, in, fi.Size())
	if err != nil {
		return "", fmt.Errorf("clone %s to %s: %w", src, dst, err)
	}
	return m, nil
}

// copyRange copies size bytes with copy_file_range, falling back to a plain
// copy when the kernel refuses it before anything was copied.
func copyRange(out, in *os.File, size int64) (CloneMethod, error) {
	var done int64
	for done < size {
		n, err := unix.CopyFileRange(int(in.Fd()), nil, int(out.Fd()), nil, int(min(size-done, 1<<30)), 0)
		if err != nil {
			if done == 0 && (errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)) {
				return plainCopy(out, in)
			}
			return "", fmt.Errorf("copy_file_range: %w", err)
		}
		if n == 0 {
			break // the source shrank while copied: copy what there is
		}
		done += int64(n)
	}
	return CloneCopyRange, nil
}

func plainCopy(out, in *os.File) (CloneMethod, error) {
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if err := out.Truncate(0); err != nil {
		return "", err
	}
	if _, err := io.Copy(struct{ io.Writer }{out}, in); err != nil { // no ReadFrom: it would try copy_file_range again
		return "", err
	}
	return ClonePlain, nil
}

// fsTypeName names the file system dir is on, from statfs's magic.
func fsTypeName(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Clean(dir), &st); err != nil {
		return "unknown"
	}
	switch int64(st.Type) { //nolint:unconvert // Statfs_t.Type is not int64 on every arch
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	case 0x65735546: // FUSE_SUPER_MAGIC
		return "fuse"
	case 0x2fc12fc1: // ZFS_SUPER_MAGIC
		return "zfs"
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// SameFS is true when a and b are on one mounted file system (one device):
// the condition for overlayfs copy-up, or a clone, to share extents.
func SameFS(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("stat %s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("stat %s: %w", b, err)
	}
	return sa.Dev == sb.Dev, nil
}
