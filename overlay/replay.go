package overlay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/stratahq/strata/fsx"
)

// ApplyChangeSet replays cs onto dst, a copy of the lower tree, reading new
// content through l: deleted paths are removed, added and modified files,
// dirs and symlinks are written with their modes, type changes replace the
// old entry. Every change in cs is applied, ignored ones included, so callers
// filter first. Paths are checked to stay inside dst and no symlink in dst is
// followed. It is not atomic: it serves tests, fork and export, not apply.
func ApplyChangeSet(ctx context.Context, cs *ChangeSet, l Layers, dst string) error {
	if l.Dialect == DialectAuto {
		l.Dialect = cs.Dialect
	}
	for _, c := range cs.Changes {
		if err := checkReplayPath(c.Path); err != nil {
			return fmt.Errorf("apply change set to %s: %w", dst, err)
		}
	}
	// Removals first, deepest first, so a dir that became a file and a
	// deleted tree leave room for what replaces them.
	for i := len(cs.Changes) - 1; i >= 0; i-- {
		c := cs.Changes[i]
		if c.Kind != Deleted && c.Kind != TypeChanged {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		full, err := replayTarget(dst, c.Path)
		if err != nil {
			return err
		}
		if full == "" {
			continue // its parent is already gone
		}
		if err := os.RemoveAll(full); err != nil {
			return fmt.Errorf("apply change set: remove %s: %w", c.Path, err)
		}
	}
	var dirModes []Change
	for _, c := range cs.Changes {
		if c.Kind == Deleted {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		full, err := replayTarget(dst, c.Path)
		if err != nil {
			return err
		}
		if full == "" {
			return fmt.Errorf("apply change set: parent of %q missing in %s", c.Path, dst)
		}
		if err := replayOne(l, c, full); err != nil {
			return fmt.Errorf("apply change set: %s: %w", c.Path, err)
		}
		if c.Type == TypeDir {
			dirModes = append(dirModes, c)
		}
	}
	// Dir modes last, deepest first: a read-only dir must not block its children.
	for i := len(dirModes) - 1; i >= 0; i-- {
		c := dirModes[i]
		if err := syscall.Chmod(filepath.Join(dst, filepath.FromSlash(c.Path)), fsx.UnixMode(c.Mode)); err != nil {
			return fmt.Errorf("apply change set: chmod %s: %w", c.Path, err)
		}
	}
	return nil
}

func checkReplayPath(p string) error {
	if p == "" || p == "." || strings.HasPrefix(p, "/") {
		return fmt.Errorf("bad change path %q", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("bad change path %q", p)
		}
	}
	return nil
}

// replayTarget returns the on-disk path of p under dst after checking that
// every parent is a real directory (not a symlink); "" when a parent is
// missing.
func replayTarget(dst, p string) (string, error) {
	parts := strings.Split(p, "/")
	cur := dst
	for _, part := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, part)
		info, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("apply change set: %w", err)
		}
		if !info.IsDir() {
			return "", fmt.Errorf("apply change set: parent %s of %q is not a directory", cur, p)
		}
	}
	return filepath.Join(cur, parts[len(parts)-1]), nil
}

func replayOne(l Layers, c Change, full string) error {
	existing, err := lstatMaybe(full)
	if err != nil {
		return err
	}
	if existing != nil && FileTypeOf(existing.Mode()) != c.Type {
		if err := os.RemoveAll(full); err != nil {
			return err
		}
		existing = nil
	}
	switch c.Type {
	case TypeDir:
		if existing == nil {
			return os.Mkdir(full, 0o700)
		}
		return nil
	case TypeSymlink:
		if existing != nil {
			if err := os.Remove(full); err != nil {
				return err
			}
		}
		return os.Symlink(c.Target, full)
	case TypeFile:
		src, err := l.Open(c.Path)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		out, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			_ = out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		return syscall.Chmod(full, fsx.UnixMode(c.Mode))
	}
	if c.Mode&fs.ModeNamedPipe != 0 {
		if existing != nil {
			if err := os.Remove(full); err != nil {
				return err
			}
		}
		if err := syscall.Mkfifo(full, 0o600); err != nil {
			return err
		}
		return syscall.Chmod(full, fsx.UnixMode(c.Mode))
	}
	return fmt.Errorf("cannot replay a %v", c.Mode.Type())
}
