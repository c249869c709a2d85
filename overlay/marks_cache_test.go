package overlay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Resolving many paths under one directory lists each ancestor's xattrs
// once, not once a path (a diff of 100,000 changed files listed them nine
// times a path), and a directory made opaque after its marks were cached
// is seen as opaque at once: its ctime moved.
func TestResolveCachesDirMarks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for trusted xattrs")
	}
	const n = 50
	var lower, upper strings.Builder
	for i := range n {
		fmt.Fprintf(&lower, "file a/b/c/f%d 0644 \"lower\"\n", i)
		fmt.Fprintf(&upper, "file a/b/c/f%d 0644 \"upper %d\"\n", i, i)
	}
	fmt.Fprintf(&lower, "file a/b/c/only-lower 0644 \"lower\"\n")
	l := resolveLayers(t, DialectKernel, lower.String(), upper.String())
	// Old enough for the cache to trust the directories' ctimes.
	time.Sleep(marksTrustAge + 100*time.Millisecond)

	before := llistxattrCalls.Load()
	for i := range n {
		data, err := l.ReadFile(fmt.Sprintf("a/b/c/f%d", i))
		if err != nil || string(data) != fmt.Sprintf("upper %d", i) {
			t.Fatalf("ReadFile(a/b/c/f%d) = %q, %v", i, data, err)
		}
	}
	// One per file, plus the four directories once.
	if calls := llistxattrCalls.Load() - before; calls > n+4 {
		t.Errorf("resolving %d files under a/b/c listed xattrs %d times, want at most %d (each directory once)", n, calls, n+4)
	}
	if _, err := l.Stat("a/b/c/only-lower"); err != nil {
		t.Fatalf("Stat(a/b/c/only-lower) before the dir is opaque: %v", err)
	}
	if err := syscall.Setxattr(filepath.Join(l.Upper, "a/b/c"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stat("a/b/c/only-lower"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat(a/b/c/only-lower) after a/b/c was made opaque: %v, want fs.ErrNotExist (stale cached marks)", err)
	}
}
