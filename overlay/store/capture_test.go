package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

// snaptOddNames are names that break naive encodings.
var snaptOddNames = []string{"new\nline", "\xff\xfe bin", "-leading-dash", "sp ace", `quote"s`, "tab\tx", "ünï"}

var snaptDialects = []overlay.Dialect{overlay.DialectKernel, overlay.DialectFuseOverlayfs, overlay.DialectUnionfs, overlay.DialectOCI}

// snaptFixedTime is stamped on every entry the scenario builds, so uppers
// built in different dialects freeze to identical manifests.
var snaptFixedTime = time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)

func snaptMust(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func snaptWrite(t testing.TB, p string, data string, mode os.FileMode) {
	t.Helper()
	snaptMust(t, os.MkdirAll(filepath.Dir(p), 0o755))
	snaptMust(t, os.WriteFile(p, []byte(data), 0o600))
	snaptMust(t, os.Chmod(p, mode))
}

// snaptBuildScenario writes the same logical upper layer in dialect d, by
// hand (not with the restore code under test): files with odd modes and
// owners, odd names, symlinks, a fifo, an empty dir, xattrs, hard links,
// whiteouts of a file, of a dir and deep in a tree, and an opaque dir.
func snaptBuildScenario(t testing.TB, upper string, d overlay.Dialect) {
	t.Helper()
	snaptMust(t, os.MkdirAll(upper, 0o755))
	snaptMust(t, os.Chmod(upper, 0o755))
	w := func(rel, data string, mode os.FileMode) { snaptWrite(t, filepath.Join(upper, rel), data, mode) }
	w("src/main.c", "int main(void) { return 0; }\n", 0o644)
	w("src/setuid-bin", "#!/bin/sh\necho hi\n", 0o755)
	snaptMust(t, os.Chown(filepath.Join(upper, "src/setuid-bin"), 1234, 5678))
	snaptMust(t, os.Chmod(filepath.Join(upper, "src/setuid-bin"), 0o755|os.ModeSetuid|os.ModeSetgid))
	w("src/secret", "nobody may read me\n", 0)
	w("src/hl1", "linked content\n", 0o640)
	snaptMust(t, os.Link(filepath.Join(upper, "src/hl1"), filepath.Join(upper, "src/hl2")))
	snaptMust(t, os.Symlink("main.c", filepath.Join(upper, "src/link")))
	snaptMust(t, os.Symlink("/nonexistent\nx", filepath.Join(upper, "src/dangling")))
	snaptMust(t, os.Mkdir(filepath.Join(upper, "empty"), 0o700))
	snaptMust(t, os.Chmod(filepath.Join(upper, "empty"), 0o777|os.ModeSticky))
	w("replaced/new.txt", "replacement\n", 0o644)
	for i, n := range snaptOddNames {
		w("odd/"+n, fmt.Sprintf("odd %d\n", i), 0o644)
	}
	w("xattr.txt", "has attributes\n", 0o644)
	snaptMust(t, unix.Lsetxattr(filepath.Join(upper, "xattr.txt"), "user.comment", []byte("hello\x00bin\xff"), 0))
	snaptMust(t, unix.Mkfifo(filepath.Join(upper, "pipe"), 0o620))
	snaptMust(t, os.Chmod(filepath.Join(upper, "pipe"), 0o620))
	w("deep/a/b/c/kept.txt", "deep\n", 0o644)
	w("big.bin", strings.Repeat("0123456789abcdef", 100_000), 0o644) // > smallObjectLimit: streamed

	whiteouts := []string{"src/gone.c", "gonedir", "deep/a/b/c/x", "odd/-gone"}
	switch d {
	case overlay.DialectKernel:
		first := ""
		for _, p := range whiteouts {
			full := filepath.Join(upper, p)
			if first == "" {
				snaptMust(t, unix.Mknod(full, unix.S_IFCHR, 0))
				first = full
				continue
			}
			snaptMust(t, os.Link(first, full)) // the kernel links every whiteout to one inode
		}
		snaptMust(t, unix.Lsetxattr(filepath.Join(upper, "replaced"), "trusted.overlay.opaque", []byte("y"), 0))
		// bookkeeping the capture must ignore
		snaptMust(t, unix.Lsetxattr(filepath.Join(upper, "src/main.c"), "trusted.overlay.origin", []byte{0, 1, 2}, 0))
		snaptMust(t, unix.Lsetxattr(filepath.Join(upper, "src"), "trusted.overlay.impure", []byte("y"), 0))
	case overlay.DialectFuseOverlayfs:
		for _, p := range whiteouts {
			snaptMust(t, unix.Mknod(filepath.Join(upper, p), unix.S_IFCHR, 0))
		}
		snaptMust(t, unix.Lsetxattr(filepath.Join(upper, "replaced"), "trusted.overlay.opaque", []byte("y"), 0))
		w("replaced/.wh..wh..opq", "", 0o644)
		snaptMust(t, unix.Mknod(filepath.Join(upper, "replaced/.wh..opq"), unix.S_IFCHR, 0))
		snaptMust(t, unix.Lsetxattr(filepath.Join(upper, "src/main.c"), "user.fuseoverlayfs.origin", []byte("src/main.c"), 0))
	case overlay.DialectOCI:
		for _, p := range whiteouts {
			dir, base := filepath.Split(p)
			w(dir+".wh."+base, "", 0o444)
		}
		w("replaced/.wh..wh..opq", "", 0o444)
	case overlay.DialectUnionfs:
		meta := filepath.Join(upper, ".unionfs-fuse")
		for _, p := range whiteouts {
			if p == "gonedir" {
				snaptMust(t, os.MkdirAll(filepath.Join(meta, p+"_HIDDEN~"), 0o755))
				continue
			}
			w(".unionfs-fuse/"+p+"_HIDDEN~", "", 0o644)
		}
		snaptMust(t, os.MkdirAll(filepath.Join(meta, "replaced_HIDDEN~"), 0o755))
	}
	snaptStampTimes(t, upper)
}

// snaptStampTimes sets every entry's times (bar unionfs meta files) to
// snaptFixedTime, deepest first so directory times stick.
func snaptStampTimes(t testing.TB, root string) {
	t.Helper()
	var paths []string
	snaptMust(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	}))
	ts := []unix.Timespec{unix.NsecToTimespec(snaptFixedTime.UnixNano()), unix.NsecToTimespec(snaptFixedTime.UnixNano())}
	for _, p := range slices.Backward(paths) {
		snaptMust(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// snaptIsMarker says whether rel is a whiteout/opaque marker or meta entry in
// dialect d, whose own metadata the dialect does not define.
func snaptIsMarker(d overlay.Dialect, rel string) bool {
	base := filepath.Base(rel)
	switch d {
	case overlay.DialectFuseOverlayfs, overlay.DialectOCI:
		return strings.HasPrefix(base, ".wh.")
	case overlay.DialectUnionfs:
		return rel == ".unionfs-fuse" || strings.HasPrefix(rel, ".unionfs-fuse/")
	}
	return false
}

// snaptDump renders every entry under root with everything a restore must
// preserve: type, mode, owner, mtime, size, content hash, link target,
// device number and non-bookkeeping xattrs. Markers of dialect d are listed
// by name (their metadata is the dialect's business, and unionfs markers may
// be a file or a dir).
func snaptDump(t testing.TB, root string, d overlay.Dialect) string {
	t.Helper()
	var b strings.Builder
	var walk func(rel string)
	walk = func(rel string) {
		full := filepath.Join(root, rel)
		var st unix.Stat_t
		snaptMust(t, unix.Lstat(full, &st))
		if snaptIsMarker(d, rel) {
			fmt.Fprintf(&b, "%q marker\n", rel)
		} else {
			fmt.Fprintf(&b, "%q type=%o perm=%04o uid=%d gid=%d mtime=%d", rel, st.Mode&unix.S_IFMT, st.Mode&0o7777, st.Uid, st.Gid, st.Mtim.Nano())
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				data, err := os.ReadFile(full)
				snaptMust(t, err)
				sum := sha256.Sum256(data)
				fmt.Fprintf(&b, " size=%d sha=%s", st.Size, hex.EncodeToString(sum[:8]))
			case unix.S_IFLNK:
				target, err := os.Readlink(full)
				snaptMust(t, err)
				fmt.Fprintf(&b, " target=%q", target)
			case unix.S_IFCHR, unix.S_IFBLK:
				fmt.Fprintf(&b, " rdev=%d", st.Rdev)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFLNK {
				xs, err := snapReadXattrs(full)
				snaptMust(t, err)
				names := make([]string, 0, len(xs))
				for n := range xs {
					if !strings.HasSuffix(n, ".origin") && !strings.HasSuffix(n, ".impure") {
						names = append(names, n)
					}
				}
				slices.Sort(names)
				for _, n := range names {
					fmt.Fprintf(&b, " %s=%q", n, xs[n])
				}
			}
			b.WriteByte('\n')
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			names, err := readDirNames(full)
			snaptMust(t, err)
			slices.Sort(names)
			for _, n := range names {
				walk(filepath.Join(rel, n))
			}
		}
	}
	walk(".")
	return b.String()
}

// snaptNeutral renders a manifest without what dialects are free to spell
// differently: the dialect name and the metadata of whiteout markers.
func snaptNeutral(m *Manifest) string {
	var b strings.Builder
	for _, e := range append([]ManifestEntry{m.Root}, m.Entries...) {
		if e.Kind == EntryWhiteout {
			fmt.Fprintf(&b, "%q whiteout\n", e.Path)
			continue
		}
		fmt.Fprintf(&b, "%q %s mode=%o uid=%d gid=%d size=%d mtime=%d obj=%s target=%q opaque=%v rdev=%d xattrs=%q\n",
			e.Path, e.Kind, e.Mode, e.UID, e.GID, e.Size, e.MTime, e.Object, e.Target, e.Opaque, e.Rdev, fmt.Sprint(e.Xattrs))
	}
	return b.String()
}

func snaptStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "objects"))
	snaptMust(t, err)
	return s
}

func snaptCapture(t testing.TB, s *Store, upper string, d overlay.Dialect, c *StatCache) (*Manifest, CaptureStats) {
	t.Helper()
	m, st, err := CaptureUpper(context.Background(), s, upper, d, c)
	snaptMust(t, err)
	return m, st
}

func TestCaptureScenarioEveryDialect(t *testing.T) {
	var want string
	for _, d := range snaptDialects {
		t.Run(string(d), func(t *testing.T) {
			upper := filepath.Join(t.TempDir(), "upper")
			snaptBuildScenario(t, upper, d)
			s := snaptStore(t)
			m, stats := snaptCapture(t, s, upper, d, nil)
			if m.Dialect != d {
				t.Errorf("dialect %q, want %q", m.Dialect, d)
			}
			auto, _ := snaptCapture(t, s, upper, overlay.DialectAuto, nil)
			if auto.Dialect != d || snaptNeutral(auto) != snaptNeutral(m) {
				t.Errorf("DialectAuto captured as %q with a different manifest", auto.Dialect)
			}
			got := snaptNeutral(m)
			if want == "" {
				want = got
			} else if got != want {
				t.Errorf("%s manifest differs from the kernel one:\n%s\nwant\n%s", d, got, want)
			}
			checks := map[string]func(e *ManifestEntry) bool{
				"src/gone.c":          func(e *ManifestEntry) bool { return e.Kind == EntryWhiteout },
				"gonedir":             func(e *ManifestEntry) bool { return e.Kind == EntryWhiteout },
				"deep/a/b/c/x":        func(e *ManifestEntry) bool { return e.Kind == EntryWhiteout },
				"replaced":            func(e *ManifestEntry) bool { return e.Kind == EntryDir && e.Opaque },
				"src":                 func(e *ManifestEntry) bool { return e.Kind == EntryDir && !e.Opaque && e.Xattrs == nil },
				"empty":               func(e *ManifestEntry) bool { return e.Kind == EntryDir && e.Mode == 0o1777 },
				"src/secret":          func(e *ManifestEntry) bool { return e.Kind == EntryFile && e.Mode == 0 && e.Size == 19 },
				"src/setuid-bin":      func(e *ManifestEntry) bool { return e.Mode == 0o6755 && e.UID == 1234 && e.GID == 5678 },
				"src/main.c":          func(e *ManifestEntry) bool { return e.Xattrs == nil }, // origin dropped
				"src/dangling":        func(e *ManifestEntry) bool { return e.Kind == EntrySymlink && e.Target == "/nonexistent\nx" },
				"pipe":                func(e *ManifestEntry) bool { return e.Kind == EntryOther && e.Mode == unix.S_IFIFO|0o620 },
				"xattr.txt":           func(e *ManifestEntry) bool { return string(e.Xattrs["user.comment"]) == "hello\x00bin\xff" },
				"odd/\xff\xfe bin":    func(e *ManifestEntry) bool { return e.Kind == EntryFile },
				"src/hl2":             func(e *ManifestEntry) bool { return e.Kind == EntryFile },
				"big.bin":             func(e *ManifestEntry) bool { return e.Size == 1_600_000 },
				"replaced/.wh..opq":   nil,
				"replaced/new.txt":    func(e *ManifestEntry) bool { return e.Kind == EntryFile },
				".unionfs-fuse":       nil,
				"src/.wh.gone.c":      nil,
				"deep/a/b/c/kept.txt": func(e *ManifestEntry) bool { return e.Kind == EntryFile },
			}
			for p, ok := range checks {
				e := m.Lookup(p)
				switch {
				case ok == nil && e != nil:
					t.Errorf("%q: a marker became an entry: %+v", p, e)
				case ok != nil && e == nil:
					t.Errorf("%q: missing", p)
				case ok != nil && !ok(e):
					t.Errorf("%q: wrong entry %+v", p, e)
				}
			}
			if stats.Whiteouts != 4 || stats.Opaque != 1 || stats.Symlinks != 2 || stats.Other != 1 {
				t.Errorf("stats %+v", stats)
			}
			if stats.Hashed != stats.Files || stats.NewObjects != stats.Files-1 || stats.NewBytes == 0 { // hl1 and hl2 share an object
				t.Errorf("first capture: stats %+v", stats)
			}
			for _, e := range m.Entries {
				if e.Kind == EntryFile {
					data, err := os.ReadFile(filepath.Join(upper, e.Path))
					snaptMust(t, err)
					stored, err := s.ReadAll(e.Object)
					snaptMust(t, err)
					if string(data) != string(stored) {
						t.Errorf("%q: stored content differs", e.Path)
					}
				}
			}
		})
	}
}

func TestCaptureFuseWhiteoutFiles(t *testing.T) {
	// fuse-overlayfs writes .wh.NAME files when it cannot make devices; a
	// kernel upper treats the same names as ordinary files.
	upper := t.TempDir()
	snaptWrite(t, filepath.Join(upper, "d/.wh.deleted"), "", 0o644)
	snaptWrite(t, filepath.Join(upper, "d/kept"), "x", 0o644)
	s := snaptStore(t)
	m, _ := snaptCapture(t, s, upper, overlay.DialectFuseOverlayfs, nil)
	if e := m.Lookup("d/deleted"); e == nil || e.Kind != EntryWhiteout {
		t.Errorf("fuse: d/deleted = %+v, want whiteout", e)
	}
	m, _ = snaptCapture(t, s, upper, overlay.DialectKernel, nil)
	if e := m.Lookup("d/.wh.deleted"); e == nil || e.Kind != EntryFile {
		t.Errorf("kernel: d/.wh.deleted = %+v, want a file", e)
	}
}

func TestCaptureRejectsRedirect(t *testing.T) {
	upper := t.TempDir()
	snaptMust(t, os.Mkdir(filepath.Join(upper, "moved"), 0o755))
	snaptMust(t, unix.Lsetxattr(filepath.Join(upper, "moved"), "trusted.overlay.redirect", []byte("/old"), 0))
	_, _, err := CaptureUpper(context.Background(), snaptStore(t), upper, overlay.DialectKernel, nil)
	if !errors.Is(err, ErrUnsupportedUpper) || !strings.Contains(err.Error(), "moved") {
		t.Fatalf("err = %v, want ErrUnsupportedUpper naming the dir", err)
	}
}

func TestCaptureIncremental(t *testing.T) {
	upper := t.TempDir()
	for i := range 20 {
		snaptWrite(t, filepath.Join(upper, fmt.Sprintf("dir%d/file%d.txt", i%4, i)), strings.Repeat(fmt.Sprint(i), 1000), 0o644)
	}
	snaptMust(t, os.Link(filepath.Join(upper, "dir0/file0.txt"), filepath.Join(upper, "dir0/hardlink")))
	snaptMust(t, unix.Mknod(filepath.Join(upper, "dir1/wh"), unix.S_IFCHR, 0))
	snaptMust(t, os.Link(filepath.Join(upper, "dir1/wh"), filepath.Join(upper, "dir2/wh")))
	time.Sleep(2 * racyWindow) // let the files age past the racy window
	s := snaptStore(t)
	cache := NewStatCache()
	m1, st1 := snaptCapture(t, s, upper, overlay.DialectKernel, cache)
	if st1.Hashed != 21 || st1.NewObjects != 20 || st1.Whiteouts != 2 {
		t.Fatalf("first: %+v", st1)
	}
	if cache.Len() != 21 {
		t.Fatalf("cache holds %d files, want 21", cache.Len())
	}
	_, st2 := snaptCapture(t, s, upper, overlay.DialectKernel, cache)
	if st2.Hashed != 0 || st2.NewObjects != 0 {
		t.Fatalf("unchanged: %+v", st2)
	}

	snaptWrite(t, filepath.Join(upper, "dir3/file3.txt"), "changed", 0o644)
	m3, st3 := snaptCapture(t, s, upper, overlay.DialectKernel, cache)
	if st3.Hashed != 1 || st3.NewObjects != 1 || st3.NewBytes != 7 {
		t.Fatalf("one change: %+v", st3)
	}
	d := DiffManifests(m1, m3)
	if len(d) != 1 || d[0].Path != "dir3/file3.txt" || d[0].Change != DeltaContent {
		t.Fatalf("diff %+v", d)
	}

	// Same content, new mtime: read again, no new object.
	time.Sleep(2 * racyWindow)
	future := time.Now().Add(time.Hour)
	snaptMust(t, os.Chtimes(filepath.Join(upper, "dir1/file1.txt"), future, future))
	_, st4 := snaptCapture(t, s, upper, overlay.DialectKernel, cache)
	if st4.Hashed != 2 || st4.NewObjects != 0 { // file3 from the last capture was racy, file1 touched
		t.Fatalf("touch: %+v", st4)
	}

	// The cache survives a save and load.
	time.Sleep(2 * racyWindow)
	_, _ = snaptCapture(t, s, upper, overlay.DialectKernel, cache)
	cachePath := filepath.Join(t.TempDir(), "statcache")
	snaptMust(t, cache.Save(cachePath))
	loaded, err := LoadStatCache(cachePath)
	snaptMust(t, err)
	_, st5 := snaptCapture(t, s, upper, overlay.DialectKernel, loaded)
	if st5.Hashed != 0 {
		t.Fatalf("after reload: %+v", st5)
	}

	// An object the cache names but the store lost (GC) is hashed again.
	e := m3.Lookup("dir2/file2.txt")
	snaptMust(t, s.Delete(e.Object))
	_, st6 := snaptCapture(t, s, upper, overlay.DialectKernel, loaded)
	if st6.Hashed != 1 || st6.NewObjects != 1 || !s.Has(e.Object) {
		t.Fatalf("lost object: %+v", st6)
	}

	// A damaged cache is reported, not trusted.
	data, err := os.ReadFile(cachePath)
	snaptMust(t, err)
	snaptMust(t, os.WriteFile(cachePath, data[:len(data)/2], 0o644))
	var cme *CorruptManifestError
	if _, err := LoadStatCache(cachePath); !errors.As(err, &cme) {
		t.Fatalf("truncated cache: err = %v", err)
	}
	if c, err := LoadStatCache(filepath.Join(t.TempDir(), "missing")); err != nil || c.Len() != 0 {
		t.Fatalf("missing cache: %v %v", c, err)
	}
}

func TestCaptureRacyFileIsNotCached(t *testing.T) {
	// Widen the window so a slow machine cannot make the file look old.
	saved := racyWindow
	racyWindow = time.Hour
	defer func() { racyWindow = saved }()
	upper := t.TempDir()
	snaptWrite(t, filepath.Join(upper, "fresh"), "just written", 0o644)
	cache := NewStatCache()
	s := snaptStore(t)
	snaptCapture(t, s, upper, overlay.DialectKernel, cache)
	if cache.Len() != 0 {
		t.Fatalf("a file written within the racy window was cached")
	}
	racyWindow = 0
	snaptCapture(t, s, upper, overlay.DialectKernel, cache)
	if cache.Len() != 1 {
		t.Fatalf("an old file was not cached")
	}
}

func TestPutFileChangingFails(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "growing")
	snaptWrite(t, p, strings.Repeat("x", 8<<20), 0o644)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	snaptMust(t, err)
	defer f.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	writing := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				_, _ = f.Write([]byte("more"))
				if i == 100 {
					close(writing)
				}
			}
		}
	}()
	<-writing // the writer is running before PutFile starts reading
	_, _, _, err = snaptStore(t).PutFile(p)
	close(stop)
	<-done
	if !errors.Is(err, ErrFileChanged) {
		t.Fatalf("PutFile of a growing file: err = %v, want ErrFileChanged", err)
	}
}
