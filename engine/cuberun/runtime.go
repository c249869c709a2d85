// Package cuberun is the cube runtime: one CubeSandbox sandbox per World.
// The World's layers stay on the host (worlds/<name>/{upper,work}) and reach
// the guest as host mounts with the source (read-only); strata mounts the
// overlay inside the guest (guest.go) and runs sessions through envd
// (session.go), each through a runner process on this host. It implements
// engine/runtime's Runtime; what it needs of the engine comes through Host.
package cuberun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/engine/runtime"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/overlay"
)

var (
	// ErrCubeNotConfigured: config.toml has no [cube] endpoint.
	ErrCubeNotConfigured = errors.New("cube is not configured (set [cube] endpoint in config.toml)")
	// ErrNoTemplateFits: no configured template has the resources asked for.
	ErrNoTemplateFits = errors.New("no cube template fits")
)

// Metadata keys strata puts on its sandboxes, so a sandbox whose create
// reply was lost can be found and removed.
const (
	cubeMetaWorld   = "strata-world"
	cubeMetaWorldID = "strata-world-id"
)

const (
	defaultCubeGuestDir = "/mnt/strata"
	// cubeSandboxFile keeps the create/connect reply (it may hold access
	// tokens, hence its own 0600 file rather than world.toml).
	cubeSandboxFile = "cube-sandbox.json"
	cubeCallTimeout = 2 * time.Minute
	cubeLongTimeout = 5 * time.Minute // snapshot, rollback, snapshot delete (CubeAPI allows 240 s)
)

// cubeClients is an Engine's cube client: the one Options gave, else one
// per deployment made from the config on first use (and kept, with its
// connection pool, while the config names that deployment).
type cubeClients struct {
	given *cube.Client
	mu    sync.Mutex
	key   string
	made  *cube.Client
}

// cubeClockKey marks a context whose caller wants to know how long the
// engine waited on Cube (benchmarks split strata's own time from Cube's).
type cubeClockKey struct{}

// WithCubeClock makes ctx add the time the runtime waits on Cube to clock.
func WithCubeClock(ctx context.Context, clock *atomic.Int64) context.Context {
	return context.WithValue(ctx, cubeClockKey{}, clock)
}

func addCubeTime(ctx context.Context, since time.Time) {
	if clock, ok := ctx.Value(cubeClockKey{}).(*atomic.Int64); ok {
		clock.Add(int64(time.Since(since)))
	}
}

// cubeClientConfig is the client configuration from config.toml; the API
// key comes from the environment variable the config names.
func (e *Runtime) cubeClientConfig() (cube.Config, error) {
	cc := e.cfg().Cube
	if cc.Endpoint == "" {
		return cube.Config{}, ErrCubeNotConfigured
	}
	cfg := cube.Config{Endpoint: cc.Endpoint, AuthHeader: cc.AuthHeader, ProxyAddr: cc.ProxyAddr, Scheme: cc.EnvdScheme}
	if cc.APIKeyEnv != "" {
		cfg.APIKey = os.Getenv(cc.APIKeyEnv)
	}
	return cfg, nil
}

func (e *Runtime) cubeClient() (*cube.Client, error) {
	if e.clients.given != nil {
		return e.clients.given, nil
	}
	cfg, err := e.cubeClientConfig()
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%q %q %q %q %q", cfg.Endpoint, cfg.APIKey, cfg.AuthHeader, cfg.ProxyAddr, cfg.Scheme)
	e.clients.mu.Lock()
	defer e.clients.mu.Unlock()
	if e.clients.made != nil && e.clients.key == key {
		return e.clients.made, nil
	}
	c, err := cube.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("cube config in %s: %w", e.cfg().Path, err)
	}
	e.clients.key, e.clients.made = key, c
	return c, nil
}

// cubeConfigured reports whether the engine has a Cube to talk to.
func (e *Runtime) cubeConfigured() bool { return e.clients.given != nil || e.cfg().Cube.Endpoint != "" }

// CubeResources is what a World asks of its sandbox; zero means "any".
type CubeResources struct {
	CPU      int `json:"cpu"` // millicores
	MemoryMB int `json:"memory_mb"`
	DiskMB   int `json:"disk_mb"`
}

func (r CubeResources) zero() bool { return r == CubeResources{} }

func (t CubeTemplate) fits(r CubeResources) bool {
	return t.CPU >= r.CPU && t.MemoryMB >= r.MemoryMB && t.DiskMB >= r.DiskMB
}

func (t CubeTemplate) String() string {
	return fmt.Sprintf("%s (cpu %dm, memory %d MB, disk %d MB)", t.ID, t.CPU, t.MemoryMB, t.DiskMB)
}

// shortfall is how far a template falls short of r, as a sum of fractions.
func (t CubeTemplate) shortfall(r CubeResources) float64 {
	f := func(have, want int) float64 {
		if want <= 0 || have >= want {
			return 0
		}
		return float64(want-have) / float64(want)
	}
	return f(t.CPU, r.CPU) + f(t.MemoryMB, r.MemoryMB) + f(t.DiskMB, r.DiskMB)
}

// ResolveCubeTemplate picks a World's template without calling Cube: the
// explicit one; else the smallest configured template (by cpu, then memory,
// then disk) that has every resource asked for; else cube.template; else the
// smallest configured one. A request that no template fits is an error
// naming the closest ones: a template is never silently smaller than asked.
func ResolveCubeTemplate(cc CubeConfig, explicit string, want CubeResources) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	tpls := append([]CubeTemplate(nil), cc.Templates...)
	sort.SliceStable(tpls, func(i, j int) bool {
		a, b := tpls[i], tpls[j]
		if a.CPU != b.CPU {
			return a.CPU < b.CPU
		}
		if a.MemoryMB != b.MemoryMB {
			return a.MemoryMB < b.MemoryMB
		}
		return a.DiskMB < b.DiskMB
	})
	if want.zero() {
		if cc.Template != "" {
			return cc.Template, nil
		}
		if len(tpls) > 0 {
			return tpls[0].ID, nil
		}
		return "", errors.New("no cube template: pass --template, or set cube.template or [[cube.templates]] in config.toml")
	}
	for _, t := range tpls {
		if t.fits(want) {
			return t.ID, nil
		}
	}
	if len(tpls) == 0 {
		return "", fmt.Errorf("%w cpu %dm, memory %d MB, disk %d MB: no [[cube.templates]] are configured (or pass --template)",
			ErrNoTemplateFits, want.CPU, want.MemoryMB, want.DiskMB)
	}
	sort.SliceStable(tpls, func(i, j int) bool { return tpls[i].shortfall(want) < tpls[j].shortfall(want) })
	closest := make([]string, 0, 3)
	for _, t := range tpls[:min(3, len(tpls))] {
		closest = append(closest, t.String())
	}
	return "", fmt.Errorf("%w cpu %dm, memory %d MB, disk %d MB; closest: %s (add a template to [[cube.templates]] or pass --template)",
		ErrNoTemplateFits, want.CPU, want.MemoryMB, want.DiskMB, strings.Join(closest, "; "))
}

func (e *Runtime) cubeGuestDir() string {
	if d := e.cfg().Cube.GuestDir; d != "" {
		return filepath.Clean(d)
	}
	return defaultCubeGuestDir
}

// cubeMountPoint is where the World's merged view appears in the guest.
func (e *Runtime) cubeMountPoint(w *World) string {
	if mp := e.cfg().Cube.MountPoint; mp != "" {
		return filepath.Clean(mp)
	}
	return w.Source
}

// cubeHostLayers is the host directory a cube World's sandbox mounts
// read-write: layers/, holding only upper and work (on one mount, as
// overlayfs requires). A World made before layers/ existed has them in its
// own directory, which is then mounted whole. A World being created (its
// directory not in place yet) gets layers/.
func (e *Runtime) cubeHostLayers(name string) string {
	dir := e.Paths.World(name)
	if _, err := os.Lstat(filepath.Join(dir, "upper")); err == nil {
		return dir
	}
	return filepath.Join(dir, LayersDir)
}

// cubeCreateRequest is the sandbox a World needs: its source read-only and
// its layers (upper and work) as host mounts.
func (e *Runtime) cubeCreateRequest(w *World, templateID string) cube.CreateRequest {
	g := e.cubeGuestDir()
	req := cube.CreateRequest{
		TemplateID: templateID,
		Metadata:   map[string]string{cubeMetaWorld: w.Name, cubeMetaWorldID: w.ID},
		HostMounts: []cube.HostMount{
			{HostPath: w.Source, MountPath: g + "/lower", ReadOnly: true},
			{HostPath: e.cubeHostLayers(w.Name), MountPath: g + "/world"},
		},
		// An idle World pauses rather than dies: its memory is kept and
		// the next call resumes it.
		AutoPause: true, AutoResume: &cube.AutoResume{Enabled: true},
	}
	if t := e.cfg().Cube.Timeout; t > 0 { // CubeAPI takes seconds ≥ 0: -1 ("never", E2B) is not sent
		req.Timeout = cube.Seconds(t)
	}
	e.cubeNetwork(w, &req) // the [boundary] egress policy (network.go)
	return req
}

// planCube fills in a new cube World before any call: its template (a
// request that fits none fails here), its overlay driver when one is forced,
// and the create request it will send. The World starts planned.
func (e *Runtime) planCube(ctx context.Context, w *World, o CreateOptions) error {
	// A fork's template is its parent's, checked when the parent was made.
	tpl, err := e.resolveCubeTemplate(ctx, o.Template, CubeResources{CPU: o.CPU, MemoryMB: o.MemoryMB, DiskMB: o.DiskMB}, o.FromCubeSnapshot == "", o.Progress)
	if err != nil {
		return err
	}
	w.Cube = &CubeWorld{Template: tpl, Domain: e.cfg().Cube.Domain}
	switch o.MountBackend {
	case "", overlay.BackendAuto:
	case overlay.BackendKernel, overlay.BackendUnionfs, overlay.BackendFuseOverlayfs:
		// Forced (or inherited by a fork, whose upper is in this dialect).
		w.MountBackend, w.Dialect = o.MountBackend, o.MountBackend.Dialect()
	default:
		return fmt.Errorf("mount backend %q: want auto, kernel, fuse-overlayfs or unionfs-fuse", o.MountBackend)
	}
	from := tpl
	if o.FromCubeSnapshot != "" {
		from = o.FromCubeSnapshot
	}
	body, err := cube.EncodeCreateRequest(e.cubeCreateRequest(w, from))
	if err != nil {
		return err
	}
	w.Cube.Request = string(body)
	w.State = StatePlanned
	return nil
}

// cubeUnreachable reports errors that mean "Cube is not there": the World
// stays planned (or as it was) and nothing was done remotely.
func cubeUnreachable(err error) bool {
	return errors.Is(err, ErrCubeNotConfigured) || errors.Is(err, cube.ErrUnavailable)
}

// realizeCubeOnCreate creates a new World's sandbox. Cube not configured or
// unreachable: the World stays planned (strata up realises it). Any other
// failure is returned after removing whatever sandbox the attempt left.
func (e *Runtime) realizeCubeOnCreate(ctx context.Context, w *World, o CreateOptions) error {
	if !e.cubeConfigured() {
		return nil
	}
	lk, err := e.h.LockWorld(ctx, w.Name)
	if err != nil {
		return err
	}
	defer lk.Unlock()
	c, err := e.cubeClient()
	if err != nil {
		return err
	}
	from := ""
	if o.FromCubeSnapshot != "" {
		from = o.FromCubeSnapshot
	}
	// A fork's upper is restored after Create returns: its overlay is set
	// up by its first exec, never over a half-restored upper.
	err = e.realizeLocked(ctx, c, w, from, o.FromCubeSnapshot == "")
	if err != nil && cubeUnreachable(err) {
		e.Log.Warn("cube unreachable: world planned", "world", w.Name, "err", err)
		return nil
	}
	return err
}

// realizeLocked creates the World's sandbox (from a snapshot when from is
// a snapshot id, else from its template), then, when setup is set, mounts
// the overlay in the guest. On failure the World is left as it was (planned
// or stopped, no sandbox) and any sandbox made on the way is deleted.
func (e *Runtime) realizeLocked(ctx context.Context, c *cube.Client, w *World, from string, setup bool) error {
	if from == "" {
		from = w.Cube.Template
	}
	req := e.cubeCreateRequest(w, from)
	body, err := cube.EncodeCreateRequest(req)
	if err != nil {
		return err
	}
	if w.State == StatePlanned && w.Cube.Request != "" && string(body) != w.Cube.Request {
		e.Log.Info("cube create request changed since the world was planned (config or paths changed)", "world", w.Name)
	}
	cctx, cancel := context.WithTimeout(ctx, cubeCallTimeout)
	t0 := time.Now()
	sb, err := c.Create(cctx, req)
	addCubeTime(ctx, t0)
	cancel()
	if err != nil {
		var te *cube.TransportError
		if !errors.As(err, &te) || te.Sent {
			// The create may have happened with its reply lost.
			e.reapSandboxes(ctx, c, w, "")
		}
		return fmt.Errorf("create sandbox: %w", err)
	}
	if sb.Domain == "" {
		sb.Domain = e.cfg().Cube.Domain
	}
	prevState, prevID := w.State, w.Cube.SandboxID
	w.Cube.SandboxID, w.Cube.Domain, w.Cube.Request = sb.SandboxID, sb.Domain, string(body)
	if err := e.writeCubeSandbox(w, sb); err != nil {
		e.deleteSandbox(ctx, c, sb.SandboxID)
		w.Cube.SandboxID = prevID
		return err
	}
	if setup {
		if _, err := e.ensureOverlayLocked(ctx, c, w, sb, false); err != nil {
			e.deleteSandbox(ctx, c, sb.SandboxID)
			w.Cube.SandboxID, w.State = prevID, prevState
			_ = os.Remove(e.cubeSandboxPath(w))
			return err
		}
	}
	w.State = StateReady
	return writeWorld(e.Paths, w)
}

// reapSandboxes deletes the World's sandboxes other than keep, found by
// the metadata strata puts on them.
func (e *Runtime) reapSandboxes(ctx context.Context, c *cube.Client, w *World, keep string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cubeCallTimeout)
	defer cancel()
	list, err := c.List(cctx, map[string]string{cubeMetaWorldID: w.ID})
	if err != nil {
		e.Log.Warn("look for leftover sandboxes", "world", w.Name, "err", err)
		return
	}
	for _, sb := range list {
		if sb.SandboxID != keep {
			e.deleteSandbox(cctx, c, sb.SandboxID)
		}
	}
}

func (e *Runtime) deleteSandbox(ctx context.Context, c *cube.Client, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cubeCallTimeout)
	defer cancel()
	if err := c.Delete(cctx, id); err != nil && !errors.Is(err, cube.ErrNotFound) {
		e.Log.Warn("delete sandbox", "sandbox", id, "err", err)
	}
}

func (e *Runtime) cubeSandboxPath(w *World) string {
	return filepath.Join(e.Paths.World(w.Name), cubeSandboxFile)
}

func (e *Runtime) writeCubeSandbox(w *World, sb *cube.Sandbox) error {
	data, err := json.Marshal(sb)
	if err != nil {
		return err
	}
	// Not fsynced: after a crash a missing or stale copy is rebuilt from
	// world.toml and the next connect.
	tmp := e.cubeSandboxPath(w) + ".tmp-" + newID("")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("record sandbox of world %q: %w", w.Name, err)
	}
	if err := os.Rename(tmp, e.cubeSandboxPath(w)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record sandbox of world %q: %w", w.Name, err)
	}
	return nil
}

// cubeSandbox is what exec and file calls need: the recorded reply, else
// the id and domain from world.toml.
func (e *Runtime) cubeSandbox(w *World) *cube.Sandbox {
	var sb cube.Sandbox
	if data, err := os.ReadFile(e.cubeSandboxPath(w)); err == nil && json.Unmarshal(data, &sb) == nil && sb.SandboxID == w.Cube.SandboxID {
		return &sb
	}
	return &cube.Sandbox{SandboxID: w.Cube.SandboxID, TemplateID: w.Cube.Template, Domain: w.Cube.Domain}
}

// Up: readyLocked.
func (r *Runtime) Up(ctx context.Context, w *World) error {
	_, err := r.readyLocked(ctx, w)
	return err
}

// readyLocked makes the World's sandbox run with its overlay mounted.
func (e *Runtime) readyLocked(ctx context.Context, w *World) (*cube.Sandbox, error) {
	c, err := e.cubeClient()
	if err != nil {
		return nil, err
	}
	if w.Cube == nil {
		return nil, fmt.Errorf("world.toml of %q has no [cube] table", w.Name)
	}
	if w.State == StatePlanned || w.Cube.SandboxID == "" {
		from := ""
		if w.State == StatePlanned {
			from = plannedTemplateID(w) // send what was recorded (a fork's snapshot id)
		}
		if err := e.realizeLocked(ctx, c, w, from, true); err != nil {
			return nil, err
		}
		return e.cubeSandbox(w), nil
	}
	cctx, cancel := context.WithTimeout(ctx, cubeCallTimeout)
	sb, err := c.Connect(cctx, w.Cube.SandboxID, 0)
	cancel()
	if errors.Is(err, cube.ErrNotFound) {
		e.Log.Warn("sandbox gone: recreating it from the template", "world", w.Name, "sandbox", w.Cube.SandboxID)
		w.Cube.SandboxID = ""
		if err := e.realizeLocked(ctx, c, w, "", true); err != nil {
			return nil, err
		}
		return e.cubeSandbox(w), nil
	}
	if err != nil {
		return nil, fmt.Errorf("resume sandbox %s: %w", w.Cube.SandboxID, err)
	}
	if sb.Domain == "" {
		sb.Domain = w.Cube.Domain
	}
	if err := e.writeCubeSandbox(w, sb); err != nil {
		return nil, err
	}
	if _, err := e.ensureOverlayLocked(ctx, c, w, sb, false); err != nil {
		return nil, err
	}
	w.State = StateReady
	return sb, writeWorld(e.Paths, w)
}

// ensureCubeReady is exec's way in: the fast path checks the overlay with
// one command; anything unusual goes through readyLocked.
func (e *Runtime) ensureCubeReady(ctx context.Context, name string) (*World, *cube.Sandbox, error) {
	w, unlock, err := e.h.LockedWorld(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	c, err := e.cubeClient()
	if err != nil {
		return w, nil, e.plannedHint(w, err)
	}
	if w.State == StateReady && w.Cube != nil && w.Cube.SandboxID != "" {
		sb := e.cubeSandbox(w)
		err := e.ensureOverlayAndRecord(ctx, c, w, sb, false)
		if err == nil {
			return w, sb, nil
		}
		if !errors.Is(err, cube.ErrNotFound) && !errors.Is(err, cube.ErrUnavailable) {
			return w, nil, err
		}
		// The sandbox may be paused or gone: find out and repair.
	}
	sb, err := e.readyLocked(ctx, w)
	if err != nil {
		return w, nil, e.plannedHint(w, err)
	}
	return w, sb, nil
}

func (e *Runtime) plannedHint(w *World, err error) error {
	if cubeUnreachable(err) {
		return fmt.Errorf("world %q is %s and Cube is unreachable: %w (strata up %s once it is back)", w.Name, w.State, err, w.Name)
	}
	return err
}

// Stop pauses the sandbox, ending running sessions first when kill is set.
func (r *Runtime) Stop(ctx context.Context, w *World, kill bool) error {
	e := r
	switch {
	case w.State == StateStopped:
		return nil
	case w.State == StatePlanned || w.Cube == nil || w.Cube.SandboxID == "":
		return fmt.Errorf("it is %s, with no sandbox to stop", w.State)
	}
	running := e.h.RunningSessions(w)
	if len(running) > 0 && !kill {
		return fmt.Errorf("%w (%s); stop them first or pass --kill", ErrSessionsRunning, strings.Join(running, ", "))
	}
	if _, err := e.h.StopSessions(ctx, w, running); err != nil {
		return err
	}
	c, err := e.cubeClient()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, cubeCallTimeout)
	err = c.Pause(cctx, w.Cube.SandboxID)
	cancel()
	if err != nil && !errors.Is(err, cube.ErrNotFound) {
		return fmt.Errorf("pause sandbox %s: %w", w.Cube.SandboxID, err)
	}
	w.State = StateStopped
	return writeWorld(e.Paths, w)
}

// cubeSnapshot takes the Cube half of a snapshot (memory and rootfs; the
// host-mounted upper is strata's half). A World without a running sandbox
// has no VM state to keep: "" and no error.
func (e *Runtime) cubeSnapshot(ctx context.Context, w *World, snapID string) (string, error) {
	if w.Cube == nil || w.State != StateReady || w.Cube.SandboxID == "" {
		return "", nil
	}
	c, err := e.cubeClient()
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, cubeLongTimeout)
	defer cancel()
	info, err := c.Snapshot(cctx, w.Cube.SandboxID, snapID)
	if errors.Is(err, cube.ErrNotFound) {
		e.Log.Warn("snapshot: sandbox gone, upper only", "world", w.Name, "sandbox", w.Cube.SandboxID)
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cube snapshot of sandbox %s: %w", w.Cube.SandboxID, err)
	}
	return info.SnapshotID, nil
}

// cubeRollback restores the VM half of a snapshot after the upper has been
// restored, then mounts the overlay again (the old mount saw the old upper;
// a restored VM may have lost it or hold a stale one). A sandbox that cannot
// be rolled back in place (gone, or the snapshot is not its own) is replaced
// by one created from the snapshot, or from the template when the snapshot
// is gone too.
func (e *Runtime) cubeRollback(ctx context.Context, w *World, targetCube string) error {
	if w.Cube == nil || w.State == StatePlanned {
		return nil
	}
	c, err := e.cubeClient()
	if err != nil {
		return err
	}
	if targetCube == "" || w.Cube.SandboxID == "" {
		// No VM state to restore; a running guest only needs a fresh overlay.
		if w.State == StateReady && w.Cube.SandboxID != "" {
			return e.ensureOverlayAndRecord(ctx, c, w, e.cubeSandbox(w), true)
		}
		return nil
	}
	// A stopped (paused) sandbox is rolled back too: the restored VM runs.
	cctx, cancel := context.WithTimeout(ctx, cubeLongTimeout)
	err = c.Rollback(cctx, w.Cube.SandboxID, targetCube)
	cancel()
	switch {
	case err == nil:
		w.State = StateReady
		if _, err := e.ensureOverlayLocked(ctx, c, w, e.cubeSandbox(w), true); err != nil {
			return err
		}
		return writeWorld(e.Paths, w)
	case cubeUnreachable(err) || errors.Is(err, cube.ErrTimeout):
		return fmt.Errorf("cube rollback of sandbox %s to %s: %w", w.Cube.SandboxID, targetCube, err)
	}
	e.Log.Warn("cube rollback in place failed: replacing the sandbox", "world", w.Name, "err", err)
	old := w.Cube.SandboxID
	rerr := e.realizeLocked(ctx, c, w, targetCube, true)
	if errors.Is(rerr, cube.ErrNotFound) {
		rerr = e.realizeLocked(ctx, c, w, "", true)
	}
	if rerr != nil {
		return fmt.Errorf("cube rollback of sandbox %s to %s: %w; replacing the sandbox: %w", old, targetCube, err, rerr)
	}
	if old != w.Cube.SandboxID {
		e.deleteSandbox(ctx, c, old)
	}
	return nil
}

// stopWorldRuntime deletes a World's sandbox and its Cube snapshots before
// the World is removed; world.toml then says stopped with no sandbox, so a
// World restored from the trash gets a new one from strata up.
func (e *Runtime) stopWorldRuntime(ctx context.Context, w *World) error {
	if w.Backend != RuntimeCube || w.Cube == nil {
		return nil
	}
	var c *cube.Client
	if w.Cube.SandboxID != "" {
		var err error
		if c, err = e.cubeClient(); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", w.Cube.SandboxID, err)
		}
		cctx, cancel := context.WithTimeout(ctx, cubeCallTimeout)
		err = c.Delete(cctx, w.Cube.SandboxID)
		cancel()
		if err != nil && !errors.Is(err, cube.ErrNotFound) {
			return fmt.Errorf("delete sandbox %s: %w", w.Cube.SandboxID, err)
		}
	}
	if snaps, err := e.h.RuntimeSnapshots(w.Name); err == nil && c != nil {
		for _, id := range snaps {
			if id == "" {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, cubeLongTimeout) // DELETE /templates has CubeAPI's 240 s budget
			if err := c.DeleteSnapshot(cctx, id); err != nil && !errors.Is(err, cube.ErrNotFound) {
				e.Log.Warn("delete cube snapshot", "world", w.Name, "snapshot", id, "err", err)
			}
			cancel()
		}
	}
	w.Cube.SandboxID = ""
	if w.State != StatePlanned {
		w.State = StateStopped
	}
	_ = os.Remove(e.cubeSandboxPath(w))
	return writeWorld(e.Paths, w)
}

// cubeDoctor checks the deployment: health, the API key, and that a file in
// the state root is visible in a sandbox through a host mount (this costs a
// sandbox create, so only when a template is configured).
func (e *Runtime) cubeDoctor(ctx context.Context) CubeDoctor {
	cc := e.cfg().Cube
	if cc.Endpoint == "" {
		return CubeDoctor{Status: "not configured"}
	}
	d := CubeDoctor{Endpoint: cc.Endpoint}
	c, err := e.cubeClient()
	if err != nil {
		d.Status, d.Detail = "misconfigured", err.Error()
		return d
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := c.Health(cctx)
	if err != nil {
		d.Status, d.Detail = "unreachable", err.Error()
		return d
	}
	notes := []string{fmt.Sprintf("health %s (%d sandboxes)", h.Status, h.Sandboxes)}
	if _, err := c.List(cctx, map[string]string{cubeMetaWorld: "doctor-probe"}); err != nil {
		d.Status = "error"
		if errors.Is(err, cube.ErrUnauthorized) {
			d.Status = "unauthorized"
			where := "no api_key_env is configured"
			if cc.APIKeyEnv != "" {
				where = "check $" + cc.APIKeyEnv
				if os.Getenv(cc.APIKeyEnv) == "" {
					where = "$" + cc.APIKeyEnv + " is empty"
				}
			}
			notes = append(notes, "the API key was refused ("+where+"): "+err.Error())
		} else {
			notes = append(notes, "list sandboxes: "+err.Error())
		}
		d.Detail = strings.Join(notes, "; ")
		return d
	}
	notes = append(notes, "auth ok")
	if tpls, err := c.Templates(cctx); err != nil {
		notes = append(notes, "list templates: "+err.Error())
	} else {
		d.Templates = tpls
	}
	d.Built = e.builtCubeTemplates()
	cl := e.cubeCluster(cctx, c)
	d.Cluster = &cl
	tpl, err := ResolveCubeTemplate(cc, "", CubeResources{})
	if err != nil {
		d.Status = "ok"
		notes = append(notes, "host mount not checked: no template configured")
		d.Detail = strings.Join(notes, "; ")
		return d
	}
	if err := e.probeHostMount(ctx, c, tpl); err != nil {
		d.Status = "error"
		notes = append(notes, "host mount: "+err.Error())
	} else {
		d.Status = "ok"
		notes = append(notes, "host mount ok (a probe file in the state root is visible in a sandbox)")
	}
	d.Detail = strings.Join(notes, "; ")
	return d
}

// probeHostMount creates a throwaway sandbox with a state-root directory
// mounted, reads a probe file through envd and deletes the sandbox.
func (e *Runtime) probeHostMount(ctx context.Context, c *cube.Client, tpl string) error {
	dir, err := os.MkdirTemp(e.Paths.Scratch(), "cube-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	want := newID("probe-")
	if err := os.WriteFile(filepath.Join(dir, "probe"), []byte(want), 0o644); err != nil {
		return err
	}
	guest := e.cubeGuestDir() + "/probe"
	cctx, cancel := context.WithTimeout(ctx, cubeCallTimeout)
	defer cancel()
	sb, err := c.Create(cctx, cube.CreateRequest{
		TemplateID: tpl, Timeout: cube.Seconds(120),
		Metadata:   map[string]string{cubeMetaWorld: "doctor-probe"},
		HostMounts: []cube.HostMount{{HostPath: dir, MountPath: guest, ReadOnly: true}},
	})
	if err != nil {
		return fmt.Errorf("create a probe sandbox from %s: %w", tpl, err)
	}
	defer e.deleteSandbox(ctx, c, sb.SandboxID)
	got, err := c.ReadFile(cctx, sb, guest+"/probe")
	if err != nil {
		return fmt.Errorf("read %s/probe in sandbox %s: %w (is %s under the deployment's allowed_host_mount_prefixes?)", guest, sb.SandboxID, err, e.Paths.Root)
	}
	if string(got) != want {
		return fmt.Errorf("sandbox %s sees %q at %s/probe, want %q", sb.SandboxID, got, guest, want)
	}
	return nil
}

// plannedTemplateID is the templateID of the request a planned World recorded.
func plannedTemplateID(w *World) string {
	var req struct {
		TemplateID string `json:"templateID"`
	}
	if w.Cube == nil || json.Unmarshal([]byte(w.Cube.Request), &req) != nil {
		return ""
	}
	return req.TemplateID
}

func cubeTemplateOf(w *World) string {
	if w.Cube == nil {
		return ""
	}
	return w.Cube.Template
}

// cubeRuntime runs a World's sessions in its CubeSandbox MicroVM, over the
// World's layers mounted into the guest (guest.go), through a runner
// process per session on this host (session.go).

func (r *Runtime) Kind() world.Runtime { return RuntimeCube }
func (r *Runtime) HostView() bool      { return false }

func (r *Runtime) LayerDirs() []string {
	return []string{LayersDir, LayersDir + "/upper", LayersDir + "/work", "merged", "sessions"}
}

func (r *Runtime) UpperIn(worldDir string) string {
	return filepath.Join(worldDir, LayersDir, "upper")
}

// sendSignal: the recorded pid is the host runner, which relays signals to
// the command in the sandbox; it cannot catch KILL or STOP, so those travel
// as stand-ins it turns back into the real signal there.
func (r *Runtime) SendSignal(sig syscall.Signal) syscall.Signal { return cubeRelaySignal(sig) }

func (r *Runtime) Prepare(ctx context.Context, w *World, o CreateOptions, _ overlay.Backend) error {
	if w.HasTrees() {
		// The sandbox gets one host mount, the World's layers/ over the
		// source: a second tree would need a second share (docs/cube.md).
		return fmt.Errorf("%w: a cube World sees one tree, its source; --mount needs --backend local", world.ErrInvalidMount)
	}
	return r.planCube(ctx, w, o)
}

// Realize creates the sandbox; an unreachable Cube leaves the World
// planned, any other failure is returned.
func (r *Runtime) Realize(ctx context.Context, w *World, o CreateOptions) error {
	return r.realizeCubeOnCreate(ctx, w, o)
}

func (r *Runtime) Precheck(*World) error { return nil }

func (r *Runtime) StartSession(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error) {
	return r.execCube(ctx, w, o)
}

const (
	cubeInteractiveShell = `command -v bash >/dev/null 2>&1 && exec bash -i; exec sh -i`
	cubeCommandShell     = `command -v bash >/dev/null 2>&1 && exec bash -c "$1"; exec sh -c "$1"`
)

// shellArgv: a sandbox has its own root file system, where the host's
// $SHELL may not be: its bash, else sh.
func (r *Runtime) ShellArgv(command string) []string {
	if command == "" {
		return []string{"/bin/sh", "-c", cubeInteractiveShell}
	}
	return []string{"/bin/sh", "-c", cubeCommandShell, "strata", command}
}

// freeze: the commands run in the sandbox; on this host there is only each
// session's runner, which must keep relaying.
func (r *Runtime) Freeze(ctx context.Context, w *World) func() { return r.cubeFreeze(ctx, w) }

func (r *Runtime) Writers(ctx context.Context, w *World, changes []overlay.Change) []WritingPath {
	return r.cubeWritersOf(ctx, w, changes)
}

// snapshot: the VM snapshot (memory and rootfs) does not hold the
// host-mounted upper: both are taken together and linked in one timeline
// entry.
func (r *Runtime) Snapshot(ctx context.Context, w *World, snapID string) (string, error) {
	return r.cubeSnapshot(ctx, w, snapID)
}

func (r *Runtime) Rollback(ctx context.Context, w *World, runtimeSnap string) error {
	return r.cubeRollback(ctx, w, runtimeSnap)
}

// Quiesce unmounts the overlay inside the sandbox before the host changes
// the upper under it.
func (r *Runtime) Quiesce(ctx context.Context, w *World) error {
	if w.State != StateReady {
		return nil
	}
	return r.cubeUnmountGuest(ctx, w)
}

// Resume mounts the overlay in the sandbox again.
func (r *Runtime) Resume(ctx context.Context, w *World) {
	if w.State != StateReady {
		return
	}
	if err := r.cubeRemountGuest(ctx, w); err != nil {
		r.Log.Warn("remount the overlay in the sandbox", "world", w.Name, "err", err)
	}
}

// usage: the commands run in the sandbox; on this host there are only
// their runners.
func (r *Runtime) Usage(ctx context.Context, w *World, ss []SessionMeta, _ map[int]bool, res *Resources) {
	res.Accounting = "cube"
	r.cubeUsage(ctx, w, ss, res)
}

func (r *Runtime) Destroy(ctx context.Context, w *World) error {
	return r.stopWorldRuntime(ctx, w)
}

func (r *Runtime) ReviveSession(ctx context.Context, name string, s SessionMeta) SessionMeta {
	return r.reviveCubeSession(ctx, name, s)
}

func (r *Runtime) Placement(w *World) Placement { return r.cubePlacement(w) }

// cubeWriterScript lists, in a sandbox, every fd open for writing and every
// shared writable mapping of a file (which writes it with no fd left open)
// as "pgid pid path". It forks twice in all (grep, ls), whatever the number
// of processes and fds: the mode bits of a /proc/PID/fd link are the fd's
// open mode (w: O_WRONLY or O_RDWR), and a process's group is read from its
// stat with the shell's own read. (It forked readlink, sed and cut for every
// fd open for writing: over a minute where the sandbox sees a few thousand
// fds, past the 30 s the scan is given, so apply could only refuse.)
const cubeWriterScript = `pgid() { s=; read -r s 2>/dev/null <"/proc/$1/stat"; s=${s##*) }; set -- $s; pg=${3:-}; }
grep -H ' [r-]w[x-]s ' /proc/[0-9]*/maps 2>/dev/null | while read -r a _ _ _ ino l; do
	[ "$ino" != 0 ] && [ -n "$l" ] || continue
	p=${a%%/maps:*}
	p=${p#/proc/}
	pgid "$p"
	printf '%s %s %s\n' "$pg" "$p" "$l"
done
QUOTING_STYLE=literal LC_ALL=C ls -l /proc/[0-9]*/fd 2>/dev/null | while IFS= read -r line; do
	case $line in
	/proc/*/fd:) p=${line#/proc/}; p=${p%/fd:}; pgid "$p"; continue ;;
	l?w*' -> '*) ;;
	*) continue ;;
	esac
	printf '%s %s %s\n' "$pg" "$p" "${line#* -> }"
done 2>/dev/null; true`

// cubeWritersOf is writersOf for a cube World: its sessions' processes are
// in its sandbox, where the overlay is mounted at the source path, so their
// fds are matched by that path. The sandbox is asked whenever it runs, with
// or without a session: a command's background children live on in the
// sandbox after it ended (envd does not end them), and one of them writing
// a picked file is named as a process of the sandbox. A sandbox that cannot
// be asked counts as writing nothing only when no session runs. A session
// whose command runs (or may) but whose pid in the sandbox is not known
// yet, its start marker still on the way, cannot be told apart nor paused:
// it counts as writing every picked path (apply retries, then refuses),
// never as writing none.
func (e *Runtime) cubeWritersOf(ctx context.Context, w *World, changes []overlay.Change) []WritingPath {
	ss, _ := ListSessions(e.Paths.World(w.Name))
	byGroup := map[string]string{}
	var unknown []string
	for _, s := range ss {
		if !cubeCommandMayRun(s) {
			continue
		}
		if s.GuestPID > 0 {
			byGroup[strconv.Itoa(s.GuestPID)] = s.ID
		} else {
			unknown = append(unknown, s.ID)
		}
	}
	if len(unknown) > 0 {
		e.Log.Warn("apply: a session is starting and its command's pid in the sandbox is not known yet; counting it as writing every picked path",
			"world", w.Name, "sessions", unknown)
		return allWriting(changes, unknown)
	}
	if w.State != StateReady {
		return nil // stopped: everything in the sandbox is paused with it
	}
	byPath := map[string]string{}
	for _, c := range changes {
		byPath[filepath.Join(w.Source, filepath.FromSlash(c.Path))] = c.Path
	}
	client, err := e.cubeClient()
	var out string
	if err == nil {
		out, err = guestScript(ctx, client, e.cubeSandbox(w), 30*time.Second, cubeWriterScript)
	}
	if err != nil && len(byGroup) == 0 {
		e.Log.Warn("apply: list writers in the sandbox (no session runs there: going on)", "world", w.Name, "err", err)
		return nil
	}
	if err != nil {
		// Unknown is not "nobody": refuse rather than publish a guess.
		e.Log.Warn("apply: list writers in the sandbox", "world", w.Name, "err", err)
		ids := make([]string, 0, len(byGroup))
		for _, id := range byGroup {
			ids = append(ids, id)
		}
		return allWriting(changes, ids)
	}
	writers := map[string]map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			continue
		}
		rel, ok := byPath[f[2]]
		if !ok {
			continue
		}
		who, ok := byGroup[f[0]]
		if !ok {
			if who, ok = byGroup[f[1]]; !ok {
				who = "pid " + f[1] + " of the sandbox"
			}
		}
		if writers[rel] == nil {
			writers[rel] = map[string]bool{}
		}
		writers[rel][who] = true
	}
	return runtime.SortedWriters(writers)
}

// allWriting counts every change as written by all of ids: what apply is
// told when it cannot know who writes what.
func allWriting(changes []overlay.Change, ids []string) []WritingPath {
	ids = slices.Clone(ids)
	sort.Strings(ids)
	all := make([]WritingPath, 0, len(changes))
	for _, c := range changes {
		all = append(all, WritingPath{Path: c.Path, Sessions: ids})
	}
	return all
}

// cubeCommandMayRun says whether a cube session's command may be running in
// the sandbox: it is starting or running, or its runner was lost while it
// ran and nobody has found out how it ended (the command lives on in the
// sandbox without its runner; the next look re-attaches).
func cubeCommandMayRun(s SessionMeta) bool {
	switch s.State {
	case SessionStarting, SessionRunning:
		return true
	case SessionLost:
		return s.EndedAt.IsZero() && s.GuestPID > 0
	}
	return false
}

// CubeDoctor is the cube part of doctor.
type CubeDoctor struct {
	Endpoint string `json:"endpoint,omitempty"`
	Status   string `json:"status"`
	Detail   string `json:"detail,omitempty"`
	// Templates are those GET /templates lists; Built, those strata built
	// for a size (cube/templates.json). Cluster is the nodes' capacity.
	Templates []cube.Template     `json:"templates,omitempty"`
	Built     []BuiltCubeTemplate `json:"built_templates,omitempty"`
	Cluster   *CubeCluster        `json:"cluster,omitempty"`
}
