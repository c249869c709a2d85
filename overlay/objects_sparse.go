package overlay

import (
	"fmt"
)

// PutFileSparse stores the regular file at path, which the caller expects to
// hold content id, copying it without allocating its holes or zero blocks in
// the store. The copy is hashed: content that is not id (the file changed
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
	dst, err := s.objectPath(id)
	if err != nil {
		return 0, err
	}
	if s.presentAndTouch(dst, info.Size()) {
		return info.Size(), nil
	}
	tmp, err := s.createTemp()
	if err != nil {
		return 0, err
	}
	if _, err := copySparse(tmp, src, info.Size()); err != nil {
		s.dropTemp(tmp)
		return 0, fmt.Errorf("store %s: %w", path, err)
	}
	got, size, err := HashFile(tmp)
	if err != nil {
		s.dropTemp(tmp)
		return 0, fmt.Errorf("store %s: %w", path, err)
	}
	if ObjectID(got) != id {
		s.dropTemp(tmp)
		return 0, &ContentError{Path: path, Want: string(id), Got: got}
	}
	if _, err := s.commitTemp(tmp, dst, id); err != nil {
		return 0, fmt.Errorf("store %s: %w", path, err)
	}
	return size, nil
}
