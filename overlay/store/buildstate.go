package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
)

// Build state is what a build writes (object files, intermediates, caches):
// the paths a World's ignore and build patterns match. Snapshots leave it
// out (CaptureOptions.BuildState), so a snapshot costs what the source
// changes cost. A rollback then either keeps the World's build state as it
// is (CarryBuildState) and makes every source file the rollback changed
// look newer than anything built before it (TouchRestored), so make, ninja
// or UBT rebuild what depends on it; or it discards the build state.

// CarryBuildState moves the build state of the upper from (matched by
// build, as CaptureUpperWith matches it) into the staged upper to, at the
// same paths: O(top-most build-state entries), renames only, no bytes
// copied. Both must be on one file system and neither mounted. A build
// entry already at that path in to is replaced. Directories above a build
// entry that to lacks are made (mode, owner and times of from's); where to
// has a non-directory (a whiteout, a file) above it, the source tree no
// longer has that directory and the build entry is dropped. It returns how
// many entries it moved and dropped.
func CarryBuildState(from, to string, d overlay.Dialect, build *overlay.Ignore) (moved, dropped int, err error) {
	if build == nil {
		return 0, 0, nil
	}
	r, err := overlay.RulesFor(d)
	if err != nil {
		return 0, 0, fmt.Errorf("carry build state: %w", err)
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		dir := filepath.Join(from, filepath.FromSlash(rel))
		names, err := readDirNames(dir)
		if err != nil {
			return fmt.Errorf("read dir %s: %w", dir, err)
		}
		slices.Sort(names)
		for _, name := range names {
			if kind, _ := r.ClassifyName(name, rel == ""); kind != overlay.MarkerPlain {
				continue // bookkeeping and name-spelled markers stay with their upper
			}
			child := overlay.JoinRel(rel, name)
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(from, filepath.FromSlash(child)), &st); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return fmt.Errorf("lstat %s: %w", child, err)
			}
			isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
			whiteout := r.IsWhiteoutDev(st.Mode, st.Rdev)
			if build.Match(child, isDir) || whiteout && build.Match(child, !isDir) {
				ok, err := carryOne(from, to, child)
				if err != nil {
					return err
				}
				if ok {
					moved++
				} else {
					dropped++
				}
				continue
			}
			if isDir {
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return moved, dropped, fmt.Errorf("carry build state from %s to %s: %w", from, to, err)
	}
	return moved, dropped, nil
}

// carryOne renames from/rel to to/rel, making to's missing parents; false
// when to cannot hold it (a non-directory above it).
func carryOne(from, to, rel string) (bool, error) {
	parent := path.Dir(rel)
	var made []string // parents made, outermost first
	if parent != "." {
		parts := strings.Split(parent, "/")
		for i := range parts {
			p := strings.Join(parts[:i+1], "/")
			tp := filepath.Join(to, filepath.FromSlash(p))
			fi, err := os.Lstat(tp)
			if err == nil {
				if !fi.IsDir() {
					return false, nil
				}
				continue
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return false, err
			}
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(from, filepath.FromSlash(p)), &st); err != nil {
				return false, fmt.Errorf("lstat %s: %w", p, err)
			}
			if err := os.Mkdir(tp, 0o700); err != nil {
				return false, err
			}
			if err := os.Lchown(tp, int(st.Uid), int(st.Gid)); err != nil {
				return false, err
			}
			if err := os.Chmod(tp, fsx.FileMode(st.Mode)); err != nil {
				return false, err
			}
			made = append(made, p)
		}
	}
	dst := filepath.Join(to, filepath.FromSlash(rel))
	tparent := filepath.Dir(dst)
	var pst unix.Stat_t
	haveTimes := unix.Lstat(tparent, &pst) == nil
	if _, err := os.Lstat(dst); err == nil {
		if err := os.RemoveAll(dst); err != nil {
			return false, err
		}
	}
	if err := os.Rename(filepath.Join(from, filepath.FromSlash(rel)), dst); err != nil {
		return false, err
	}
	// The directories keep the times the restore (or from) gave them: a
	// rename is not a change of the source tree.
	if haveTimes {
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, tparent, []unix.Timespec{pst.Atim, pst.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
	}
	for i := len(made) - 1; i >= 0; i-- {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(from, filepath.FromSlash(made[i])), &st) == nil {
			_ = unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(to, filepath.FromSlash(made[i])), []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
		}
	}
	return true, nil
}

// TouchRestored gives every regular file that a rollback from the state
// before (the manifest of the upper being replaced) to after (the manifest
// staged) changes the time now, in the staged upper to, so that nothing
// built before the rollback looks newer than its rolled-back source. A
// changed file that after leaves to the lower (lower, the source tree) is
// copied up (CloneFile: a reflink where the file system allows) with the
// lower's owner and mode and the new time; status does not list it, its
// contents being the lower's. A directory before hid from the lower (a
// whiteout, an opaque directory, a file in its place) that after shows
// again has all its lower files touched the same way. Build state (matched
// by build) is never touched. It returns how many files it touched.
func TouchRestored(to, lower string, before, after *Manifest, build *overlay.Ignore, now time.Time) (int, error) {
	var paths []string
	for _, dl := range DiffManifests(before, after) {
		paths = append(paths, dl.Path)
		a := dl.A
		if a == nil || lower == "" || a.Kind == EntryDir && !a.Opaque || hiddenFromLower(after, dl.Path) {
			continue
		}
		sub := filepath.Join(lower, filepath.FromSlash(dl.Path))
		if fi, err := os.Lstat(sub); err != nil || !fi.IsDir() {
			continue
		}
		err := filepath.WalkDir(sub, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable lower parts cannot be built from either
			}
			if de.Type().IsRegular() {
				rel, _ := filepath.Rel(lower, p)
				paths = append(paths, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return touchPaths(to, lower, after, paths, build, now)
}

// TouchPaths is TouchRestored for a restore of single paths (each with
// everything under it) from m into the upper to: the restored files, and
// the source tree's files the restore hands back, get the time now.
func TouchPaths(to, lower string, m *Manifest, paths []string, build *overlay.Ignore, now time.Time) (int, error) {
	var all []string
	for _, p := range paths {
		all = append(all, p)
		for i := range m.Entries {
			if strings.HasPrefix(m.Entries[i].Path, p+"/") {
				all = append(all, m.Entries[i].Path)
			}
		}
		if lower == "" {
			continue
		}
		sub := filepath.Join(lower, filepath.FromSlash(p))
		if fi, err := os.Lstat(sub); err == nil && fi.IsDir() {
			_ = filepath.WalkDir(sub, func(q string, de fs.DirEntry, err error) error {
				if err == nil && de.Type().IsRegular() {
					rel, _ := filepath.Rel(lower, q)
					all = append(all, filepath.ToSlash(rel))
				}
				return nil
			})
		}
	}
	return touchPaths(to, lower, m, all, build, now)
}

func touchPaths(to, lower string, after *Manifest, paths []string, build *overlay.Ignore, now time.Time) (int, error) {
	slices.Sort(paths)
	paths = slices.Compact(paths)
	ts := []unix.Timespec{unix.NsecToTimespec(now.UnixNano()), unix.NsecToTimespec(now.UnixNano())}
	touched := 0
	for _, p := range paths {
		if build != nil && (build.Match(p, false) || ancestorMatches(build, p)) {
			continue
		}
		if e := after.Lookup(p); e != nil {
			if e.Kind != EntryFile {
				continue
			}
			// However deep p is (a World may hold a tree deeper than PATH_MAX).
			dst, release, err := overlay.ShortPathBeneath(to, p)
			if err == nil {
				err = unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW)
				release()
			}
			if err != nil {
				return touched, fmt.Errorf("touch restored %s: %w", p, err)
			}
			touched++
			continue
		}
		dst := filepath.Join(to, filepath.FromSlash(p))
		if len(dst) >= overlay.AnchorAt || len(lower)+1+len(p) >= overlay.AnchorAt {
			// The source tree's own deep files are not copied up to be
			// touched: a build over a path that long cannot name them either.
			continue
		}
		if lower == "" || hiddenFromLower(after, p) {
			continue
		}
		src := filepath.Join(lower, filepath.FromSlash(p))
		var st unix.Stat_t
		if err := unix.Lstat(src, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue // not in the source tree (or not a file): nothing stale to see
		}
		if err := copyUpParents(to, lower, path.Dir(p)); err != nil {
			return touched, fmt.Errorf("touch restored %s: %w", p, err)
		}
		if _, err := CloneFile(dst, src); err != nil {
			return touched, fmt.Errorf("touch restored %s: %w", p, err)
		}
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return touched, fmt.Errorf("touch restored %s: %w", p, err)
		}
		if err := os.Chmod(dst, fsx.FileMode(st.Mode)); err != nil {
			return touched, fmt.Errorf("touch restored %s: %w", p, err)
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return touched, fmt.Errorf("touch restored %s: %w", p, err)
		}
		touched++
	}
	return touched, nil
}

// ancestorMatches says whether a directory above p is matched by ig.
func ancestorMatches(ig *overlay.Ignore, p string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if ig.Match(d, true) {
			return true
		}
	}
	return false
}

// hiddenFromLower says whether m hides the lower's p: a whiteout at p or a
// whiteout, non-directory or opaque directory above it.
func hiddenFromLower(m *Manifest, p string) bool {
	if e := m.Lookup(p); e != nil && e.Kind == EntryWhiteout {
		return true
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if e := m.Lookup(d); e != nil && (e.Kind != EntryDir || e.Opaque) {
			return true
		}
	}
	return m.Root.Opaque
}

// copyUpParents makes the directories of rel in the upper to that it lacks,
// with the lower's mode, owner and times.
func copyUpParents(to, lower, rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	if err := copyUpParents(to, lower, path.Dir(rel)); err != nil {
		return err
	}
	tp := filepath.Join(to, filepath.FromSlash(rel))
	if fi, err := os.Lstat(tp); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory in the upper", rel)
		}
		return nil
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(lower, filepath.FromSlash(rel)), &st); err != nil {
		return err
	}
	if err := os.Mkdir(tp, 0o700); err != nil {
		return err
	}
	if err := os.Lchown(tp, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := os.Chmod(tp, fsx.FileMode(st.Mode)); err != nil {
		return err
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, tp, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}
