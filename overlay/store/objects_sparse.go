package store

import (
	"errors"
	"fmt"

	"github.com/stratahq/strata/overlay"
)

// PutFileSparse stores the regular file at path, which the caller expects to
// hold content id, copying it without allocating its holes in the store
// (putSparse). The copy is hashed: content that is not id (the file changed
// since the caller checked it) is not stored and fails with *ContentError.
func (s *Store) PutFileSparse(path string, id ObjectID) (int64, error) {
	src, err := overlay.OpenSourceFile(path)
	if err != nil {
		return 0, err
	}
	defer overlay.CloseQuiet(src)
	info, err := src.Stat()
	if err != nil {
		return 0, err
	}
	got, n, _, err := s.putSparse(int(src.Fd()), info.Size())
	if errors.Is(err, ErrFileChanged) {
		err = ErrShrank
	}
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", path, err)
	}
	if got != id {
		return 0, &ContentError{Path: path, Want: string(id), Got: string(got)}
	}
	return n, nil
}

// ErrContentChanged is matched by errors.Is for a *ContentError.
var ErrContentChanged = errors.New("content changed while it was published")

// ContentError rejects a publication whose staged file does not hold the
// content the caller checked (PublishOp.ContentHash). Nothing was written.
type ContentError struct {
	Path, Want, Got string
}

func (e *ContentError) Error() string {
	return fmt.Sprintf("%s: the content staged for publication (%s) is not the content that was checked (%s): it changed while it was copied", e.Path, ShortHash(e.Got), ShortHash(e.Want))
}

func (e *ContentError) Is(target error) bool { return target == ErrContentChanged }

func ShortHash(h string) string {
	if len(h) == 64 {
		return h[:12]
	}
	return h
}
