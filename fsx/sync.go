package fsx

import "golang.org/x/sys/unix"

// FsyncPath fsyncs a file or directory, not following a final symlink.
func FsyncPath(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	return unix.Fsync(fd)
}
