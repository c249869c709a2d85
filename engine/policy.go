package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Policy a front end (the CLI, a script's wrapper) applies to what a person
// types, kept here so that every front end applies the same one: how a path
// argument names a file of a World, which directory a command runs in when
// none is given, and which cube template a new World gets.

// ErrPathOutside is a path argument that names nothing of a World: outside
// its source tree (and outside its merged view).
var ErrPathOutside = errors.New("path is outside the source")

// inside reports whether p is dir or below it, and the slash-separated
// path of p relative to dir ("" for dir itself).
func inside(dir, p string) (string, bool) {
	if dir == "" {
		return "", false
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", false
	}
	if rel == "." {
		return "", true
	}
	return filepath.ToSlash(rel), true
}

// CallerDir is where a caller's working directory cwd (symlinks resolved)
// lies in World w: the slash-separated path relative to the source root
// ("" for the root itself), when cwd is inside the source tree or inside the
// World's merged view (merged, "" if it has none); ok is false otherwise.
func CallerDir(w *World, merged, cwd string) (rel string, ok bool) {
	if cwd == "" {
		return "", false
	}
	cwd = filepath.Clean(cwd)
	if rel, ok := inside(filepath.Clean(w.Source), cwd); ok {
		return rel, true
	}
	return inside(merged, cwd)
}

// ResolvePath maps a path argument to the World-relative path it names, the
// way git maps paths to a repository's: an absolute path must lie in the
// source tree or in the World's merged view (merged); a relative path is
// relative to the caller's directory cwd when that lies in either, and to the
// source root otherwise (a script run from elsewhere names paths from the
// root). "..", "." and doubled slashes are cleaned lexically; a result outside
// the tree, or the root itself, is an error wrapping ErrPathOutside.
func ResolvePath(w *World, merged, cwd, arg string) (string, error) {
	if arg == "" {
		return "", fmt.Errorf("an empty path names nothing of world %q: %w", w.Name, ErrPathOutside)
	}
	var rel string
	if filepath.IsAbs(arg) {
		p := filepath.Clean(arg)
		r, ok := inside(filepath.Clean(w.Source), p)
		if !ok {
			r, ok = inside(merged, p)
		}
		if !ok {
			return "", fmt.Errorf("%s: %w %s of world %q", arg, ErrPathOutside, w.Source, w.Name)
		}
		rel = r
	} else {
		base, _ := CallerDir(w, merged, cwd)
		rel = filepath.ToSlash(filepath.Clean(filepath.Join("/", base, arg)))[1:]
		// Join from "/" keeps a leading ".." from climbing: check it on
		// the unrooted form instead.
		if up := filepath.ToSlash(filepath.Clean(filepath.Join(base, arg))); up == ".." || strings.HasPrefix(up, "../") {
			return "", fmt.Errorf("%s: %w %s of world %q", arg, ErrPathOutside, w.Source, w.Name)
		}
	}
	if rel == "" {
		return "", fmt.Errorf("%s is the source root %s of world %q, not a path in it: %w", arg, w.Source, w.Name, ErrPathOutside)
	}
	return rel, nil
}

// DefaultWorkDir is the directory (as the World's sessions see it: under
// w.Source) a command runs in when the caller names none: the caller's own
// directory cwd when it lies in the source tree or the merged view, mapped
// into the source; else the source root. With dir given, a relative dir is
// resolved like a path argument and an absolute one in the merged view is
// mapped to the source; any other absolute dir is left to the session to
// refuse or use.
func DefaultWorkDir(w *World, merged, cwd, dir string) (string, error) {
	src := filepath.Clean(w.Source)
	if dir == "" {
		rel, ok := CallerDir(w, merged, cwd)
		if !ok {
			if t, ok := treeOf(w, cwd); ok {
				return t, nil // the caller stands in another tree (trees.go)
			}
			return src, nil
		}
		return filepath.Join(src, filepath.FromSlash(rel)), nil
	}
	if filepath.IsAbs(dir) {
		if rel, ok := inside(merged, filepath.Clean(dir)); ok {
			return filepath.Join(src, filepath.FromSlash(rel)), nil
		}
		return filepath.Clean(dir), nil
	}
	base, _ := CallerDir(w, merged, cwd)
	up := filepath.ToSlash(filepath.Clean(filepath.Join(base, dir)))
	if up == ".." || strings.HasPrefix(up, "../") {
		return "", fmt.Errorf("--cwd %s: %w %s of world %q", dir, ErrPathOutside, w.Source, w.Name)
	}
	return filepath.Join(src, filepath.FromSlash(up)), nil
}

// CheckCreateResources refuses what cannot be honoured at `new` before
// anything is created: a template together with sizes (one picks the
// other), and sizes for a World that is not a cube World (a local World has
// no sandbox to size). backend is the requested one ("" = the config's).
// The template itself is resolved by Create (ResolveCubeTemplate).
func CheckCreateResources(cfg *Config, o CreateOptions) error {
	sized := o.CPU != 0 || o.MemoryMB != 0 || o.DiskMB != 0
	if !sized {
		return nil
	}
	if o.CPU < 0 || o.MemoryMB < 0 || o.DiskMB < 0 {
		return fmt.Errorf("new world %q: cpu, memory and disk are sizes: want 0 or more", o.Name)
	}
	if o.Template != "" {
		return fmt.Errorf("new world %q: pass a template or cpu/memory/disk sizes, not both (the sizes pick the template)", o.Name)
	}
	backend := o.Backend
	if backend == "" && cfg != nil {
		backend = cfg.Backend
	}
	if backend == "" {
		backend = DefaultRuntime
	}
	if !runtimeOf(nil, backend).Sized() {
		return fmt.Errorf("new world %q: cpu, memory and disk size a cube sandbox; a %s World has none (add --backend cube)", o.Name, backend)
	}
	return nil
}
