package fsx

import (
	"fmt"
	"os"
	"path/filepath"
)

// CanonicalDir returns the absolute, symlink-resolved form of dir and
// checks it is a directory.
func CanonicalDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", real)
	}
	return real, nil
}
