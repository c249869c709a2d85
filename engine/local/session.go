package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/cgroup"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay/mount"
)

// SessionInitArg is the first argument with which strata re-executes itself as a
// session's init: `strata __session-init <session dir>`.
const SessionInitArg = "__session-init"

// SessionSpec is everything needed to start a session; paths are absolute.
type SessionSpec struct {
	// ID defaults to the base of Dir, or to NewSessionID() when Dir is empty too.
	ID    string `json:"id"`
	World string `json:"world"`
	// Source is the source tree's absolute path; the command sees Merged there.
	Source string `json:"source"`
	// Merged is the World's mounted merged view on the host.
	Merged string `json:"merged"`
	// Overlay, when set, is mounted by the init itself at Merged inside the
	// session's own namespaces (kernel overlay with userxattr): the rootless
	// path, where the caller cannot mount on the host.
	Overlay *mount.MountSpec `json:"overlay,omitempty"`
	// StateRoot and HideDirs are covered by an empty read-only tmpfs in the session.
	StateRoot string   `json:"state_root"`
	HideDirs  []string `json:"hide_dirs,omitempty"`
	// Dir is the session dir (worlds/<name>/sessions/<id>), created by StartSession.
	// When empty it is SessionsDir/ID.
	Dir         string   `json:"dir"`
	SessionsDir string   `json:"-"`
	Argv        []string `json:"argv"`
	// Env is the command's whole environment; nil means just a default PATH.
	Env []string `json:"env"`
	// EnvRedact are glob patterns (case-insensitive) of variable names whose values
	// meta.json does not keep; nil means DefaultEnvRedact.
	EnvRedact []string `json:"env_redact,omitempty"`
	// Cwd is inside the World; it defaults to Source.
	Cwd       string    `json:"cwd"`
	TTY       bool      `json:"tty"`
	Rows      uint16    `json:"rows,omitempty"`
	Cols      uint16    `json:"cols,omitempty"`
	NoNetwork bool      `json:"no_network"`
	Isolation Isolation `json:"isolation"`
	Binds     []Bind    `json:"binds,omitempty"`
	// HostDev gives the command the host's /dev instead of a private one. The
	// private /dev has no block devices, which would let root read any World's
	// upper (or the source) straight off the disk.
	HostDev bool `json:"host_dev,omitempty"`
	// Stdin, when set (and not TTY), becomes the command's stdin; otherwise it
	// reads /dev/null.
	Stdin *os.File `json:"-"`
	// Exe is the strata binary to re-execute as the init; default os.Executable().
	Exe string `json:"-"`
	// Watch makes the init watch the World's upper while the command runs
	// (bases and provenance). Nil: derived from StateRoot and World when they
	// name a real World (see deriveEvidence); NoWatch turns that off.
	Watch   *SessionWatch `json:"watch,omitempty"`
	NoWatch bool          `json:"-"`
	// Cgroup is the session's cgroup v2 dir; "" = derived (strata/<world>/<id>
	// under the cgroup2 mount, when writable). The init starts in it.
	Cgroup string `json:"cgroup,omitempty"`
	// CgroupPlaced: the caller started the init in Cgroup (clone3); otherwise
	// the init moves itself there before starting the command.
	CgroupPlaced bool `json:"cgroup_placed,omitempty"`
	// ActivityLog is where the init appends session.ended; "" = none.
	ActivityLog string `json:"activity_log,omitempty"`
	// Network is the session's network mode (engine/network.go); "" is
	// host, or none when NoNetwork is set.
	Network boundary.Network `json:"network,omitempty"`
	// EgressDir holds the World's egress proxy socket, for Network proxy.
	EgressDir string `json:"egress_dir,omitempty"`
	// Boundary is the session's effective boundary (engine/boundary) for the
	// sandbox and strict levels: the init builds the command's view from its
	// mount plan (engine/sandbox). Nil at those levels: computed from the
	// spec with no config (Env scrubbed, HOME the home, no home layer).
	// Ignored at tree, which keeps today's mounts.
	Boundary *boundary.Boundary `json:"boundary,omitempty"`
	// Trace: the init writes STRATA_TRACE phase lines to init.log.
	Trace bool `json:"trace,omitempty"`
	// WorldState is the World as the caller read it (its world.toml), so
	// that StartSession need not read it again; nil: read from StateRoot.
	WorldState *world.World `json:"-"`
}

// DefaultPath is the PATH a session gets when its environment has none.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Normalize checks the spec and fills in its defaults (StartSession calls it).
func (spec *SessionSpec) Normalize() error {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return errors.New("no command")
	}
	if spec.ID == "" {
		if spec.Dir != "" {
			spec.ID = filepath.Base(spec.Dir)
		} else {
			spec.ID = NewSessionID()
		}
	}
	if !fsx.ValidName(spec.ID) {
		return fmt.Errorf("invalid session id %q", spec.ID)
	}
	if spec.Dir == "" {
		if spec.SessionsDir == "" {
			return errors.New("no session dir")
		}
		spec.Dir = filepath.Join(spec.SessionsDir, spec.ID)
	}
	for name, p := range map[string]string{"source": spec.Source, "merged view": spec.Merged, "session dir": spec.Dir} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s %q is not an absolute path", name, p)
		}
	}
	if spec.StateRoot != "" && !filepath.IsAbs(spec.StateRoot) {
		return fmt.Errorf("state root %q is not an absolute path", spec.StateRoot)
	}
	for _, b := range spec.Binds {
		if !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Target) {
			return fmt.Errorf("bind %s:%s: paths must be absolute", b.Source, b.Target)
		}
	}
	if err := spec.normalizeNetwork(); err != nil {
		return err
	}
	iso, err := ParseIsolation(string(spec.Isolation))
	if err != nil {
		return fmt.Errorf("isolation %w", err)
	}
	spec.Isolation = iso
	if spec.Cwd == "" {
		spec.Cwd = spec.Source
	}
	if !filepath.IsAbs(spec.Cwd) {
		return fmt.Errorf("cwd %q is not an absolute path", spec.Cwd)
	}
	if spec.Env == nil {
		spec.Env = []string{DefaultPath}
	}
	if spec.Isolation == IsolationTree {
		spec.Boundary = nil
	} else if spec.Boundary == nil {
		b, err := specBoundary(spec)
		if err != nil {
			return err
		}
		spec.Boundary, spec.Env = b, b.Env
	}
	if spec.Boundary != nil {
		spec.Isolation = Isolation(spec.Boundary.Level)
		if spec.Boundary.Level == boundary.LevelTree {
			spec.Boundary = nil
		}
	}
	if spec.TTY && !slices.ContainsFunc(spec.Env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }) {
		spec.Env = append(slices.Clip(spec.Env), "TERM=xterm-256color")
	}
	if spec.EnvRedact == nil {
		spec.EnvRedact = DefaultEnvRedact
	}
	if spec.Rows == 0 || spec.Cols == 0 {
		spec.Rows, spec.Cols = 24, 80
	}
	if spec.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find strata binary: %w", err)
		}
		spec.Exe = exe
	}
	return nil
}

// StartSession starts spec's command in its own namespaces, behind a re-executed
// strata init that outlives the caller, and returns once the command runs (State
// running) or could not start (State failed, error wrapping ErrStartFailed, exit
// code 127 when the command was not found and 126 when it could not be executed).
func StartSession(ctx context.Context, spec SessionSpec) (SessionMeta, error) {
	if err := spec.Normalize(); err != nil {
		return SessionMeta{}, fmt.Errorf("start session: %w", err)
	}
	spec.Trace = spec.Trace || session.Tracing()
	session.Trace("session: spec normalized")
	if err := os.MkdirAll(filepath.Dir(spec.Dir), 0o755); err != nil {
		return SessionMeta{}, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	meta := SessionMeta{
		ID: spec.ID, World: spec.World, Argv: spec.Argv, Env: RedactEnv(spec.Env, spec.EnvRedact),
		Source: spec.Source, Cwd: spec.Cwd, TTY: spec.TTY, Runtime: RuntimeLocal, Isolation: spec.Isolation, NoNetwork: spec.NoNetwork,
		StartedAt: time.Now(), State: SessionStarting, Attention: AttentionRunning, Network: spec.Network,
	}
	fail := func(err error) (SessionMeta, error) {
		meta.State, meta.Error, meta.EndedAt, meta.Attention = SessionFailed, err.Error(), time.Now(), AttentionFailed
		if meta.ExitCode == 0 {
			meta.ExitCode = 1
		}
		_ = session.WriteMetaPath(spec.Dir, meta)
		return meta, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	w := spec.deriveEvidence()
	if w != nil && spec.Cgroup == "" && spec.residentOK() {
		// The resident init makes the session's dir and fifo itself (it
		// refuses, untouched, a dir that exists) and records it running.
		if m, err, ok := startResident(ctx, &spec, w, fail); ok {
			return m, err
		}
	}
	if err := os.Mkdir(spec.Dir, 0o700); err != nil {
		return SessionMeta{}, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	if err := unix.Mkfifo(filepath.Join(spec.Dir, session.EndFIFO), 0o600); err != nil {
		return SessionMeta{}, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	if err := session.WriteMetaPath(spec.Dir, meta); err != nil {
		return meta, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	session.Trace("session: dir, fifo, meta written")
	if w != nil && spec.Cgroup == "" {
		spec.Cgroup = cgroup.PrepareSession(w, spec.ID)
	}
	session.Trace("session: evidence derived (world.toml, cgroup)")
	init, readyR, err := startInit(spec)
	if err != nil {
		return fail(err)
	}
	session.Trace("session: init started")
	defer readyR.Close()
	exited := make(chan error, 1)
	// Reap the init if it ends while we live; it is in its own session, so it
	// outlives us otherwise.
	go func() { exited <- init.Wait() }()

	m, err := session.AwaitReady(ctx, init.Process, exited, readyR, "session init", spec.ID, spec.Dir, fail)
	session.Trace("session: ready received")
	return m, err
}

// startInit starts `Exe __session-init Dir` in new namespaces and hands it the spec.
func startInit(spec SessionSpec) (*exec.Cmd, *os.File, error) {
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	defer devNull.Close()
	initLog, err := os.OpenFile(filepath.Join(spec.Dir, session.InitLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("create init log: %w", err)
	}
	defer initLog.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer specR.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		specW.Close()
		return nil, nil, err
	}
	defer readyW.Close()

	exe, small := initExe(spec.Exe)
	newCmd := func(cgroupFD int) *exec.Cmd {
		cmd := exec.Command(exe, SessionInitArg, spec.Dir)
		// The init's own environment and cwd are visible to the command through
		// /proc/1, so they carry nothing: no secrets, no path into the source.
		cmd.Env = []string{}
		cmd.Dir = "/"
		cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, devNull, initLog
		cmd.ExtraFiles = []*os.File{specR, readyW}
		if spec.Stdin != nil && !spec.TTY {
			cmd.ExtraFiles = append(cmd.ExtraFiles, spec.Stdin)
		}
		flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC)
		if spec.ownNetns() {
			flags |= unix.CLONE_NEWNET
		}
		if spec.Boundary != nil && cgroupFD >= 0 {
			// Born in its cgroup and in a cgroup namespace rooted there:
			// the command sees only its own subtree (mounted read-only).
			flags |= unix.CLONE_NEWCGROUP
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: flags}
		if os.Geteuid() != 0 {
			// Rootless: the caller's ids become root inside a user namespace that owns
			// the session's other namespaces; the merged view must be a mount the
			// caller owns (fuse-overlayfs).
			cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
			cmd.SysProcAttr.GidMappingsEnableSetgroups = false
		}
		if cgroupFD >= 0 {
			// Born in the session's cgroup (clone3): no window in which the
			// command's processes are counted elsewhere.
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgroupFD
		}
		return cmd
	}
	cgroupFD := -1
	if spec.Cgroup != "" {
		if cgroupFD, err = unix.Open(spec.Cgroup, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			defer unix.Close(cgroupFD)
		} else {
			cgroupFD = -1
		}
	}
	cmd := newCmd(cgroupFD)
	err = cmd.Start()
	if err != nil && cgroupFD >= 0 {
		// clone3 into a cgroup can be refused (an old kernel, a cgroup that may
		// not hold processes): start normally; the init moves itself.
		cmd = newCmd(-1)
		err = cmd.Start()
	}
	spec.CgroupPlaced = err == nil && cmd.SysProcAttr.UseCgroupFD
	if err != nil {
		specW.Close()
		readyR.Close()
		if os.Geteuid() != 0 && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSPC)) {
			return nil, nil, fmt.Errorf("start session init without root: user namespaces are not available to this user "+
				"(check /proc/sys/user/max_user_namespaces and kernel.unprivileged_userns_clone): %w", err)
		}
		return nil, nil, fmt.Errorf("start session init %s: %w", exe, err)
	}
	is := initSpec{SessionSpec: spec, HasStdin: spec.Stdin != nil && !spec.TTY}
	if small {
		is.Build, is.Strata = BuildStamp(), spec.Exe
	}
	specJSON, err := json.Marshal(is)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		specW.Close()
		readyR.Close()
		return nil, nil, fmt.Errorf("encode session spec: %w", err)
	}
	// A pipe holds 64 KiB; the init reads the spec first thing, so a larger
	// environment just blocks here briefly.
	// If the init died before reading, the ready pipe reports it to the caller.
	_, _ = specW.Write(specJSON)
	specW.Close()
	return cmd, readyR, nil
}

// initSpec is the spec as the init receives it on fd 3.
type initSpec struct {
	SessionSpec
	HasStdin bool `json:"has_stdin"`
	// Build and Strata are set when the init is strata-init: the caller's
	// BuildStamp, and the strata binary an init of another build hands
	// the session over to.
	Build  string `json:"build,omitempty"`
	Strata string `json:"strata,omitempty"`
}

// readFirstLineWithPrefix returns the rest of the first line of path starting with prefix.
func readFirstLineWithPrefix(f *os.File, prefix string) (string, bool) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// deriveEvidence fills in, for a session of a real World (its world.toml is
// under StateRoot) and where the caller did not say, what the init watches
// (the upper, for bases and provenance) and the activity log it reports its
// end to, and returns the World (nil for no real World): its cgroup is the
// caller's to make.
func (spec *SessionSpec) deriveEvidence() *world.World {
	if spec.StateRoot == "" || !fsx.ValidName(spec.World) {
		return nil
	}
	p := Paths{Root: spec.StateRoot}
	w := spec.WorldState
	if w == nil || w.Name != spec.World {
		var err error
		if w, err = world.ReadFile(p.WorldFile(spec.World)); err != nil {
			return nil
		}
	}
	if w.Backend != world.RuntimeLocal {
		return nil
	}
	if spec.Watch == nil && !spec.NoWatch {
		spec.Watch = &SessionWatch{
			Upper: p.Upper(w.Name), Lower: w.Source, Objects: p.Objects(),
			Bases: filepath.Join(p.World(w.Name), "bases"), Provenance: filepath.Join(p.World(w.Name), "provenance"),
			Dialect: w.Dialect,
		}
	}
	if spec.ActivityLog == "" {
		spec.ActivityLog = p.Activity()
	}
	return w
}

// specBoundary is the boundary of a spec that names a confined level but no
// boundary (a caller without config): the level's defaults, the home from
// the command's HOME, no home layer (the home read-only).
func specBoundary(spec *SessionSpec) (*boundary.Boundary, error) {
	home := ""
	for _, kv := range spec.Env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	r := boundary.Request{Level: string(spec.Isolation)}
	if spec.NoNetwork {
		r.Network = string(boundary.NetworkNone)
	}
	b, err := boundary.Compute(nil, boundary.World{
		Name: spec.World, Source: spec.Source, StateRoot: spec.StateRoot, HideDirs: spec.HideDirs, Home: home,
	}, spec.Env, r)
	if err != nil {
		return nil, fmt.Errorf("boundary: %w", err)
	}
	return b, nil
}
