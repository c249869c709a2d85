package overlaytest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// WriteTree creates, in path order under root, files ("content"), symlinks
// ("-> target") and directories (a key ending in "/"), with their parents.
func WriteTree(t testing.TB, root string, entries map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := entries[k]
		p := filepath.Join(root, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(k, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(v, "-> "):
			err = os.Symlink(strings.TrimPrefix(v, "-> "), p)
		default:
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Step is one operation of a scripted World on a tree (a mount or a plain
// copy): Do gets m, which names a path of the tree.
type Step struct {
	What string
	Do   func(m func(string) string) error
}

// RunSteps runs steps on the tree at root, failing t at the first error.
func RunSteps(t testing.TB, root string, steps []Step) {
	t.Helper()
	m := func(p string) string { return filepath.Join(root, p) }
	for _, s := range steps {
		if err := s.Do(m); err != nil {
			t.Fatalf("%s: %v", s.What, err)
		}
	}
}

// Write writes content to path (mode 0644 when it is new).
func Write(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

// Append appends content to the existing file path.
func Append(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Move renames like mv(1): a lower dir cannot be renamed through an overlay
// without redirect_dir (EXDEV), so it is copied and removed instead.
func Move(src, dst string) error {
	err := os.Rename(src, dst)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	if out, err := exec.Command("cp", "-a", "--", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %w: %s", src, dst, err, out)
	}
	return os.RemoveAll(src)
}

// SyncFS writes out the file system holding dir (so its free-space figures
// count what was just written).
func SyncFS(t testing.TB, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}
