package cuberun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/engine/sandbox"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/engine/world"
)

// CubeSessionArg is the first argument with which strata re-executes itself
// as a cube session's runner: `strata __cube-session <session dir>`. The
// runner holds the envd exec stream for as long as the command runs, so the
// caller can go away (--detach); it writes the transcript and meta.json in
// the local sessions' formats, and turns signals into kills in the sandbox.
const CubeSessionArg = "__cube-session"

// Descriptors the caller hands the runner.
const (
	cubeRunnerSpecFD  = 3
	cubeRunnerReadyFD = 4
)

// cubeStartMarker is printed to stderr by the wrapper before it execs the
// command: it tells the runner the command runs, with its pid in the guest.
// The runner removes it from the output.
const cubeStartMarker = "\x1estrata-start "

// cubeWrapper runs the command with a shell's semantics for a missing or
// non-executable program (exit 127, 126) and announces its pid first.
const cubeWrapper = `printf '\036strata-start %s\n' "$$" >&2; exec "$@"`

// cubeWrapperNoNet is cubeWrapper in a network namespace of its own inside
// the guest (only lo, brought up): --no-network for a cube session. unshare
// execs in place, so the printed pid is still the command's.
const cubeWrapperNoNet = `exec unshare --net -- /bin/sh -c 'ip link set lo up 2>/dev/null; printf "\036strata-start %s\n" "$$" >&2; exec "$@"' strata "$@"`

// Real-time signals that stand for KILL and STOP on their way to a cube
// session's runner, which relays them to the command in the sandbox: the
// runner could not outlive a real SIGKILL to relay it, and a SIGSTOP would
// stop the runner instead of the command.
const (
	cubeRelayKill = syscall.Signal(40) // SIGRTMIN+6
	cubeRelayStop = syscall.Signal(41) // SIGRTMIN+7
)

// cubeRelaySignal is what to send a cube runner so that sig reaches its
// command.
func cubeRelaySignal(sig syscall.Signal) syscall.Signal {
	switch sig {
	case unix.SIGKILL:
		return cubeRelayKill
	case unix.SIGSTOP:
		return cubeRelayStop
	}
	return sig
}

// relayedSignal is the signal a runner received stands for.
func relayedSignal(sig syscall.Signal) syscall.Signal {
	switch sig {
	case cubeRelayKill:
		return unix.SIGKILL
	case cubeRelayStop:
		return unix.SIGSTOP
	}
	return sig
}

// cubeMaxReattach bounds how often a runner re-attaches to its command
// after the exec stream dropped.
const cubeMaxReattach = 5

// cubeRunnerSpec is what the runner reads on fd 3. It carries the API key
// (never written to a file).
type cubeRunnerSpec struct {
	Dir     string           `json:"dir"`
	Meta    SessionMeta      `json:"meta"`
	Client  cubeClientSpec   `json:"client"`
	Sandbox cube.Sandbox     `json:"sandbox"`
	Request cube.ExecRequest `json:"request"`
	// AttachPID, when set, makes the runner re-attach to this process in
	// the sandbox (Process.Connect) instead of starting the command: its
	// previous runner died while the command ran on (see
	// reviveCubeSession). LostRunner is that runner's host pid.
	AttachPID  int `json:"attach_pid,omitempty"`
	LostRunner int `json:"lost_runner,omitempty"`
	// KillGrace is how long a command has to end after SIGTERM before the
	// runner sends SIGKILL.
	KillGrace time.Duration `json:"kill_grace,omitempty"`
}

// CubeKillGrace is how long `strata kill` (SIGTERM) gives a cube session's
// command before the runner follows with SIGKILL.
var CubeKillGrace = 10 * time.Second

// cubeSessionTag is the envd process tag of a session's command: the
// runner that re-attaches after its predecessor died checks, through
// Process.List, that the pid it recorded is still that command.
func cubeSessionTag(id string) string { return "strata-" + id }

type cubeClientSpec struct {
	Endpoint   string `json:"endpoint"`
	APIKey     string `json:"api_key,omitempty"`
	AuthHeader string `json:"auth_header,omitempty"`
	ProxyAddr  string `json:"proxy_addr,omitempty"`
	Scheme     string `json:"scheme,omitempty"`
}

// hostEnvSkip are variables of the caller's machine that mean nothing (or
// harm) in a sandbox: the guest's own PATH, HOME and so on stay.
var hostEnvSkip = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "PWD": true, "OLDPWD": true,
	"SHLVL": true, "_": true, "MAIL": true, "TMPDIR": true, "DISPLAY": true, "HOSTNAME": true,
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "XAUTHORITY": true,
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// cubeExecEnv is the part of env that is sent with the command.
func cubeExecEnv(env []string) map[string]string {
	out := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !envNameRE.MatchString(k) || hostEnvSkip[k] || len(v) > 4096 ||
			strings.HasPrefix(k, "SSH_") || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "STRATA_") {
			continue
		}
		out[k] = v
	}
	return out
}

// guestCwd maps a working directory in the World to the guest.
func (e *Runtime) guestCwd(w *World, cwd string) string {
	mp := e.cubeMountPoint(w)
	switch {
	case cwd == "":
		return mp
	case !filepath.IsAbs(cwd):
		return filepath.Join(mp, cwd)
	case within(cwd, w.Source):
		return filepath.Join(mp, strings.TrimPrefix(cwd, w.Source))
	}
	return cwd
}

// execCube starts a session in a cube World: the World is brought up if
// needed (planned: created; stopped: resumed) and its overlay checked, then
// a detached runner starts the command through envd.
func (e *Runtime) execCube(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error) {
	if o.Snapshot || e.cfg().AutoSnapshot {
		if err := e.h.SnapshotBeforeExec(ctx, w.Name, o.Argv); err != nil {
			return SessionMeta{}, fmt.Errorf("exec in world %q: snapshot before exec: %w", w.Name, err)
		}
	}
	name := w.Name
	w, sb, err := e.ensureCubeReady(ctx, name)
	if err != nil {
		return SessionMeta{}, fmt.Errorf("exec in world %q: %w", name, err)
	}
	cfg, err := e.cubeClientConfig()
	if err != nil {
		return SessionMeta{}, fmt.Errorf("exec in world %q: %w", w.Name, err)
	}
	env, cwd := o.EnvAndCwd(w)
	if o.TTY && !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }) {
		env = append(slices.Clip(env), "TERM=xterm-256color")
	}
	wrapper := cubeWrapper
	if o.NoNetwork {
		wrapper = cubeWrapperNoNet
	}
	id := NewSessionID()
	spec := cubeRunnerSpec{
		Dir: filepath.Join(e.Paths.Sessions(w.Name), id),
		Meta: SessionMeta{
			ID: id, World: w.Name, Argv: o.Argv, Env: RedactEnv(env, e.cfg().EnvRedact),
			Source: w.Source, Cwd: cwd, TTY: o.TTY, Runtime: RuntimeCube, NoNetwork: o.NoNetwork,
			StartedAt: time.Now(), State: SessionStarting, Attention: AttentionRunning,
		},
		Client:  cubeClientSpec{Endpoint: cfg.Endpoint, APIKey: cfg.APIKey, AuthHeader: cfg.AuthHeader, ProxyAddr: cfg.ProxyAddr, Scheme: cfg.Scheme},
		Sandbox: *sb,
		Request: cube.ExecRequest{
			Cmd:  "/bin/sh",
			Args: append([]string{"-c", wrapper, "strata"}, o.Argv...),
			Envs: cubeExecEnv(env), Cwd: e.guestCwd(w, cwd),
			Tag: cubeSessionTag(id),
		},
		KillGrace: CubeKillGrace,
	}
	if o.TTY {
		// An attaching client sends its own size first thing.
		spec.Request.PTY = &cube.PTYSize{Rows: 24, Cols: 80}
	}
	exe := e.exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return SessionMeta{}, fmt.Errorf("exec in world %q: find strata binary: %w", w.Name, err)
		}
	}
	meta, err := startCubeRunner(ctx, exe, spec)
	if err != nil {
		return meta, fmt.Errorf("exec in world %q: %w", w.Name, err)
	}
	e.h.SessionStarted(ctx, w.Name, meta.ID, map[string]any{"argv": o.Argv, "backend": string(RuntimeCube), "sandbox": sb.SandboxID})
	return meta, nil
}

// startCubeRunner makes the session dir, starts the runner in a session and
// PID namespace of its own (freezing a World stops what lives in its
// sessions' PID namespaces: for a cube session, nothing on this host), and
// returns once the command runs in the sandbox or could not start.
func startCubeRunner(ctx context.Context, exe string, spec cubeRunnerSpec) (SessionMeta, error) {
	meta := spec.Meta
	if spec.AttachPID == 0 {
		if err := os.MkdirAll(filepath.Dir(spec.Dir), 0o755); err != nil {
			return meta, fmt.Errorf("start session %s: %w", meta.ID, err)
		}
		if err := os.Mkdir(spec.Dir, 0o700); err != nil {
			return meta, fmt.Errorf("start session %s: %w", meta.ID, err)
		}
		if err := unix.Mkfifo(filepath.Join(spec.Dir, session.EndFIFO), 0o600); err != nil {
			return meta, fmt.Errorf("start session %s: %w", meta.ID, err)
		}
	}
	if spec.AttachPID == 0 {
		if err := session.WriteMetaPath(spec.Dir, meta); err != nil {
			return meta, fmt.Errorf("start session %s: %w", meta.ID, err)
		}
	}
	fail := func(err error) (SessionMeta, error) {
		if spec.AttachPID != 0 {
			// The command may still run: the session stays as it was
			// (lost, its runner gone), and the next look tries again.
			return meta, fmt.Errorf("re-attach to session %s: %w", meta.ID, err)
		}
		meta.State, meta.Error, meta.EndedAt, meta.Attention, meta.ExitCode = SessionFailed, err.Error(), time.Now(), AttentionFailed, 1
		_ = session.WriteMetaPath(spec.Dir, meta)
		return meta, fmt.Errorf("start session %s: %w", meta.ID, err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fail(err)
	}
	defer devNull.Close()
	runnerLog, err := os.OpenFile(filepath.Join(spec.Dir, session.InitLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	defer runnerLog.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer specR.Close()
	defer specW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer readyR.Close()
	cmd := exec.Command(exe, CubeSessionArg, spec.Dir)
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, devNull, runnerLog
	cmd.ExtraFiles = []*os.File{specR, readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: unix.CLONE_NEWPID}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return fail(fmt.Errorf("start cube session runner %s: %w", exe, err))
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The runner cannot see its own host pid from inside its PID namespace;
	// it is the session's "init" for liveness and the target of kills.
	spec.Meta.InitPID, spec.Meta.PID = cmd.Process.Pid, cmd.Process.Pid
	if st, err := session.ReadProcStat(cmd.Process.Pid); err == nil {
		spec.Meta.InitStartTime = st.StartTime
	}
	data, err := json.Marshal(spec)
	if err != nil {
		_ = cmd.Process.Kill()
		return fail(err)
	}
	_, _ = specW.Write(data)
	specW.Close()

	return session.AwaitReady(ctx, cmd.Process, exited, readyR, "cube session runner", meta.ID, spec.Dir, fail)
}

// CubeSessionMain is the cube session runner (see CubeSessionArg); args are
// the arguments after it. It returns the process exit code.
func CubeSessionMain(args []string) int {
	// Long-lived: it must not hold what its starter leaked (sandbox.CloseInherited).
	sandbox.CloseInherited([]int{3, 4})
	if len(args) > 0 && args[0] == CubeSessionArg {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "usage: strata %s SESSION_DIR (started by strata itself)\n", CubeSessionArg)
		return 2
	}
	if err := runCubeSession(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "cube session runner %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func runCubeSession(dir string) error {
	unix.CloseOnExec(cubeRunnerSpecFD)
	unix.CloseOnExec(cubeRunnerReadyFD)
	ready := os.NewFile(cubeRunnerReadyFD, "ready")
	specFile := os.NewFile(cubeRunnerSpecFD, "spec")
	var spec cubeRunnerSpec
	err := json.NewDecoder(specFile).Decode(&spec)
	specFile.Close()
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	if spec.Dir != dir {
		return fmt.Errorf("spec is for %s", spec.Dir)
	}
	r := &cubeRunner{dir: dir, spec: spec, meta: spec.Meta, ready: ready}
	return r.run()
}

type cubeRunner struct {
	dir   string
	spec  cubeRunnerSpec
	meta  SessionMeta
	ready *os.File
}

func (r *cubeRunner) signalReady() {
	if r.ready != nil {
		_ = json.NewEncoder(r.ready).Encode(session.ReadyMessage{Meta: r.meta})
		r.ready.Close()
		r.ready = nil
	}
}

// end records how the session ended and lets waiters go.
func (r *cubeRunner) end(fifo *os.File) error {
	r.meta.EndedAt = time.Now()
	err := session.WriteMetaPath(r.dir, r.meta)
	r.signalReady()
	if fifo != nil {
		fifo.Close()
	}
	if info, serr := os.Stat(filepath.Join(r.dir, session.InitLogFile)); serr == nil && info.Size() == 0 {
		_ = os.Remove(filepath.Join(r.dir, session.InitLogFile))
	}
	return err
}

func (r *cubeRunner) run() error {
	fifo, err := os.OpenFile(filepath.Join(r.dir, session.EndFIFO), os.O_RDWR|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", session.EndFIFO, err)
	}
	if err := session.WriteMetaPath(r.dir, r.meta); err != nil {
		fifo.Close()
		return err
	}
	failStart := func(err error) error {
		r.meta.State, r.meta.Attention, r.meta.ExitCode, r.meta.Error = SessionFailed, AttentionFailed, 1, err.Error()
		return r.end(fifo)
	}
	tf, err := os.OpenFile(filepath.Join(r.dir, TranscriptFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return failStart(fmt.Errorf("open transcript: %w", err))
	}
	defer tf.Close()
	tw, err := session.NewTranscriptWriter(tf)
	if err != nil {
		return failStart(err)
	}
	c := r.spec.Client
	client, err := cube.New(cube.Config{Endpoint: c.Endpoint, APIKey: c.APIKey, AuthHeader: c.AuthHeader, ProxyAddr: c.ProxyAddr, Scheme: c.Scheme})
	if err != nil {
		return failStart(err)
	}
	sb := r.spec.Sandbox

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
		unix.SIGCONT, unix.SIGTSTP, cubeRelayKill, cubeRelayStop)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan int, 1)
	onStart := func(pid int) { started <- pid }
	var stdout, stderr io.Writer = transcriptStream{tw, StreamStdout}, &startFilter{next: transcriptStream{tw, StreamStderr}, onStart: onStart}
	var term *cubeTerminal
	var pty *session.PTYServer
	closeTerminal := func() {}
	if req := r.spec.Request; req.PTY != nil {
		// One stream: the terminal, which the start marker comes through.
		ln, err := session.ListenAttach(r.dir)
		if err != nil {
			return failStart(err)
		}
		term = &cubeTerminal{client: client, sb: &sb}
		pty = session.NewTerminalServer(term, tw, ln)
		_ = tw.AppendResize(time.Now(), WinSize{Rows: req.PTY.Rows, Cols: req.PTY.Cols})
		stdout, stderr = &startFilter{next: pty, onStart: onStart}, nil
		var once sync.Once
		// Before the end is recorded: whoever waits for it finds the
		// clients served and the socket gone.
		closeTerminal = func() {
			once.Do(func() {
				pty.Finish(2 * time.Second)
				_ = os.Remove(filepath.Join(r.dir, AttachSocket))
			})
		}
		defer closeTerminal()
	}
	type result struct {
		res cube.ExecResult
		err error
	}
	done := make(chan result, 1)
	attention := make(chan Attention, 1)
	stopAttention := make(chan struct{})
	defer close(stopAttention)
	remotePID, reattached := 0, 0
	onStarted := func(pid int) {
		remotePID = pid
		r.meta.State, r.meta.GuestPID = SessionRunning, pid
		if r.spec.AttachPID == 0 {
			r.meta.StartedAt = time.Now()
		}
		if err := session.WriteMetaPath(r.dir, r.meta); err != nil {
			cancel()
		}
		if pty != nil && pid > 0 {
			term.pid.Store(int64(pid))
			go pty.Serve()
			go watchCubeAttention(client, &sb, pid, pty, term, attention, stopAttention)
		}
		r.signalReady()
	}
	if pid := r.spec.AttachPID; pid > 0 {
		// The previous runner died with the command running: carry on
		// from what envd sends from now on, and say what was missed.
		_ = tw.Append(StreamStderr, time.Now(), []byte(fmt.Sprintf(
			"strata: the session's runner (pid %d) ended while the command ran; re-attached to process %d in sandbox %s; output printed in between is not in this transcript\n",
			r.spec.LostRunner, pid, sb.SandboxID)))
		if term == nil {
			stdout, stderr = transcriptStream{tw, StreamStdout}, transcriptStream{tw, StreamStderr}
		} else {
			stdout = pty
		}
		go func() {
			res, err := client.AttachNotify(ctx, &sb, pid, onStart, stdout, stderr)
			if res.PID == 0 {
				res.PID = pid
			}
			if errors.Is(err, cube.ErrNotFound) {
				err = fmt.Errorf("process %d ended in sandbox %s while no runner watched it; its exit status is unknown: %w", pid, sb.SandboxID, err)
			}
			done <- result{res, err}
		}()
	} else {
		go func() {
			res, err := client.Exec(ctx, &sb, r.spec.Request, stdout, stderr)
			done <- result{res, err}
		}()
	}
	var escalate *time.Timer
	defer func() {
		if escalate != nil {
			escalate.Stop()
		}
	}()
	for {
		select {
		case pid := <-started:
			onStarted(pid)
		case att := <-attention:
			if r.meta.State == SessionRunning && r.meta.Attention != att {
				r.meta.Attention = att
				_ = session.WriteMetaPath(r.dir, r.meta)
			}
		case s := <-sigs:
			sig := relayedSignal(s.(syscall.Signal))
			if remotePID <= 0 {
				if sig != unix.SIGCONT && sig != unix.SIGSTOP && sig != unix.SIGTSTP {
					cancel() // not started yet: cutting the stream is the only way
				}
				continue
			}
			go killInSandbox(client, &sb, remotePID, sig)
			if sig == unix.SIGTERM && escalate == nil && r.spec.KillGrace > 0 {
				// TERM, then KILL: a command that ignores TERM does not
				// outlive `strata kill` by more than the grace.
				pid := remotePID
				escalate = time.AfterFunc(r.spec.KillGrace, func() {
					_ = tw.Append(StreamStderr, time.Now(), []byte(fmt.Sprintf("strata: process %d did not end %s after SIGTERM; sending SIGKILL\n", pid, r.spec.KillGrace)))
					killInSandbox(client, &sb, pid, unix.SIGKILL)
				})
			}
		case res := <-done:
			// A dropped stream leaves the command running in the sandbox
			// (envd does not end it): re-attach through Process.Connect and
			// carry on. Output printed in between is not kept by envd.
			if pid := res.res.PID; errors.Is(res.err, cube.ErrStreamDropped) && pid > 0 && reattached < cubeMaxReattach {
				reattached++
				_ = tw.Append(StreamStderr, time.Now(), []byte(fmt.Sprintf("strata: exec stream dropped; re-attaching to process %d in sandbox %s\n", pid, sb.SandboxID)))
				go func() {
					res2, err := client.Attach(ctx, &sb, pid, stdout, stderr)
					if res2.PID == 0 {
						res2.PID = pid
					}
					if errors.Is(err, cube.ErrNotFound) {
						err = fmt.Errorf("process %d ended in sandbox %s while its stream was down; its exit status is unknown: %w", pid, sb.SandboxID, err)
					}
					done <- result{res2, err}
				}()
				continue
			}
			closeTerminal()
			_ = tf.Sync()
			if res.err != nil && remotePID == 0 && !errors.Is(res.err, cube.ErrStreamDropped) {
				if r.spec.AttachPID == 0 {
					return failStart(res.err)
				}
				if !errors.Is(res.err, cube.ErrNotFound) {
					// Not re-attached, and nothing learnt: the session
					// stays lost with no end recorded, and the next look
					// tries again.
					return res.err
				}
			}
			if res.err == nil && remotePID > 0 {
				endGroupInSandbox(client, &sb, remotePID)
			}
			r.finish(tw, res.res, res.err)
			return r.end(fifo)
		}
	}
}

// finish turns the exec result into the session's end state.
func (r *cubeRunner) finish(tw *session.TranscriptWriter, res cube.ExecResult, err error) {
	switch {
	case err != nil && errors.Is(err, cube.ErrNotFound) && res.PID > 0:
		// The command ended unseen: nobody knows how.
		msg := err.Error()
		_ = tw.Append(StreamStderr, time.Now(), []byte("strata: "+msg+"\n"))
		r.meta.State, r.meta.Attention, r.meta.ExitCode, r.meta.Error = SessionLost, AttentionLost, LostExitCode, msg
	case err != nil:
		msg := err.Error()
		if errors.Is(err, cube.ErrStreamDropped) {
			msg += fmt.Sprintf(" (the command may still be running in sandbox %s)", r.spec.Sandbox.SandboxID)
		}
		_ = tw.Append(StreamStderr, time.Now(), []byte("strata: "+msg+"\n"))
		r.meta.State, r.meta.Attention, r.meta.ExitCode, r.meta.Error = SessionFailed, AttentionFailed, 255, msg
	case strings.HasPrefix(res.Status, "signal") && res.ExitCode > 128:
		r.meta.ExitCode = res.ExitCode
		r.meta.Signal = unix.SignalName(syscall.Signal(res.ExitCode - 128))
		r.meta.State, r.meta.Attention = SessionKilled, AttentionFailed
	case res.ExitCode == 0:
		r.meta.State, r.meta.Attention = SessionExited, AttentionDone
	default:
		r.meta.ExitCode = res.ExitCode
		r.meta.State, r.meta.Attention = SessionFailed, AttentionFailed
	}
}

// guestScript runs a shell script in the sandbox, from /, with "strata" as
// $0 and args after it, and returns its standard output. A script that
// exits non-zero is an error with its status and standard error.
func guestScript(ctx context.Context, client *cube.Client, sb *cube.Sandbox, timeout time.Duration, script string, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out, errOut bytes.Buffer
	res, err := client.Exec(cctx, sb, cube.ExecRequest{
		Cmd: "/bin/sh", Args: append([]string{"-c", script, "strata"}, args...), Cwd: "/",
	}, &out, &errOut)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%s: %s", res.Status, strings.TrimSpace(errOut.String()))
	}
	return out.String(), err
}

// signalInSandbox sends sig (a name: "KILL", "STOP") to the process group
// of each pid in the sandbox, or to the pid itself where it left its group.
// A cube command leads its group: the wrapper's pid is the command's, since
// it execs it.
func signalInSandbox(ctx context.Context, client *cube.Client, sb *cube.Sandbox, sig string, pids ...int) error {
	args := []string{sig}
	for _, p := range pids {
		args = append(args, strconv.Itoa(p))
	}
	_, err := guestScript(ctx, client, sb, 30*time.Second,
		`sig=$1; shift; for p; do kill -s "$sig" -- "-$p" 2>/dev/null || kill -s "$sig" "$p" 2>/dev/null; done; true`, args...)
	if err != nil {
		return fmt.Errorf("kill -%s in sandbox %s: %w", sig, sb.SandboxID, err)
	}
	return nil
}

// endGroupInSandbox ends what is left of a command's process group once the
// command ended, as a local session's processes end with it (its PID
// namespace): envd leaves a command's background children running. Only
// the group is signalled, never the pid itself, which the ended command no
// longer holds. A child that left the group (setsid) lives on; apply still
// finds it if it writes a picked file.
func endGroupInSandbox(client *cube.Client, sb *cube.Sandbox, pgid int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = guestScript(ctx, client, sb, 10*time.Second, `kill -s KILL -- "-$1" 2>/dev/null; true`, strconv.Itoa(pgid))
}

// killInSandbox relays a signal the runner received to its command: TERM
// and KILL through envd's SendSignal, the others (envd sends only those
// two) with kill(1) in the sandbox.
func killInSandbox(client *cube.Client, sb *cube.Sandbox, pid int, sig syscall.Signal) {
	if sig == unix.SIGTERM || sig == unix.SIGKILL {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := cube.SignalTerm
		if sig == unix.SIGKILL {
			s = cube.SignalKill
		}
		err := client.SendSignal(ctx, sb, pid, s)
		if err == nil || errors.Is(err, cube.ErrNotFound) {
			return // sent, or the process has ended already
		}
		// envd did not take it: fall back to kill(1) in the sandbox.
	}
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	if name == "" {
		name = strconv.Itoa(int(sig))
	}
	_ = signalInSandbox(context.Background(), client, sb, name, pid)
}

// transcriptStream appends what is written to it as frames of one stream.
type transcriptStream struct {
	tw     *session.TranscriptWriter
	stream Stream
}

func (s transcriptStream) Write(p []byte) (int, error) {
	if err := s.tw.Append(s.stream, time.Now(), p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// startFilter takes the wrapper's start marker off the head of stderr and
// reports the pid in it; everything else passes through.
type startFilter struct {
	next    io.Writer
	onStart func(pid int)
	buf     []byte
	done    bool
}

func (f *startFilter) Write(p []byte) (int, error) {
	if f.done {
		return f.next.Write(p)
	}
	f.buf = append(f.buf, p...)
	n := min(len(f.buf), len(cubeStartMarker))
	if !bytes.Equal(f.buf[:n], []byte(cubeStartMarker[:n])) {
		// Not the wrapper speaking (never expected): pass it all on.
		f.done = true
		f.onStart(0)
		_, err := f.next.Write(f.buf)
		f.buf = nil
		return len(p), err
	}
	i := bytes.IndexByte(f.buf, '\n')
	if i < 0 {
		if len(f.buf) > 64 {
			f.done = true
			f.onStart(0)
		}
		return len(p), nil
	}
	// A terminal ends the line with \r\n.
	pid, _ := strconv.Atoi(strings.TrimSuffix(string(f.buf[len(cubeStartMarker):i]), "\r"))
	rest := f.buf[i+1:]
	f.buf, f.done = nil, true
	f.onStart(pid)
	if len(rest) > 0 {
		if _, err := f.next.Write(rest); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// cubeFreeze stops the command process groups of a cube World's running
// sessions inside the sandbox (one envd exec) for a consistent upper capture,
// and returns the function that resumes them. The VM snapshot itself is
// consistent on its own; the host-mounted upper is what needs the pause.
func (e *Runtime) cubeFreeze(ctx context.Context, w *World) func() {
	ss, _ := ListSessions(e.Paths.World(w.Name))
	pids := runningGuestPIDs(ss)
	if len(pids) == 0 || w.State != StateReady {
		return func() {}
	}
	client, err := e.cubeClient()
	if err != nil {
		return func() {}
	}
	sb := e.cubeSandbox(w)
	signal := func(sig string) error { return signalInSandbox(ctx, client, sb, sig, pids...) }
	if err := signal("STOP"); err != nil {
		e.Log.Warn("pause cube sessions for a snapshot", "world", w.Name, "err", err)
		return func() {}
	}
	return func() {
		if err := signal("CONT"); err != nil {
			e.Log.Error("resume cube sessions after a snapshot", "world", w.Name, "err", err)
		}
	}
}

// cubeTerminal is a cube session's terminal: input and size changes go to
// the command's PTY through envd, by its pid in the sandbox.
type cubeTerminal struct {
	client *cube.Client
	sb     *cube.Sandbox
	pid    atomic.Int64
	// inputs counts the inputs sent, so the attention watch can tell that
	// the command was given something to read.
	inputs atomic.Int64
}

func (t *cubeTerminal) Input(data []byte) error {
	pid := int(t.pid.Load())
	if pid <= 0 {
		return errors.New("the command has not started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.inputs.Add(1)
	return t.client.SendInput(ctx, t.sb, pid, data)
}

func (t *cubeTerminal) Resize(ws WinSize) error {
	pid := int(t.pid.Load())
	if pid <= 0 {
		return errors.New("the command has not started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return t.client.ResizePTY(ctx, t.sb, pid, cube.PTYSize{Rows: ws.Rows, Cols: ws.Cols})
}

// cubeWaitingScript tells, inside the sandbox, whether a process of the
// foreground process group of the terminal of process $1 is blocked reading
// that terminal: a read-family syscall on it, or a poll-family one with it
// as stdin (the numbers of the guest's architecture, from uname -m). It
// prints "waiting" or "busy". Only shell builtins run per process, so
// scanning /proc costs no forks.
var cubeWaitingScript = `p=$1
case $(uname -m) in
x86_64) reads=" ` + joinInts(session.ReadSyscalls["amd64"]) + ` " polls=" ` + joinInts(session.PollSyscalls["amd64"]) + ` " ;;
aarch64 | arm64) reads=" ` + joinInts(session.ReadSyscalls["arm64"]) + ` " polls=" ` + joinInts(session.PollSyscalls["arm64"]) + ` " ;;
*) echo busy; exit 0 ;;
esac
{ read -r st < /proc/$p/stat; } 2>/dev/null || exit 1
set -- ${st##*") "}
fg=$6
tty=
for fd in 0 1 2; do
	t=$(readlink /proc/$p/fd/$fd 2>/dev/null) || continue
	case $t in /dev/pts/*) tty=$t; break;; esac
done
[ -n "$tty" ] && [ "$fg" -gt 0 ] 2>/dev/null || { echo busy; exit 0; }
for d in /proc/[0-9]*; do
	{ read -r st < $d/stat; } 2>/dev/null || continue
	set -- ${st##*") "}
	[ "$1" = S ] && [ "$3" = "$fg" ] || continue
	{ read -r nr a0 rest < $d/syscall; } 2>/dev/null || continue
	case $reads in *" $nr "*)
		[ "$(readlink $d/fd/$((a0)) 2>/dev/null)" = "$tty" ] && { echo waiting; exit 0; };;
	esac
	case $polls in *" $nr "*)
		[ "$(readlink $d/fd/0 2>/dev/null)" = "$tty" ] && { echo waiting; exit 0; };;
	esac
done
echo busy`

// watchCubeAttention reports, for a cube PTY session, when its command
// starts or stops waiting for input: once the terminal has been quiet for
// session.QuietBeforeWaiting, one envd exec runs cubeWaitingScript. A command found
// waiting is not asked again until it prints or is given input; one found
// busy is asked again after a growing pause (1 s up to 30 s), so a quiet
// long job costs few calls.
func watchCubeAttention(client *cube.Client, sb *cube.Sandbox, pid int, pty *session.PTYServer, term *cubeTerminal, out chan<- Attention, stop <-chan struct{}) {
	tick := time.NewTicker(session.AttentionInterval)
	defer tick.Stop()
	report := func(att Attention) {
		select {
		case out <- att:
		case <-stop:
		}
	}
	var (
		current   = AttentionRunning
		seenOut   int64
		seenIn    int64
		next      time.Time
		backoff   time.Duration
		knownIdle bool // found waiting; nothing new since
	)
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		lastOut, inputs := pty.LastOutput(), term.inputs.Load()
		if lastOut != seenOut || inputs != seenIn {
			seenOut, seenIn, backoff, next, knownIdle = lastOut, inputs, 0, time.Time{}, false
		}
		if time.Since(time.Unix(0, lastOut)) < session.QuietBeforeWaiting {
			if current != AttentionRunning {
				current = AttentionRunning
				report(current)
			}
			continue
		}
		if knownIdle || time.Now().Before(next) {
			continue
		}
		out, err := guestScript(context.Background(), client, sb, 10*time.Second, cubeWaitingScript, strconv.Itoa(pid))
		if err != nil {
			// The command is gone, or the sandbox does not answer: the
			// session's end will say which.
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			next = time.Now().Add(backoff)
			continue
		}
		att := AttentionRunning
		if strings.TrimSpace(out) == "waiting" {
			att, knownIdle = AttentionWaiting, true
		} else {
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			next = time.Now().Add(backoff)
		}
		if att != current {
			current = att
			report(current)
		}
	}
}

func joinInts(nrs []int) string {
	s := make([]string, len(nrs))
	for i, n := range nrs {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}

// cubeUsageScript sums, in the sandbox, the CPU time (clock ticks, children
// reaped included), resident memory (bytes) and number of the processes
// whose process group or session is one of its arguments: a cube session's
// command leads its group (and, on a terminal, its session), so this is the
// session's processes. Only builtins run per process.
const cubeUsageScript = `ids=" $* "
page=$(getconf PAGESIZE 2>/dev/null) || page=4096
t=0 m=0 n=0
for d in /proc/[0-9]*; do
	{ read -r st < $d/stat; } 2>/dev/null || continue
	set -- ${st##*") "}
	case $ids in *" $3 "* | *" $4 "*) ;; *) continue ;; esac
	t=$((t + ${12} + ${13} + ${14} + ${15})) m=$((m + ${22} * page)) n=$((n + 1))
done
echo "$t $m $n"`

// cubeUsage fills in r's processes, CPU time and memory from the sandbox of
// a cube World with running sessions. A sandbox that does not answer leaves
// them at zero (and is logged): a sample is not worth an error.
func (e *Runtime) cubeUsage(ctx context.Context, w *World, ss []SessionMeta, r *Resources) {
	pids := runningGuestPIDs(ss)
	if len(pids) == 0 || w.State != StateReady || w.Cube == nil {
		return
	}
	client, err := e.cubeClient()
	if err != nil {
		return
	}
	groups := make([]string, len(pids))
	for i, p := range pids {
		groups[i] = strconv.Itoa(p)
	}
	out, err := guestScript(ctx, client, e.cubeSandbox(w), 10*time.Second, cubeUsageScript, groups...)
	var ticks, mem int64
	var procs int
	if err == nil {
		_, err = fmt.Sscan(out, &ticks, &mem, &procs)
	}
	if err != nil {
		e.Log.Warn("sample a cube World's processes", "world", w.Name, "err", err)
		return
	}
	r.Processes, r.CPUSeconds, r.MemoryBytes = procs, float64(ticks)/userHZ, mem
}

// runningGuestPIDs lists the sandbox pids of the commands of a cube World's
// running sessions.
func runningGuestPIDs(ss []SessionMeta) []int {
	var pids []int
	for _, s := range ss {
		if (s.State == SessionRunning || s.State == SessionStarting) && s.GuestPID > 0 {
			pids = append(pids, s.GuestPID)
		}
	}
	return pids
}

// cubeReviveTimeout bounds the envd calls of one re-attach check.
const cubeReviveTimeout = 15 * time.Second

// reviveCubeSession looks again at a cube session that reads as lost (its
// runner is gone: killed, or this machine rebooted). Its command may still
// run in the sandbox: if envd's Process.List has it (the recorded pid with
// the session's tag), a new runner re-attaches to it through
// Process.Connect and the session runs on, its transcript noting the gap.
// If the sandbox answers without it, the session is recorded as lost for
// good; if the sandbox does not answer, it stays lost for now and the next
// look asks again.
func (e *Runtime) reviveCubeSession(ctx context.Context, name string, s SessionMeta) SessionMeta {
	// A lost session with an end recorded was looked at already.
	if s.State != SessionLost || !s.EndedAt.IsZero() || s.GuestPID <= 0 {
		return s
	}
	dir := e.h.SessionDir(name, s.ID)
	lctx, cancel := context.WithTimeout(ctx, cubeReviveTimeout)
	defer cancel()
	// One strata at a time: a second one waits and finds the session
	// running again (or recorded lost).
	lock, err := world.LockFile(lctx, filepath.Join(dir, "revive.lock"))
	if err != nil {
		return s
	}
	defer lock.Unlock()
	cur, err := ReadSessionMeta(dir)
	if err != nil {
		return s
	}
	if cur.State != SessionLost || !cur.EndedAt.IsZero() {
		return cur
	}
	gone := func(why string) SessionMeta {
		cur.Error = fmt.Sprintf("session lost: its runner (pid %d) ended without recording an exit status, and %s", cur.InitPID, why)
		cur.EndedAt = time.Now()
		if err := session.WriteMetaPath(dir, cur); err != nil {
			e.Log.Warn("record a lost cube session", "world", name, "session", cur.ID, "err", err)
		}
		e.h.SessionEnded(ctx, name, cur.ID, map[string]any{"state": string(SessionLost), "error": cur.Error})
		return cur
	}
	unknown := func(err error) SessionMeta {
		cur.Error = fmt.Sprintf("session lost for now: its runner (pid %d) ended, and strata could not ask the sandbox whether process %d still runs (%v); it asks again the next time it looks (strata sessions %s)", cur.InitPID, cur.GuestPID, err, name)
		return cur
	}
	w, err := e.h.World(name)
	if err != nil {
		return unknown(err)
	}
	sb := e.cubeSandbox(w)
	if sb == nil || sb.SandboxID == "" {
		return gone("the World has no sandbox any more")
	}
	if w.State != StateReady {
		// Asking envd would resume a paused sandbox just to look.
		return unknown(fmt.Errorf("world %s is %s (strata up %s brings it back)", name, w.State, name))
	}
	client, err := e.cubeClient()
	if err != nil {
		return unknown(err)
	}
	procs, err := client.ListProcesses(lctx, sb)
	if errors.Is(err, cube.ErrNotFound) {
		return gone(fmt.Sprintf("its sandbox %s is gone", sb.SandboxID))
	}
	if err != nil {
		return unknown(err)
	}
	tag := cubeSessionTag(cur.ID)
	if !slices.ContainsFunc(procs, func(p cube.ProcessInfo) bool {
		return p.PID == cur.GuestPID && (p.Tag == tag || p.Tag == "")
	}) {
		return gone(fmt.Sprintf("process %d is no longer running in sandbox %s", cur.GuestPID, sb.SandboxID))
	}
	cfg, err := e.cubeClientConfig()
	if err != nil {
		return unknown(err)
	}
	exe := e.exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return unknown(err)
		}
	}
	meta := cur
	meta.State, meta.Attention, meta.ExitCode, meta.Error, meta.EndedAt = SessionRunning, AttentionRunning, 0, "", time.Time{}
	spec := cubeRunnerSpec{
		Dir: dir, Meta: meta, Sandbox: *sb,
		Client:    cubeClientSpec{Endpoint: cfg.Endpoint, APIKey: cfg.APIKey, AuthHeader: cfg.AuthHeader, ProxyAddr: cfg.ProxyAddr, Scheme: cfg.Scheme},
		AttachPID: cur.GuestPID, LostRunner: cur.InitPID, KillGrace: CubeKillGrace,
	}
	if cur.TTY {
		spec.Request.PTY = &cube.PTYSize{Rows: 24, Cols: 80}
	}
	started, err := startCubeRunner(lctx, exe, spec)
	if err != nil {
		return unknown(err)
	}
	e.Log.Info("re-attached a cube session after its runner died", "world", name, "session", cur.ID, "pid", cur.GuestPID, "sandbox", sb.SandboxID, "runner", started.InitPID)
	e.h.SessionStarted(ctx, name, cur.ID, map[string]any{"reattached": true, "backend": string(RuntimeCube), "sandbox": sb.SandboxID, "pid": cur.GuestPID})
	return started
}
