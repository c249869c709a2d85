package overlay

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/fsx"
)

// WriteFileBeneath replaces (or creates) the regular file rel under root with
// data and mode, atomically (a temp beside it, fsynced, renamed over it),
// without following a symlink in any component: a World's view is written
// this way, and the World may have planted links. The parent must exist.
func WriteFileBeneath(root, rel string, data []byte, mode fs.FileMode) error {
	if err := ValidateRelPath(rel); err != nil {
		return err
	}
	rootFd, err := OpenRootFd(root)
	if err != nil {
		return err
	}
	defer CloseFd(rootFd)
	dirFd, base, err := OpenParentBeneath(rootFd, rel)
	if err != nil {
		return &fs.PathError{Op: "write beneath", Path: rel, Err: err}
	}
	defer CloseFd(dirFd)
	var st unix.Stat_t
	if err := unix.Fstatat(dirFd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &fs.PathError{Op: "write beneath", Path: rel, Err: fmt.Errorf("not a regular file")}
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	temp := ".strata-write-" + hex.EncodeToString(rnd[:])
	fd, err := OpenatRetry(dirFd, temp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return &fs.PathError{Op: "write beneath", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), temp)
	_, err = f.Write(data)
	if err == nil {
		err = unix.Fchmod(fd, fsx.UnixMode(mode))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirFd, temp, dirFd, base)
	}
	if err != nil {
		_ = unix.Unlinkat(dirFd, temp, 0)
		return &fs.PathError{Op: "write beneath", Path: rel, Err: err}
	}
	return unix.Fsync(dirFd)
}
