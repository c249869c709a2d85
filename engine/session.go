package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay/mount"
)

// SessionInitArg is the first argument with which strata re-executes itself as a
// session's init: `strata __session-init <session dir>`.
const SessionInitArg = "__session-init"

// Files in a session dir.
const (
	MetaFile     = "meta.json"
	AttachSocket = "attach.sock"
	// endFIFO is held open for writing by the init until the session's end is
	// recorded; see endWatch.
	endFIFO        = "end.fifo"
	initLogFile    = "init.log"
	metaTempPrefix = ".meta.json.tmp-"
)

// Bind mounts Source (a host path) at Target inside the session.
type Bind struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

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
}

// DefaultEnvRedact are the variable name patterns whose values are not recorded.
var DefaultEnvRedact = []string{"*TOKEN*", "*SECRET*", "*PASSWORD*", "*KEY*"}

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// SessionState is a session's life-cycle state.
type SessionState string

const (
	SessionStarting SessionState = "starting"
	SessionRunning  SessionState = "running"
	SessionExited   SessionState = "exited" // exit code 0
	SessionFailed   SessionState = "failed" // non-zero exit, or could not start
	SessionKilled   SessionState = "killed" // ended by a signal
	SessionLost     SessionState = "lost"   // its init vanished without recording an end
	// SessionBroken is never written: its meta.json cannot be read (Error
	// says why). Its transcript is still there to read.
	SessionBroken SessionState = "broken"
)

// LostExitCode is a lost session's ExitCode: how its command ended is not
// known, and 0 would claim success (strata exec exits 255 for it, like ssh
// when the connection, not the command, failed).
const LostExitCode = -1

// Ended reports whether the session will not change any more.
func (s SessionState) Ended() bool {
	switch s {
	case SessionExited, SessionFailed, SessionKilled, SessionLost, SessionBroken:
		return true
	}
	return false
}

// SessionMeta is a session's record, stored as meta.json in its dir.
type SessionMeta struct {
	ID     string   `json:"id"`
	World  string   `json:"world"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env,omitempty"` // redacted
	Source string   `json:"source"`
	Cwd    string   `json:"cwd"`
	TTY    bool     `json:"tty"`
	// Runtime is where the command ran; "" in meta.json written before it
	// was recorded reads as local.
	Runtime Runtime `json:"runtime,omitempty"`
	// Isolation is the local runtime's level; "" for a cube session (a
	// MicroVM of its own).
	Isolation Isolation `json:"isolation,omitempty"`
	NoNetwork bool      `json:"no_network"`
	// InitPID and PID (the command, also its process group) are host pids.
	InitPID int `json:"init_pid,omitempty"`
	// InitStartTime is the init's start time in clock ticks after boot
	// (/proc/<pid>/stat field 22), which tells a reused pid from the init.
	InitStartTime uint64 `json:"init_start_time,omitempty"`
	PID           int    `json:"pid,omitempty"`
	// GuestPID is a cube session's command pid inside its sandbox.
	GuestPID  int          `json:"guest_pid,omitempty"`
	StartedAt time.Time    `json:"started_at"`
	EndedAt   time.Time    `json:"ended_at,omitzero"`
	State     SessionState `json:"state"`
	ExitCode  int          `json:"exit_code"`        // LostExitCode (-1) when lost: no status was recorded
	Signal    string       `json:"signal,omitempty"` // e.g. "SIGKILL"; ExitCode is then 128+N
	Error     string       `json:"error,omitempty"`
	Attention Attention    `json:"attention"`
	// KilledByStrata: strata ended the session on purpose (kill, K,
	// rollback --kill, rm --kill), which is not a failure.
	KilledByStrata bool `json:"killed_by_strata,omitempty"`
	// Agent is an agent session's status (never in meta.json: filled in by
	// Engine.Sessions from the agent's record).
	Agent *agent.Status `json:"agent,omitempty"`
	// Network is the session's network mode; "" in meta.json written before
	// it was recorded (host, or none with NoNetwork).
	Network boundary.Network `json:"network,omitempty"`
}

// Duration is how long the session ran, or has run so far.
func (m SessionMeta) Duration() time.Duration {
	if m.EndedAt.IsZero() {
		return time.Since(m.StartedAt)
	}
	return m.EndedAt.Sub(m.StartedAt)
}

var (
	// ErrStartFailed: the session's command could not be started (Error says why).
	ErrStartFailed = errors.New("session command did not start")
	// ErrSessionNotRunning: the session has ended.
	ErrSessionNotRunning = errors.New("session is not running")
	// ErrNoSession: the dir holds no session.
	ErrNoSession = errors.New("no such session")
)

// NewSessionID returns a short id that sorts by creation time: milliseconds since
// the epoch in base 36, a dash, and 4 random base-36 digits.
func NewSessionID() string {
	ms := strconv.FormatInt(time.Now().UnixMilli(), 36)
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := make([]byte, 4)
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	for i, c := range b {
		suffix[i] = digits[int(c)%len(digits)]
	}
	return ms + "-" + string(suffix)
}

// RedactEnv replaces the value of every variable whose name matches one of the
// patterns (case-insensitive globs) with "[redacted]".
func RedactEnv(env, patterns []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		for _, p := range patterns {
			if ok, _ := path.Match(strings.ToUpper(p), upper); ok {
				kv = name + "=[redacted]"
				break
			}
		}
		out = append(out, kv)
	}
	return out
}

func (spec *SessionSpec) normalize() error {
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
		spec.Env = []string{defaultPath}
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

// readyMessage is what the init sends back once the command runs or failed to start.
type readyMessage struct {
	Meta SessionMeta `json:"meta"`
}

// StartSession starts spec's command in its own namespaces, behind a re-executed
// strata init that outlives the caller, and returns once the command runs (State
// running) or could not start (State failed, error wrapping ErrStartFailed, exit
// code 127 when the command was not found and 126 when it could not be executed).
func StartSession(ctx context.Context, spec SessionSpec) (SessionMeta, error) {
	if err := spec.normalize(); err != nil {
		return SessionMeta{}, fmt.Errorf("start session: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(spec.Dir), 0o755); err != nil {
		return SessionMeta{}, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	if err := os.Mkdir(spec.Dir, 0o700); err != nil {
		return SessionMeta{}, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	if err := unix.Mkfifo(filepath.Join(spec.Dir, endFIFO), 0o600); err != nil {
		return SessionMeta{}, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	meta := SessionMeta{
		ID: spec.ID, World: spec.World, Argv: spec.Argv, Env: RedactEnv(spec.Env, spec.EnvRedact),
		Source: spec.Source, Cwd: spec.Cwd, TTY: spec.TTY, Runtime: RuntimeLocal, Isolation: spec.Isolation, NoNetwork: spec.NoNetwork,
		StartedAt: time.Now(), State: SessionStarting, Attention: AttentionRunning, Network: spec.Network,
	}
	if err := writeSessionMetaPath(spec.Dir, meta); err != nil {
		return meta, fmt.Errorf("start session %s: %w", spec.ID, err)
	}
	fail := func(err error) (SessionMeta, error) {
		meta.State, meta.Error, meta.EndedAt, meta.Attention = SessionFailed, err.Error(), time.Now(), AttentionFailed
		if meta.ExitCode == 0 {
			meta.ExitCode = 1
		}
		_ = writeSessionMetaPath(spec.Dir, meta)
		return meta, fmt.Errorf("start session %s: %w", spec.ID, err)
	}

	spec.deriveEvidence()
	init, readyR, err := startInit(spec)
	if err != nil {
		return fail(err)
	}
	defer readyR.Close()
	exited := make(chan error, 1)
	// Reap the init if it ends while we live; it is in its own session, so it
	// outlives us otherwise.
	go func() { exited <- init.Wait() }()

	return awaitReady(ctx, init.Process, exited, readyR, "session init", spec.ID, spec.Dir, fail)
}

// awaitReady waits for the message with which a session's init (or a cube
// session runner) says the command runs or failed to start.
func awaitReady(ctx context.Context, proc *os.Process, exited <-chan error, readyR io.Reader, who, id, dir string, fail func(error) (SessionMeta, error)) (SessionMeta, error) {
	readyCh := make(chan readyResult, 1)
	go func() {
		var msg readyMessage
		err := json.NewDecoder(readyR).Decode(&msg)
		readyCh <- readyResult{msg, err}
	}()
	select {
	case <-ctx.Done():
		_ = proc.Kill()
		drainErr(exited)
		return fail(ctx.Err())
	case r := <-readyCh:
		if r.err != nil {
			drainErr(exited)
			// The init records the command as running just before it says
			// so on the ready pipe: if it died in between, the command did
			// start, and the session is lost, not a start that failed.
			if m, err := ReadSessionMeta(dir); err == nil && m.PID > 0 && (m.State == SessionRunning || m.State == SessionLost) {
				return m, nil
			}
			return fail(fmt.Errorf("%s ended before the command started: %s", who, initFailure(dir, r.err)))
		}
		if r.msg.Meta.State == SessionFailed {
			return r.msg.Meta, fmt.Errorf("start session %s: %s: %w", id, r.msg.Meta.Error, ErrStartFailed)
		}
		return r.msg.Meta, nil
	}
}

type readyResult struct {
	msg readyMessage
	err error
}

// initFailure explains an init that died early, from what it wrote to init.log.
func initFailure(dir string, readErr error) string {
	log, _ := os.ReadFile(filepath.Join(dir, initLogFile))
	log = bytes.TrimSpace(log)
	if len(log) == 0 {
		return readErr.Error()
	}
	if len(log) > 2000 {
		log = log[:2000]
	}
	return string(log)
}

// startInit starts `Exe __session-init Dir` in new namespaces and hands it the spec.
func startInit(spec SessionSpec) (*exec.Cmd, *os.File, error) {
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	defer devNull.Close()
	initLog, err := os.OpenFile(filepath.Join(spec.Dir, initLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
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

	newCmd := func(cgroupFD int) *exec.Cmd {
		cmd := exec.Command(spec.Exe, SessionInitArg, spec.Dir)
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
		return nil, nil, fmt.Errorf("start session init %s: %w", spec.Exe, err)
	}
	specJSON, err := json.Marshal(initSpec{SessionSpec: spec, HasStdin: spec.Stdin != nil && !spec.TTY})
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
}

// writeSessionMetaPath writes meta.json atomically (temp file, rename).
func writeSessionMetaPath(dir string, meta SessionMeta) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write session meta: %w", err)
	}
	defer root.Close()
	return writeSessionMeta(root, meta)
}

// writeSessionMeta writes meta.json through a root handle, which keeps working in the
// init after the state root is hidden from its mount namespace. Only an ended
// session's meta is fsynced: after a crash a starting or running session is lost
// whatever its file says, and each fsync costs a short command's whole run time
// again. Readers always see a whole file (rename).
func writeSessionMeta(root *os.Root, meta SessionMeta) error {
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("encode session meta: %w", err)
	}
	data = append(data, '\n')
	tmp := metaTempPrefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write session meta: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && meta.State.Ended() {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, MetaFile)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("write session meta: %w", err)
	}
	return nil
}

// ReadSessionMeta reads a session's meta.json. A session recorded as starting or
// running whose init has gone (or whose pid now belongs to another process) is
// reported as lost.
func ReadSessionMeta(dir string) (SessionMeta, error) {
	meta, err := readMetaFile(dir)
	if err != nil || meta.State.Ended() {
		return meta, err
	}
	if initAlive(meta) {
		return meta, nil
	}
	// The init may have written its end just now, right before it exited.
	meta, err = readMetaFile(dir)
	if err != nil || meta.State.Ended() || initAlive(meta) {
		return meta, err
	}
	meta.State, meta.Attention = SessionLost, AttentionLost
	// Nobody knows how the command ended: never let that read as success.
	meta.ExitCode = LostExitCode
	if meta.Error == "" {
		meta.Error = fmt.Sprintf("session lost: its runner (pid %d) ended without recording an exit status", meta.InitPID)
	}
	return meta, nil
}

func readMetaFile(dir string) (SessionMeta, error) {
	var meta SessionMeta
	data, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if errors.Is(err, os.ErrNotExist) {
		return meta, fmt.Errorf("read session %s: %w", dir, ErrNoSession)
	}
	if err != nil {
		return meta, fmt.Errorf("read session meta: %w", err)
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return meta, fmt.Errorf("read session meta %s: %w", dir, err)
	}
	meta.upgrade()
	if meta.State.Ended() {
		if !meta.KilledByStrata {
			meta.KilledByStrata = killedByStrata(dir)
		}
		meta.Attention = SessionAttention(meta)
	}
	return meta, nil
}

// legacyIsolationCube is how meta.json recorded a cube session before it
// had a runtime of its own: as an isolation level.
const legacyIsolationCube Isolation = "cube"

// upgrade reads older meta.json: no runtime means local, and isolation
// "cube" meant the cube runtime.
func (m *SessionMeta) upgrade() {
	if m.Isolation == legacyIsolationCube {
		m.Runtime, m.Isolation = RuntimeCube, ""
	}
	if m.Runtime == "" {
		m.Runtime = RuntimeLocal
	}
}

// startingGrace is how long a session may stay "starting" without an init pid: the
// caller writes that state just before it starts the init.
const startingGrace = 30 * time.Second

func initAlive(meta SessionMeta) bool {
	if meta.InitPID <= 0 {
		return meta.State == SessionStarting && time.Since(meta.StartedAt) < startingGrace
	}
	st, err := readProcStat(meta.InitPID)
	if err != nil || st.state == 'Z' || st.state == 'X' {
		return false
	}
	return meta.InitStartTime == 0 || st.startTime == meta.InitStartTime
}

type procStat struct {
	state     byte
	pgrp      int
	startTime uint64
}

// readProcStat reads the fields strata needs from /proc/<pid>/stat.
func readProcStat(pid int) (procStat, error) {
	return readProcStatFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
}

func readProcStatFile(path string) (procStat, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(data)
}

func parseProcStat(data []byte) (procStat, error) {
	// The command name is in parentheses and may hold spaces or ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed stat")
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 {
		return procStat{}, errors.New("malformed stat")
	}
	pgrp, err := strconv.Atoi(fields[2])
	if err != nil {
		return procStat{}, fmt.Errorf("malformed stat: %w", err)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("malformed stat: %w", err)
	}
	return procStat{state: fields[0][0], pgrp: pgrp, startTime: start}, nil
}

// WaitSession waits until the session has ended (or is lost) and returns its meta.
func WaitSession(ctx context.Context, dir string) (SessionMeta, error) {
	end := openEndWatch(dir)
	defer end.close()
	for {
		meta, err := ReadSessionMeta(dir)
		if err != nil || meta.State.Ended() {
			return meta, err
		}
		if err := ctx.Err(); err != nil {
			return meta, err
		}
		end.wait(ctx, lostCheckInterval)
	}
}

// endWatch notices a session's end without inotify (closing an inotify watch costs
// a kernel grace period, 5-40 ms, on every short strata process): the init holds
// end.fifo open for writing while it runs and closes it right after writing its
// end, so a reader holding the FIFO sees POLLHUP then, or when the init dies.
type endWatch struct {
	fd  int
	hup bool
}

func openEndWatch(dir string) *endWatch {
	fd, err := unix.Open(filepath.Join(dir, endFIFO), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &endWatch{fd: -1}
	}
	return &endWatch{fd: fd}
}

// wait returns when the init let go of the FIFO, after timeout, or when ctx ends
// (within 100 ms). A FIFO reports a hang-up only if a writer came and went since
// it was opened, so callers re-read the meta after each wait.
func (e *endWatch) wait(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return
		}
		step := min(left, 100*time.Millisecond)
		if e.fd < 0 || e.hup {
			// Nothing to poll (an old session, or the end already seen while the
			// meta lags behind, e.g. a killed init still exiting).
			time.Sleep(min(step, 5*time.Millisecond))
			continue
		}
		fds := []unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(step.Milliseconds(), 1)))
		if err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLIN|unix.POLLERR) != 0 {
			e.hup = true
			return
		}
	}
}

func (e *endWatch) close() {
	if e.fd >= 0 {
		unix.Close(e.fd)
	}
}

// ListSessions returns the sessions of a World (worldDir/sessions/*), oldest first.
// A dir whose meta.json is unreadable is listed as a SessionBroken session
// (its transcript can still be read); one with no meta.json yet, a session
// being created, is skipped.
func ListSessions(worldDir string) ([]SessionMeta, error) {
	entries, err := os.ReadDir(filepath.Join(worldDir, "sessions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var sessions []SessionMeta
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(worldDir, "sessions", e.Name())
		meta, err := ReadSessionMeta(dir)
		if errors.Is(err, ErrNoSession) {
			continue
		}
		if err != nil {
			if !fsx.ValidName(e.Name()) {
				continue // not a session dir strata made
			}
			meta = brokenSession(dir, e.Name(), filepath.Base(worldDir), err)
		}
		sessions = append(sessions, meta)
	}
	slices.SortFunc(sessions, func(a, b SessionMeta) int { return strings.Compare(a.ID, b.ID) })
	return sessions, nil
}

// brokenSession stands for a session whose meta.json cannot be read: its id
// is its directory's name, and its start the directory's mtime.
func brokenSession(dir, id, world string, err error) SessionMeta {
	m := SessionMeta{
		ID: id, World: world, State: SessionBroken, Attention: AttentionLost, ExitCode: -1,
		Error: fmt.Sprintf("%v; its transcript is still readable (strata logs %s %s); remove it with the World or by deleting %s", err, world, id, dir),
	}
	if st, serr := os.Stat(dir); serr == nil {
		m.StartedAt = st.ModTime().UTC()
	}
	return m
}

// KillSession sends sig to the session command's process group.
func KillSession(dir string, sig syscall.Signal) error {
	meta, err := ReadSessionMeta(dir)
	if err != nil {
		return fmt.Errorf("kill session: %w", err)
	}
	if meta.State.Ended() {
		return fmt.Errorf("kill session %s: %w", meta.ID, ErrSessionNotRunning)
	}
	if meta.PID <= 0 {
		return fmt.Errorf("kill session %s: command pid not recorded yet", meta.ID)
	}
	// meta.PID is the command, or a runner relaying to it (see sendSignal).
	markKilled(dir)
	sig = runtimeOf(nil, meta.Runtime).sendSignal(sig)
	err = unix.Kill(-meta.PID, sig)
	if errors.Is(err, unix.ESRCH) {
		// The command left its process group; signal it directly.
		err = unix.Kill(meta.PID, sig)
	}
	if err != nil && !errors.Is(err, unix.ESRCH) {
		unmarkKilled(dir)
		return fmt.Errorf("kill session %s: %w", meta.ID, err)
	}
	return nil
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
// (the upper, for bases and provenance), the cgroup it runs in and the
// activity log it reports its end to.
func (spec *SessionSpec) deriveEvidence() {
	if spec.StateRoot == "" || !fsx.ValidName(spec.World) {
		return
	}
	p := Paths{Root: spec.StateRoot}
	w, err := readWorldFile(p.WorldFile(spec.World))
	if err != nil || !runtimeOf(nil, w.Backend).hostView() {
		return
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
	if spec.Cgroup == "" {
		spec.Cgroup = prepareSessionCgroup(w, spec.ID)
	}
}

// drainErr waits for a goroutine's result whose error is already reported
// another way (the session's metadata, the caller's own error).
func drainErr(ch <-chan error) {
	if err := <-ch; err != nil {
		return // reported elsewhere; only the wait matters here
	}
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
