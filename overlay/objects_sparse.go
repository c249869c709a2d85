package overlay

import (
	"errors"
	"fmt"
)

// PutFileSparse stores the regular file at path, which the caller expects to
// hold content id, copying it without allocating its holes in the store
// (putSparse). The copy is hashed: content that is not id (the file changed
// since the caller checked it) is not stored and fails with *ContentError.
func (s *Store) PutFileSparse(path string, id ObjectID) (int64, error) {
	src, err := openSourceFile(path)
	if err != nil {
		return 0, err
	}
	defer closeQuiet(src)
	info, err := src.Stat()
	if err != nil {
		return 0, err
	}
	got, n, _, err := s.putSparse(int(src.Fd()), info.Size())
	if errors.Is(err, ErrFileChanged) {
		err = errShrank
	}
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", path, err)
	}
	if got != id {
		return 0, &ContentError{Path: path, Want: string(id), Got: string(got)}
	}
	return n, nil
}
