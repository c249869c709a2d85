package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/engine/cuberun"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/store"
)

// Options opens an Engine.
type Options struct {
	StateRoot string  // "" = DefaultStateRoot()
	Config    *Config // nil = LoadConfig(DefaultConfigPath())
	Logger    *slog.Logger
	Exe       string // strata binary to re-exec for sessions; "" = this executable
	// Cube is the client of the cube runtime's in-process calls (create,
	// snapshot, guest scripts...); nil = one made on first use from the
	// config's [cube] table. Session runners are processes of their own and
	// always connect by the config.
	Cube *cube.Client
}

// Engine is one process's handle on the shared state root.
type Engine struct {
	Paths  Paths
	Config *Config
	Log    *slog.Logger
	exe    string

	storeOnce sync.Once
	objStore  *store.Store
	storeErr  error

	// cube is the cube runtime (engine/cuberun), made once the state root
	// is known.
	cube *cuberun.Runtime
}

// Open prepares the state root and finishes any interrupted publication.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	root := opts.StateRoot
	if root == "" {
		var err error
		if root, err = DefaultStateRoot(); err != nil {
			return nil, err
		}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("state root: %w", err)
	}
	cfg := opts.Config
	if cfg == nil {
		if cfg, err = LoadConfig(DefaultConfigPath()); err != nil {
			return nil, err
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{Paths: Paths{Root: root}, Config: cfg, Log: log, exe: opts.Exe}
	for _, d := range []string{e.Paths.Worlds(), e.Paths.Objects(), e.Paths.Snapshots(), e.Paths.Journal(), e.Paths.Trash(), e.Paths.Scratch()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("prepare state root %s: %w", root, err)
		}
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		e.Paths.Root = real
	}
	e.cube = cuberun.New(cubeHost{e}, log, e.Paths, opts.Exe, opts.Cube)
	home, _ := os.UserHomeDir()
	if err := cfg.CheckBoundary(home, e.Paths.Root); err != nil {
		return nil, err
	}
	if err := e.recover(ctx); err != nil {
		return nil, err
	}
	e.sweepStaging()
	return e, nil
}

// Create makes a new World over a source tree. Its cost does not depend on
// the size of the tree: three empty directories and a world.toml.
func (e *Engine) Create(ctx context.Context, o CreateOptions) (*World, error) {
	w, sw, err := e.stageWorld(ctx, o)
	if err != nil {
		return nil, err
	}
	defer sw.discard()
	if err := writeWorldFile(filepath.Join(sw.dir, "world.toml"), w); err != nil {
		return nil, err
	}
	if err := sw.publish(e); err != nil {
		return nil, err
	}
	// A cube World gets its sandbox; an unreachable Cube leaves the World
	// planned, any other failure removes it (and any sandbox it got).
	if err := e.runtimeFor(w).Realize(ctx, w, o); err != nil {
		_ = removeAllForce(e.Paths.World(o.Name))
		return nil, fmt.Errorf("new world %q: %w", o.Name, err)
	}
	e.activity(ctx, Event{Type: EventWorldCreated, World: w.Name, Detail: map[string]any{"source": w.Source, "backend": string(w.Backend)}})
	return w, nil
}

// stageWorld validates o and builds the new World's directories under a
// temporary name in worlds/ (see stagedWorld); world.toml is the caller's
// to write, last.
func (e *Engine) stageWorld(ctx context.Context, o CreateOptions) (*World, *stagedWorld, error) {
	if err := ValidateName(o.Name); err != nil {
		return nil, nil, err
	}
	src := o.Source
	if src == "" {
		src = "."
	}
	source, err := fsx.CanonicalDir(src)
	if err != nil {
		return nil, nil, fmt.Errorf("new world %q: source: %w", o.Name, err)
	}
	if within(e.Paths.Root, source) {
		return nil, nil, fmt.Errorf("new world %q: the state root %s lies inside the source %s; set STRATA_HOME to a directory outside it", o.Name, e.Paths.Root, source)
	}
	if within(source, e.Paths.Root) {
		return nil, nil, fmt.Errorf("new world %q: the source %s lies inside the state root %s", o.Name, source, e.Paths.Root)
	}
	w := &World{
		ID:        newID("w-"),
		Name:      o.Name,
		Source:    source,
		Backend:   o.Backend,
		Isolation: o.Isolation,
		State:     StateReady,
		Created:   time.Now().UTC().Truncate(time.Millisecond),
		Labels:    o.Labels,
		PassEnv:   o.PassEnv,
	}
	if w.Backend == "" {
		w.Backend = e.Config.Backend
	}
	if w.Trees, err = e.resolveTrees(o.Name, source, o.Trees); err != nil {
		return nil, nil, err
	}
	if w.Isolation == "" {
		// [boundary.worlds.NAME] level, else the configured default.
		w.Isolation = Isolation(e.Config.Boundary.Worlds[o.Name].Level)
	}
	if w.Isolation == "" {
		w.Isolation = e.Config.Isolation
	}
	if err := w.Isolation.Validate(); err != nil {
		return nil, nil, fmt.Errorf("new world %q: isolation %w", o.Name, err)
	}
	if err := setWorldNetwork(w, o.Network); err != nil {
		return nil, nil, err
	}
	if err := o.BuildState.Validate(); err != nil {
		return nil, nil, fmt.Errorf("new world %q: build state %w", o.Name, err)
	}
	w.BuildState = string(o.BuildState)
	if err := w.Backend.Validate(); err != nil {
		return nil, nil, fmt.Errorf("new world %q: backend %w", o.Name, err)
	}
	mb := o.MountBackend
	if mb == "" {
		mb = overlay.Backend(e.Config.MountBackend)
	}
	rt := e.runtimeFor(w)
	if err := rt.Prepare(ctx, w, o, mb); err != nil {
		return nil, nil, fmt.Errorf("new world %q: %w", o.Name, err)
	}
	if w.HasTrees() && !isRoot() && w.MountBackend == overlay.BackendKernel {
		return nil, nil, fmt.Errorf("new world %q: %w: several trees need the overlays mounted on the host: run strata as root, or use --mount-backend fuse-overlayfs", o.Name, ErrInvalidMount)
	}

	// Build the World under a temporary name and rename it into place with
	// RENAME_NOREPLACE: a second World of the same name, even from another
	// process at the same instant, is refused and nothing half-made is left.
	sw, err := newStagedWorld(e.Paths.Worlds(), o.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("new world %q: %w", o.Name, err)
	}
	for _, d := range rt.LayerDirs() {
		if err := os.Mkdir(filepath.Join(sw.dir, d), 0o755); err != nil {
			sw.discard()
			return nil, nil, fmt.Errorf("new world %q: %w", o.Name, err)
		}
	}
	if err := makeTreeDirs(sw.dir, w); err != nil {
		sw.discard()
		return nil, nil, err
	}
	return w, sw, nil
}

// chooseMountBackend resolves auto cheaply (no trial mount, so creation
// stays in milliseconds): kernel overlay as root, else fuse-overlayfs, else
// unionfs-fuse. `strata doctor` runs the full probe.
func chooseMountBackend(b overlay.Backend) (overlay.Backend, error) {
	switch b {
	case overlay.BackendKernel, overlay.BackendFuseOverlayfs, overlay.BackendUnionfs:
		return b, nil
	case "", overlay.BackendAuto:
	default:
		return "", fmt.Errorf("mount backend %q: want auto, kernel, fuse-overlayfs or unionfs-fuse", b)
	}
	if os.Geteuid() == 0 && kernelHasOverlay() {
		return overlay.BackendKernel, nil
	}
	// Rootless: fuse-overlayfs needs /dev/fuse to be usable by this user;
	// kernel overlay inside a user namespace needs nothing else.
	if _, err := lookPath("fuse-overlayfs"); err == nil && unix.Access("/dev/fuse", unix.R_OK|unix.W_OK) == nil {
		return overlay.BackendFuseOverlayfs, nil
	}
	if kernelHasOverlay() && userNamespaceSupport() == "available" {
		return overlay.BackendKernel, nil
	}
	if _, err := lookPath("unionfs"); err == nil {
		return overlay.BackendUnionfs, nil
	}
	if kernelHasOverlay() {
		return overlay.BackendKernel, nil // rootless kernel overlay in a user namespace
	}
	return "", errors.New("no overlay backend: not root and neither fuse-overlayfs nor unionfs-fuse is installed (apt-get install fuse-overlayfs); run strata doctor")
}

func kernelHasOverlay() bool {
	data, err := os.ReadFile("/proc/filesystems")
	return err == nil && strings.Contains(string(data), "\toverlay\n")
}

// World reads one World.
// Every load resumes a World a crashed snapshotter left frozen (thawStale).
func (e *Engine) World(name string) (*World, error) {
	w, err := readWorld(e.Paths, name)
	if err == nil {
		e.thawStale(w)
	}
	return w, err
}

// Worlds lists every usable World, sorted by name. Broken ones (see
// BrokenWorlds) are left out: nothing can act on them but rm.
func (e *Engine) Worlds() ([]*World, error) {
	ws, _, err := e.scanWorlds()
	return ws, err
}

// BrokenWorlds lists the World directories whose world.toml cannot be
// trusted, sorted by name, so that they can be shown and removed.
func (e *Engine) BrokenWorlds() ([]*BrokenWorldError, error) {
	_, broken, err := e.scanWorlds()
	return broken, err
}

func (e *Engine) scanWorlds() ([]*World, []*BrokenWorldError, error) {
	ents, err := os.ReadDir(e.Paths.Worlds())
	if err != nil {
		return nil, nil, fmt.Errorf("list worlds: %w", err)
	}
	var out []*World
	var broken []*BrokenWorldError
	for _, d := range ents {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		w, err := readWorld(e.Paths, d.Name())
		var be *BrokenWorldError
		switch {
		case errors.As(err, &be):
			e.Log.Warn("broken world", "name", d.Name(), "err", be.Err)
			broken = append(broken, be)
		case err != nil:
			e.Log.Warn("skip world", "name", d.Name(), "err", err)
		default:
			e.thawStale(w)
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	sort.Slice(broken, func(i, j int) bool { return broken[i].Name < broken[j].Name })
	return out, broken, nil
}

// Changes reads the World's change set from its layers (no mount needed).
func (e *Engine) Changes(ctx context.Context, w *World, includeIgnored bool) (*overlay.ChangeSet, error) {
	ign, err := e.ignore()
	if err != nil {
		return nil, err
	}
	cs, err := overlay.ReadChanges(ctx, w.Layers(e.Paths), overlay.ReadOptions{Ignore: ign, IncludeIgnored: includeIgnored})
	if err != nil {
		return nil, fmt.Errorf("changes of world %q: %w", w.Name, err)
	}
	return cs, nil
}

func (e *Engine) ignore() (*overlay.Ignore, error) {
	pats := append([]string{".git/"}, e.Config.Ignore...)
	ign, err := overlay.NewIgnore(pats...)
	if err != nil {
		return nil, fmt.Errorf("ignore patterns in %s: %w", e.Config.Path(), err)
	}
	return ign, nil
}

// errorsIsNotExist is errors.Is(err, fs.ErrNotExist), named for readability.
func errorsIsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
