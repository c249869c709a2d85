package world

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/fsx"
)

// Paths locates everything under one state root (DESIGN.md, On disk).
type Paths struct{ Root string }

func (p Paths) Worlds() string              { return filepath.Join(p.Root, "worlds") }
func (p Paths) World(name string) string    { return filepath.Join(p.Root, "worlds", name) }
func (p Paths) Upper(name string) string    { return filepath.Join(p.Layers(name), "upper") }
func (p Paths) Work(name string) string     { return filepath.Join(p.Layers(name), "work") }
func (p Paths) Merged(name string) string   { return filepath.Join(p.World(name), "merged") }
func (p Paths) Sessions(name string) string { return filepath.Join(p.World(name), "sessions") }

// Home is a local World's private writable layer over the user's home
// (home/upper, home/work): kept with the World, never in its changes.
func (p Paths) Home(name string) string { return filepath.Join(p.World(name), "home") }

func (p Paths) WorldFile(name string) string {
	return filepath.Join(p.World(name), "world.toml")
}

// LayersDir is the name of the directory in which a cube World keeps its
// upper and work: the sandbox's host mount is that directory, so the guest
// sees nothing else of the World (its sessions, bases, timeline).
const LayersDir = "layers"

// Layers is the directory holding a World's upper and work: layers/ for a
// cube World, the World directory itself for a local one (and for a cube
// World made before layers/ existed).
func (p Paths) Layers(name string) string {
	l := filepath.Join(p.World(name), LayersDir)
	if _, err := os.Lstat(l); err == nil {
		return l
	}
	return p.World(name)
}

func (p Paths) Objects() string   { return filepath.Join(p.Root, "objects") }
func (p Paths) Snapshots() string { return filepath.Join(p.Root, "snapshots") }
func (p Paths) Journal() string   { return filepath.Join(p.Root, "journal") }
func (p Paths) Trash() string     { return filepath.Join(p.Root, "trash") }
func (p Paths) Activity() string  { return filepath.Join(p.Root, "activity.jsonl") }
func (p Paths) Scratch() string   { return filepath.Join(p.Root, "tmp") }

// DefaultStateRoot resolves $STRATA_HOME, else $XDG_DATA_HOME/strata, else
// ~/.local/share/strata.
func DefaultStateRoot() (string, error) {
	if v := os.Getenv("STRATA_HOME"); v != "" {
		return filepath.Abs(v)
	}
	if v := os.Getenv("XDG_DATA_HOME"); v != "" {
		return filepath.Join(v, "strata"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the state root: %w (set STRATA_HOME)", err)
	}
	return filepath.Join(home, ".local", "share", "strata"), nil
}

// DefaultConfigPath is $XDG_CONFIG_HOME/strata/config.toml (else ~/.config).
func DefaultConfigPath() string {
	if v := os.Getenv("STRATA_CONFIG"); v != "" {
		return v
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "strata", "config.toml")
}

// DefaultLogPath is $XDG_STATE_HOME/strata/strata.log (else ~/.local/state).
func DefaultLogPath() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "strata", "strata.log")
}

// ErrInvalidName is returned for World names that do not match
// [a-z0-9][a-z0-9._-]{0,62}.
var ErrInvalidName = errors.New("invalid world name")

// ValidateName checks a World name before it touches a path.
func ValidateName(name string) error {
	if !fsx.ValidName(name) {
		return fmt.Errorf("%w %q: use 1-63 characters a-z 0-9 . _ - starting with a letter or digit", ErrInvalidName, name)
	}
	return nil
}

// Within reports whether p lies inside (or is) dir; both must be clean and absolute.
func Within(p, dir string) bool {
	if p == dir {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// ResolveDir returns the absolute, symlink-resolved form of dir and checks it is a directory.
func ResolveDir(dir string) (string, error) { return fsx.CanonicalDir(dir) }

// RenameNoReplace renames old to new, failing if new exists.
func RenameNoReplace(old, new string) error {
	err := unix.Renameat2(unix.AT_FDCWD, old, unix.AT_FDCWD, new, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
		return fmt.Errorf("%s: %w", new, ErrWorldExists)
	}
	return err
}

func IsRoot() bool { return os.Geteuid() == 0 }
