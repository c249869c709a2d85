package world

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/stratahq/strata/overlay"
)

// State is the persisted lifecycle state of a World. What a person sees
// (running, waiting, failed...) is derived from it and the sessions: see
// WorldInfo.Status.
type State string

const (
	StateReady   State = "ready"   // layers exist; mounted on demand
	StatePlanned State = "planned" // a cube World whose sandbox is not created yet
	StateStopped State = "stopped" // a cube World whose sandbox is gone or paused
	// StateBroken is never written: it reports a World whose world.toml
	// cannot be read or makes no sense (see BrokenWorldError).
	StateBroken State = "broken"
)

// World is worlds/<name>/world.toml.
type World struct {
	ID           string            `toml:"id" json:"id"`
	Name         string            `toml:"name" json:"name"`
	Source       string            `toml:"source" json:"source"`
	Backend      Runtime           `toml:"backend" json:"backend"`
	MountBackend overlay.Backend   `toml:"mount_backend" json:"mount_backend"`
	Dialect      overlay.Dialect   `toml:"dialect" json:"dialect"`
	Isolation    Isolation         `toml:"isolation" json:"isolation"`
	State        State             `toml:"state" json:"state"`
	Created      time.Time         `toml:"created" json:"created"`
	Base         string            `toml:"base,omitempty" json:"base,omitempty"` // snapshot it was forked from
	Labels       map[string]string `toml:"labels,omitempty" json:"labels,omitempty"`
	Cube         *CubeWorld        `toml:"cube,omitempty" json:"cube,omitempty"`
	// Network is the World's network mode (none, proxy, host) from `new
	// --network`; "" = config, then the level's (engine/network.go).
	Network string `toml:"network,omitempty" json:"network,omitempty"`
	// BuildState is what rollback does with this World's build state:
	// "keep" or "discard"; "" follows config.toml's build_state (keep).
	BuildState string `toml:"build_state,omitempty" json:"build_state,omitempty"`
	// PassEnv names variables every session of the World gets although the
	// boundary's environment scrub would drop them (`new --pass-env`).
	PassEnv []string `toml:"pass_env,omitempty" json:"pass_env,omitempty"`
	// Trees are the World's extra trees (`new --mount`), each at its own
	// absolute path; Source is the primary tree, MainTree (trees.go).
	Trees []Tree `toml:"trees,omitempty" json:"trees,omitempty"`
	// MetacopyOff is set at creation by a strata whose every kernel mount
	// of the World's uppers passes metacopy=off (mount.KernelForcedOptions):
	// no upper file can carry a metacopy or redirect xattr, so the change
	// walk reads directories' xattrs only. A World made by an older strata
	// lacks it and keeps the per-file read.
	MetacopyOff bool `toml:"metacopy_off,omitempty" json:"metacopy_off,omitempty"`
	// View, never stored, names the extra tree this copy of the World
	// stands for (TreeView): its Source is that tree's path.
	View string `toml:"-" json:"-"`
}

// CubeWorld is the cube runtime's part of world.toml.
type CubeWorld struct {
	SandboxID string `toml:"sandbox_id,omitempty" json:"sandbox_id,omitempty"`
	Template  string `toml:"template,omitempty" json:"template,omitempty"`
	Domain    string `toml:"domain,omitempty" json:"domain,omitempty"`
	Request   string `toml:"request,omitempty" json:"request,omitempty"` // the create request it will send, JSON
	Driver    string `toml:"driver,omitempty" json:"driver,omitempty"`   // overlay driver inside the guest
}

// Layers returns the World's overlay layers for reading without a mount.
func (w *World) Layers(p Paths) overlay.Layers {
	return overlay.Layers{Upper: p.UpperOf(w), Lower: w.Source, Dialect: w.Dialect, NoFileMarks: w.MetacopyOff}
}

func NewID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ErrWorldNotFound is returned when no World has the name.
var ErrWorldNotFound = errors.New("world not found")

// ErrWorldExists is returned when creating a World whose name is taken.
var ErrWorldExists = errors.New("world already exists")

// ErrWorldBroken is wrapped by every error about a World whose world.toml is
// unreadable or invalid; *BrokenWorldError says why.
var ErrWorldBroken = errors.New("world is broken")

// BrokenWorldError is a World directory whose world.toml cannot be trusted
// (truncated, not TOML, wrong types, missing name or source). Nothing can be
// done with it but look at it and remove it.
type BrokenWorldError struct {
	Name string // the directory's name
	Path string // its world.toml
	Err  error  // why it is broken
}

func (e *BrokenWorldError) Error() string {
	return fmt.Sprintf("world %q is broken: %v; nothing can use it until its world.toml is fixed or it is removed: "+
		"strata rm %s moves it to the trash, strata rm --purge %s deletes it with its sessions and bases", e.Name, e.Err, e.Name, e.Name)
}

// Reason is the short why, without the advice.
func (e *BrokenWorldError) Reason() string { return e.Err.Error() }

func (e *BrokenWorldError) Unwrap() []error { return []error{ErrWorldBroken, e.Err} }

func Read(p Paths, name string) (*World, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	path := p.WorldFile(name)
	w, err := ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if st, serr := os.Lstat(p.World(name)); serr == nil && st.IsDir() {
			return nil, &BrokenWorldError{Name: name, Path: path, Err: errors.New("world.toml is missing")}
		}
		return nil, fmt.Errorf("%w: %q (strata ls --all lists every World)", ErrWorldNotFound, name)
	}
	if err == nil {
		err = Validate(w, name)
	}
	if err != nil {
		return nil, &BrokenWorldError{Name: name, Path: path, Err: err}
	}
	return w, nil
}

// Validate rejects a world.toml that parsed but cannot describe a
// World: acting on an empty or relative source would act on the wrong tree.
func Validate(w *World, name string) error {
	switch {
	case w.Name == "":
		return errors.New("world.toml has no name")
	case w.Name != name:
		return fmt.Errorf("world.toml names %q", w.Name)
	case w.Source == "":
		return errors.New("world.toml has no source")
	case !filepath.IsAbs(w.Source):
		return fmt.Errorf("world.toml source %q is not an absolute path", w.Source)
	}
	if err := w.Backend.Validate(); err != nil {
		return fmt.Errorf("world.toml backend %w", err)
	}
	if err := CheckTrees(w.Source, w.Trees); err != nil {
		return fmt.Errorf("world.toml trees: %w", err)
	}
	return nil
}

func ReadFile(path string) (*World, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var w World
	if _, err := toml.Decode(string(data), &w); err != nil {
		return nil, fmt.Errorf("world.toml: %w", err)
	}
	return &w, nil
}

func Write(p Paths, w *World) error { return WriteFile(p.WorldFile(w.Name), w) }

func WriteFile(path string, w *World) error {
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(w); err != nil {
		return fmt.Errorf("encode world %q: %w", w.Name, err)
	}
	if err := overlay.WriteFileAtomic(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write world %q: %w", w.Name, err)
	}
	return nil
}
