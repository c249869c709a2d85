package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// sparseBlock is the unit of copying and of hashing holes.
const sparseBlock = 1 << 20

// zeroBlock is made on first use, not at init: each `strata exec` and its
// session's init link this package and copy nothing sparse.
var zeroBlock = sync.OnceValue(func() []byte { return make([]byte, sparseBlock) })

// ErrShrank is a file that got shorter while it was read: it changed.
var ErrShrank = errors.New("the file shrank while it was read")

// bufSize is the copy buffer for a file of size bytes: small files (most of
// a publication) do not each allocate a whole block.
func bufSize(size int64) int {
	return int(max(min(size, sparseBlock), 1))
}

// dataRanges calls fn for every [start, end) range of f below size that may
// hold data, in order, as SEEK_DATA/SEEK_HOLE report them. ok is false when
// the file system cannot tell (the whole file is then one range).
func dataRanges(f *os.File, size int64, fn func(start, end int64) error) error {
	fd := int(f.Fd())
	off := int64(0)
	for off < size {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return fn(off, size)
		}
		if err != nil {
			return fmt.Errorf("seek data: %w", err)
		}
		if start >= size {
			return nil
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole: %w", err)
		}
		if end > size {
			end = size
		}
		if err := fn(start, end); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// CopySparse copies the first size bytes of src into dst (empty, at offset
// 0) without allocating src's holes, nor all-zero blocks of its data, in
// dst: they become holes there too. It returns the bytes read.
func CopySparse(dst, src *os.File, size int64) (int64, error) {
	buf := make([]byte, bufSize(size))
	var read int64
	err := dataRanges(src, size, func(start, end int64) error {
		for off := start; off < end; {
			n := int64(len(buf))
			if end-off < n {
				n = end - off
			}
			got, err := src.ReadAt(buf[:n], off)
			read += int64(got)
			if err != nil && (!errors.Is(err, io.EOF) || int64(got) != n) {
				if errors.Is(err, io.EOF) {
					return fmt.Errorf("%w (to %d bytes)", ErrShrank, off+int64(got))
				}
				return err
			}
			if !bytes.Equal(buf[:n], zeroBlock()[:n]) {
				if _, err := dst.WriteAt(buf[:n], off); err != nil {
					return err
				}
			}
			off += n
		}
		return nil
	})
	if err != nil {
		return read, err
	}
	// The holes at the end (and zeros never written) are made by the size.
	if err := dst.Truncate(size); err != nil {
		return read, err
	}
	return read, nil
}

// HashFile returns the sha256 hex and size of an open regular file, reading
// only its data (holes hash as the zeros they read as).
func HashFile(f *os.File) (string, int64, error) {
	info, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !info.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", f.Name())
	}
	sum, err := hashSparse(int(f.Fd()), -1, info.Size())
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = ErrShrank
	}
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", f.Name(), err)
	}
	return sum, info.Size(), nil
}
