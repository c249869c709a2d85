package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/cgroup"
	"github.com/stratahq/strata/engine/events"
	"github.com/stratahq/strata/engine/sandbox"
	"github.com/stratahq/strata/engine/session"

	"github.com/stratahq/strata/overlay/mount"
)

// Descriptors the caller hands the init (see startInit).
const (
	initSpecFD  = 3
	initReadyFD = 4
	initStdinFD = 5
)

// SessionInitMain is the session's init: strata re-executed as PID 1 of the
// session's namespaces. It sets up the World's mounts, starts the command with
// reduced capabilities, records its output in the transcript and its end in
// meta.json, then exits (which ends whatever the command left behind). args are the
// arguments after SessionInitArg: the session dir. It returns the process exit code.
func SessionInitMain(args []string) int {
	if len(args) > 0 && args[0] == SessionInitArg {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "usage: strata %s SESSION_DIR (started by strata itself)\n", SessionInitArg)
		return 2
	}
	in := &sessionInit{dir: args[0], cgroupFD: -1}
	if err := in.run(); err != nil {
		fmt.Fprintf(os.Stderr, "session init %s: %v\n", in.dir, err)
		return 1
	}
	return 0
}

type sessionInit struct {
	dir   string
	spec  initSpec
	root  *os.Root
	ready io.WriteCloser
	// stdin is the command's stdin handed over by the caller (HasStdin).
	stdin *os.File
	// res is the World's resident init when this session runs in it
	// (resident_linux.go); nil for a session with an init of its own.
	res *residentInit
	// cgroupFD is the session's cgroup, for a session of a resident init:
	// the command is born in it (clone3) and its end kills what is left.
	cgroupFD int
	// status is where a resident init's reaper reports the command's end.
	status <-chan unix.WaitStatus
	// proxyPort is the egress bridge's port (network proxy).
	proxyPort int
	// endOnce tells a resident init the session is over, once.
	endOnce sync.Once
	// endFIFO is closed once the session's end is in meta.json.
	endFIFO *os.File

	mu   sync.Mutex
	meta SessionMeta

	transcript *session.TranscriptWriter
	pty        *session.PTYServer
	// watch records bases and provenance from the World's upper; nil when the
	// session has no World to watch or the watcher could not start.
	watch    *upperWatcher
	activity *os.File
	// egress is the World's egress dir, opened before the state root is
	// hidden, for the bridge of a proxied session (network_linux.go).
	egress *os.File
}

func (in *sessionInit) run() error {
	// Never let these reach the command.
	for _, fd := range []int{initSpecFD, initReadyFD, initStdinFD} {
		unix.CloseOnExec(fd)
	}
	in.ready = os.NewFile(initReadyFD, "ready")
	in.stdin = os.NewFile(initStdinFD, "stdin")
	specFile := os.NewFile(initSpecFD, "spec")
	err := json.NewDecoder(specFile).Decode(&in.spec)
	specFile.Close()
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	// Only what the caller meant to hand over stays open: a descriptor its
	// process leaked to it (one without close-on-exec: a harness's pipe, a
	// terminal) would be held for the session's whole life, keeping the
	// pipe's reader waiting for an EOF that comes with the session's end.
	keep := []int{initSpecFD, initReadyFD}
	if in.spec.HasStdin {
		keep = append(keep, initStdinFD)
	}
	sandbox.CloseInherited(keep)
	if in.spec.Build != "" && in.spec.Build != BuildStamp() && in.spec.Strata != "" {
		// strata-init of another build than the strata that started it: the
		// spec it was handed may mean something else to it. strata itself
		// runs the session instead, in these same namespaces.
		exe := in.spec.Strata
		fmt.Fprintf(os.Stderr, "session init: %s is not from the build of %s: the session runs with %s as its init (reinstall both, or remove %s)\n",
			os.Args[0], exe, exe, os.Args[0])
		in.spec.Build, in.spec.Strata = "", ""
		data, err := json.Marshal(in.spec)
		if err != nil {
			return fmt.Errorf("hand the session to %s: %w", exe, err)
		}
		return fmt.Errorf("hand the session to %s: %w", exe, reexecAs(exe, in.dir, data, in.spec.HasStdin))
	}
	session.EnableInitTrace(in.spec.Trace)
	// Keep the command (root, but without CAP_SYS_PTRACE) out of /proc/1: the init's
	// fds lead to the hidden state root.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set non-dumpable: %w", err)
	}
	// The session dir is reached through a detached copy of its mount: strict
	// isolation makes every mount in the namespace read-only, and files open for
	// writing on a mount would make that fail.
	sessionMount, err := unix.OpenTree(unix.AT_FDCWD, in.dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone session dir mount: %w", err)
	}
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(sessionMount))
	unix.Close(sessionMount)
	if err != nil {
		return fmt.Errorf("open session dir: %w", err)
	}
	in.root = root
	// Held until the end is recorded: waiters see it closed (see endWatch).
	if in.endFIFO, err = root.OpenFile(session.EndFIFO, os.O_RDWR|unix.O_NONBLOCK, 0); err != nil {
		return fmt.Errorf("open %s: %w", session.EndFIFO, err)
	}
	spec := in.spec
	in.meta = SessionMeta{
		ID: spec.ID, World: spec.World, Argv: spec.Argv, Env: RedactEnv(spec.Env, spec.EnvRedact),
		Source: spec.Source, Cwd: spec.Cwd, TTY: spec.TTY, Runtime: RuntimeLocal, Isolation: spec.Isolation, NoNetwork: spec.NoNetwork,
		StartedAt: time.Now(), State: SessionStarting, Attention: AttentionRunning, Network: spec.Network,
	}
	// /proc is still the host's: learn our host pid and start time before the
	// session gets its own /proc.
	hostProc, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return in.startFailed(1, fmt.Errorf("open /proc: %w", err))
	}
	defer unix.Close(hostProc)
	if self, err := os.Readlink("/proc/self"); err == nil {
		in.meta.InitPID, _ = strconv.Atoi(self)
		if st, err := session.ReadProcStat(in.meta.InitPID); err == nil {
			in.meta.InitStartTime = st.StartTime
		}
	}

	tf, ln, err := in.openOutput()
	if err != nil {
		return err
	}
	defer tf.Close()
	session.Trace("init: session dir, fifo, /proc, transcript opened")
	in.prepareEvidence()
	session.Trace("init: evidence prepared (cgroup, watch, activity)")
	if err := in.openEgress(&spec.SessionSpec); err != nil { // before the state root is hidden
		return in.startFailed(1, err)
	}
	if spec.Boundary != nil {
		err = setupSandboxMounts(&spec.SessionSpec)
	} else {
		err = setupSessionMounts(&spec.SessionSpec)
	}
	if err != nil {
		return in.startFailed(1, err)
	}
	session.Trace("init: mounts set up")
	hostname := spec.World
	if hostname == "" {
		hostname = "strata"
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return in.startFailed(1, fmt.Errorf("set hostname: %w", err))
	}
	if err := in.setupNetwork(&spec.SessionSpec); err != nil {
		return in.startFailed(1, err)
	}
	session.Trace("init: hostname, network set up")
	if err := unix.Chdir("/"); err != nil {
		return in.startFailed(1, err)
	}
	in.spec = spec // with what the network setup added (the proxy's variables)
	return in.runSession(hostProc, tf, ln)
}

// runSession starts the command of a session whose view is set up (by this
// init, or by the World's resident init), records its output and its end.
func (in *sessionInit) runSession(hostProc int, tf *os.File, ln *net.UnixListener) error {
	spec := in.spec
	var err error
	// The command's stdio.
	files := make([]*os.File, 3)
	var pumps sync.WaitGroup
	var slave *os.File
	if spec.TTY {
		master, s, slavePath, err := session.OpenPTY(WinSize{Rows: spec.Rows, Cols: spec.Cols})
		if err != nil {
			return in.startFailed(1, err)
		}
		slave = s
		files[0], files[1], files[2] = slave, slave, slave
		in.pty = session.NewPTYServer(master, slavePath, in.transcript, ln)
		_ = in.transcript.AppendResize(time.Now(), WinSize{Rows: spec.Rows, Cols: spec.Cols})
	} else {
		if spec.HasStdin {
			files[0] = in.stdin
		} else if files[0], err = os.Open(os.DevNull); err != nil {
			return in.startFailed(1, err)
		}
		for i, stream := range []Stream{StreamStdout, StreamStderr} {
			r, w, err := os.Pipe()
			if err != nil {
				return in.startFailed(1, err)
			}
			files[i+1] = w
			pumps.Go(func() { in.pumpPipe(r, stream) })
		}
	}

	// The command inherits 0, 1 and 2 and nothing else, at every level: not
	// an fd the caller had open (a host dir on fd 7 leads out of every
	// mount), not the init's transcript, control or attach fds.
	if err := sandbox.CloseOnExecFrom(3); err != nil {
		for _, f := range files {
			f.Close()
		}
		pumps.Wait()
		return in.startFailed(1, err)
	}
	session.Trace("init: stdio, fds closed")
	proc, startErr := in.start(spec.SessionSpec, files)
	session.Trace("init: command started")
	for _, f := range files {
		f.Close()
	}
	if startErr == nil && in.watch != nil {
		// Events since the upper root's watch was added are queued in the
		// kernel; the walk that watches deeper dirs runs off the start path.
		in.watch.start()
	}
	if startErr != nil {
		var se *startError
		code := 1
		if errors.As(startErr, &se) {
			code = se.code
		}
		if in.pty != nil {
			in.pty.Abort()
			_ = in.root.Remove(AttachSocket)
		}
		pumps.Wait()
		return in.startFailed(code, startErr)
	}

	in.mu.Lock()
	in.meta.PID = hostPIDOf(hostProc, proc.Pid)
	if in.res != nil {
		// Its reaper waits for it by pid: the pidfd os.StartProcess
		// keeps would stay open for the resident init's whole life.
		_ = proc.Release()
	}
	session.Trace("init: host pid read")
	in.meta.StartedAt = time.Now()
	in.meta.State = SessionRunning
	meta := in.meta
	in.mu.Unlock()
	if err := session.WriteMeta(in.root, meta); err != nil {
		return err
	}
	session.Trace("init: running meta written")
	// session.started goes to the activity log from here, before the caller
	// hears of the start and before this init can log the end: a short
	// command's session.ended never comes first.
	in.logStart(meta)
	_ = json.NewEncoder(in.ready).Encode(session.ReadyMessage{Meta: meta})
	_ = in.ready.Close()
	session.Trace("init: running meta written, ready sent")

	if in.pty != nil {
		pumps.Go(in.pty.Pump)
		go in.pty.Serve()
	}
	var status <-chan unix.WaitStatus
	if in.res != nil {
		status = in.status
	} else {
		stopSignals := forwardSignals(proc.Pid)
		defer stopSignals()
		ch := make(chan unix.WaitStatus, 1)
		go reap(proc.Pid, ch)
		status = ch
	}
	stopAttention := make(chan struct{})
	if in.pty != nil {
		go in.watchAttention(stopAttention)
	}

	ws := <-status
	session.Trace("init: command exited")
	close(stopAttention)
	endedAt := time.Now()
	// Output normally ends with the command; a background process still holding
	// the pipes or the terminal is ended with the session.
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(20 * time.Millisecond):
		in.killLeftovers()
		select {
		case <-drained:
		case <-time.After(2 * time.Second):
		}
	}
	if in.res != nil {
		// What the session left running without its output (a daemon on
		// /dev/null) ends with it, as a pid namespace's end would end it.
		in.killLeftovers()
	}
	if in.pty != nil {
		in.pty.Finish(2 * time.Second)
		in.pty.CloseMaster()
		_ = in.root.Remove(AttachSocket)
	}
	session.Trace("init: output drained")
	written := -1
	if in.watch != nil {
		// Nothing of the session writes any more: what the watcher still has
		// queued or missed is recorded before the end is.
		written = in.watch.finish()
	}
	session.Trace("init: watch finished")

	in.mu.Lock()
	in.meta.EndedAt = endedAt
	switch {
	case ws.Signaled():
		in.meta.ExitCode = 128 + int(ws.Signal())
		in.meta.Signal = unix.SignalName(ws.Signal())
		in.meta.State, in.meta.Attention = SessionKilled, AttentionFailed
	case ws.ExitStatus() == 0:
		in.meta.State, in.meta.Attention = SessionExited, AttentionDone
	default:
		in.meta.ExitCode = ws.ExitStatus()
		in.meta.State, in.meta.Attention = SessionFailed, AttentionFailed
	}
	meta = in.meta
	in.mu.Unlock()
	if in.res != nil {
		// Nothing of the session runs or writes any more: for the resident
		// init it is over, before anyone is told it ended (meta.json, the
		// end fifo), so that the caller's next session, asked for as soon
		// as it knows, gets fresh private dirs (made just after the end is
		// told, or by that request if it comes first).
		in.endOnce.Do(in.res.sessionEnded)
	}
	// Written, then announced, then made durable: the waiting caller has the
	// exit status without waiting for two fsyncs. A power loss in the
	// millisecond between may lose the end (the session reads as lost, or
	// as broken where the file system kept the rename but not the data).
	if err := session.WriteMetaSync(in.root, meta, false); err != nil {
		return err
	}
	session.Trace("init: end meta written")
	// session.ended is in the activity log (one write) before the caller
	// is told: `strata exec ... && strata events` sees the end.
	in.logEnd(meta, written)
	in.endFIFO.Close()
	if in.res != nil {
		in.res.renewAfterEnd()
	}
	syncSessionEnd(in.root, tf)
	session.Trace("init: transcript and end meta synced")
	in.removeEmptyLog()
	session.Trace("init: end logged")
	return nil
}

// openOutput opens the session's transcript (in.transcript writes it) and,
// for a terminal, its attach socket; an error is the session's start
// failure, recorded.
func (in *sessionInit) openOutput() (*os.File, *net.UnixListener, error) {
	tf, err := in.root.OpenFile(TranscriptFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, in.startFailed(1, fmt.Errorf("open transcript: %w", err))
	}
	if in.transcript, err = session.NewTranscriptWriter(tf); err != nil {
		tf.Close()
		return nil, nil, in.startFailed(1, err)
	}
	var ln *net.UnixListener
	if in.spec.TTY {
		if ln, err = session.ListenAttach(in.dir); err != nil {
			tf.Close()
			return nil, nil, in.startFailed(1, err)
		}
	}
	return tf, ln, nil
}

// prepareEvidence runs before the init hides the state root: it places the
// init in the session's cgroup (if the caller could not start it there) and
// opens what the watcher and the activity log need. None of it is allowed to
// keep the command from running; failures go to init.log.
func (in *sessionInit) prepareEvidence() {
	spec := in.spec
	if spec.Cgroup != "" && !spec.CgroupPlaced {
		if err := cgroup.Join(spec.Cgroup); err != nil {
			fmt.Fprintf(os.Stderr, "join cgroup %s: %v (resources come from /proc)\n", spec.Cgroup, err)
		}
	}
	if spec.Watch != nil {
		w, err := openUpperWatch(*spec.Watch, spec.ID)
		if err != nil {
			fmt.Fprintf(os.Stderr, "no bases or provenance for this session: %v\n", err)
		} else {
			in.watch = w
		}
	}
	if spec.ActivityLog != "" {
		// A detached clone of the log file: strict isolation's read-only remount
		// must not meet a file open for writing on the host's mount.
		if f, err := os.OpenFile(spec.ActivityLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			f.Close()
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, spec.ActivityLog, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err == nil {
			in.activity, err = os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_WRONLY|os.O_APPEND, 0)
			unix.Close(fd)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "activity log %s: %v\n", spec.ActivityLog, err)
		}
	}
}

// logStart appends session.started to the activity log, one write(2).
func (in *sessionInit) logStart(meta SessionMeta) {
	if in.activity == nil {
		return
	}
	detail := map[string]any{"argv": in.spec.Argv, "tty": in.spec.TTY}
	line, err := events.Line(events.Event{Time: meta.StartedAt.UTC(), Type: events.SessionStarted, World: meta.World, Session: meta.ID, Detail: detail})
	if err == nil {
		_, _ = in.activity.Write(line)
	}
}

// logEnd appends session.ended to the activity log, one write(2).
func (in *sessionInit) logEnd(meta SessionMeta, written int) {
	if in.activity == nil {
		return
	}
	defer in.activity.Close()
	detail := map[string]any{"state": string(meta.State), "exit_code": meta.ExitCode, "duration": meta.Duration().Round(time.Millisecond).String()}
	if meta.Signal != "" {
		detail["signal"] = meta.Signal
	}
	if written >= 0 {
		detail["paths_written"] = written
	}
	line, err := events.Line(events.Event{Time: meta.EndedAt.UTC(), Type: events.SessionEnded, World: meta.World, Session: meta.ID, Detail: detail})
	if err == nil {
		_, _ = in.activity.Write(line)
	}
}

// startFailed records that the command never ran, and tells the caller.
func (in *sessionInit) startFailed(code int, err error) error {
	in.mu.Lock()
	in.meta.State, in.meta.Attention = SessionFailed, AttentionFailed
	in.meta.ExitCode, in.meta.Error, in.meta.EndedAt = code, err.Error(), time.Now()
	meta := in.meta
	in.mu.Unlock()
	if in.root != nil {
		if werr := session.WriteMeta(in.root, meta); werr != nil {
			if in.res != nil {
				// The caller is told why, on the socket, as meta.json cannot.
				_ = json.NewEncoder(in.ready).Encode(session.ReadyMessage{Meta: meta})
				_ = in.ready.Close()
			}
			return errors.Join(err, werr)
		}
	}
	_ = json.NewEncoder(in.ready).Encode(session.ReadyMessage{Meta: meta})
	_ = in.ready.Close()
	if in.endFIFO != nil {
		in.endFIFO.Close()
	}
	if in.watch != nil {
		in.watch.close()
	}
	if in.activity != nil {
		in.activity.Close() // Exec logs no start for a command that did not run
	}
	in.removeEmptyLog()
	// A command that was not found is the command's failure, not the init's.
	return nil
}

func (in *sessionInit) removeEmptyLog() {
	if in.root == nil {
		return
	}
	if info, err := in.root.Stat(session.InitLogFile); err == nil && info.Size() == 0 {
		_ = in.root.Remove(session.InitLogFile)
	}
}

func (in *sessionInit) pumpPipe(r *os.File, stream Stream) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_ = in.transcript.Append(stream, time.Now(), buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// watchAttention records in meta.json when a PTY session starts or stops waiting
// for input; the file only changes when the attention does.
func (in *sessionInit) watchAttention(stop <-chan struct{}) {
	tick := time.NewTicker(session.AttentionInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		att := AttentionRunning
		if in.pty.WaitingForInput() {
			att = AttentionWaiting
		}
		in.mu.Lock()
		if in.meta.State != SessionRunning || in.meta.Attention == att {
			in.mu.Unlock()
			continue
		}
		in.meta.Attention = att
		meta := in.meta
		// Held while writing so an older attention can never overwrite the end.
		_ = session.WriteMeta(in.root, meta)
		in.mu.Unlock()
	}
}

// reap waits for every child (the init is PID 1: orphans of the session come to
// it) and reports the command's status.
func reap(pid int, status chan<- unix.WaitStatus) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: nothing left in the namespace
		}
		if got == pid {
			status <- ws
		}
	}
}

// forwardSignals passes the signals a caller may send the init on to the command's
// process group (a pid namespace's init ignores signals it has no handler for).
func forwardSignals(pid int) func() {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-ch:
				s := sig.(syscall.Signal)
				if unix.Kill(-pid, s) != nil {
					_ = unix.Kill(pid, s)
				}
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// hostPIDOf finds the host pid of a child given its pid in the session's pid
// namespace, through a pidfd whose fdinfo, read from the host's /proc, shows it.
func hostPIDOf(hostProc, pid int) int {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(pidfd)
	fd, err := unix.Openat(hostProc, "self/fdinfo/"+strconv.Itoa(pidfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	f := os.NewFile(uintptr(fd), "fdinfo")
	defer f.Close()
	v, ok := readFirstLineWithPrefix(f, "Pid:")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(v)
	return n
}

// startError carries the exit code a shell would give for a command that could not
// be started: 127 not found, 126 not executable.
type startError struct {
	code int
	err  error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// startCommand starts the command with files as its stdio, on a thread that first
// drops capabilities and sets no_new_privs; that thread is never reused, so the init
// keeps its own capabilities.
func startCommand(spec SessionSpec, files []*os.File, cgroupFD int, dropped *droppedThread) (*os.Process, error) {
	path, err := lookCommand(spec.Argv[0], spec.Env, spec.Cwd)
	if err != nil {
		return nil, err
	}
	session.Trace("init: command found in PATH")
	attr := &os.ProcAttr{
		Dir:   spec.Cwd,
		Env:   spec.Env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	if spec.TTY {
		attr.Sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	if cgroupFD >= 0 {
		// Born in the session's cgroup (clone3), not the resident init's.
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, cgroupFD
	}
	type result struct {
		proc *os.Process
		err  error
	}
	done := make(chan result, 1)
	if dropped != nil {
		// A resident init's thread that dropped them once, for every session.
		dropped.do(func() {
			proc, err := os.StartProcess(path, spec.Argv, attr)
			done <- result{proc, err}
		})
	} else {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			if spec.Boundary != nil && !spec.CgroupPlaced {
				// The init joined its cgroup after the clone: the command's
				// thread roots a cgroup namespace there (it is per thread).
				if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
					fmt.Fprintf(os.Stderr, "cgroup namespace: %v (the cgroupfs stays read-only)\n", err)
				}
			}
			if err := dropCapabilities(); err != nil {
				done <- result{err: err}
				return
			}
			session.Trace("init: capabilities dropped")
			proc, err := os.StartProcess(path, spec.Argv, attr)
			done <- result{proc, err}
		}()
	}
	r := <-done
	if r.err != nil {
		var pe *os.PathError
		if errors.As(r.err, &pe) && pe.Op == "chdir" {
			return nil, &startError{code: 1, err: fmt.Errorf("cwd %s: %w", spec.Cwd, pe.Err)}
		}
		code := 126
		if errors.Is(r.err, os.ErrNotExist) {
			code = 127
		}
		return nil, &startError{code: code, err: fmt.Errorf("exec: %s: %w", spec.Argv[0], unwrapPathError(r.err))}
	}
	return r.proc, nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// lookCommand resolves argv[0] the way a shell would, with the command's PATH.
func lookCommand(name string, env []string, cwd string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if err := checkExecutable(p); err != nil {
			code := 126
			if errors.Is(err, os.ErrNotExist) {
				code = 127
			}
			return "", &startError{code: code, err: fmt.Errorf("exec: %s: %w", name, unwrapPathError(err))}
		}
		return p, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	var denied error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, name)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, os.ErrNotExist) && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", &startError{code: 126, err: fmt.Errorf("exec: %s: %w", name, unwrapPathError(denied))}
	}
	return "", &startError{code: 127, err: fmt.Errorf("exec: %s: not found", name)}
}

func checkExecutable(p string) error {
	info, err := os.Stat(p)
	if err != nil {
		return err
	}
	if info.IsDir() {
		return &os.PathError{Op: "exec", Path: p, Err: unix.EISDIR}
	}
	if info.Mode()&0o111 == 0 {
		return &os.PathError{Op: "exec", Path: p, Err: os.ErrPermission}
	}
	return nil
}

// setupSandboxMounts builds the command's view for the sandbox and strict
// levels: the boundary's mount plan (engine/sandbox.Plan), then the spec's
// binds (attached after the plan's private /tmp and /run, so a bind under
// /run/strata survives them).
func setupSandboxMounts(spec *SessionSpec) error {
	if fi, err := os.Stat(spec.Source); errors.Is(err, os.ErrNotExist) || err == nil && !fi.IsDir() {
		return fmt.Errorf("bind the world over %s: the source no longer exists (moved or deleted?)", spec.Source)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if spec.Overlay != nil {
		if err := mount.Mount(context.Background(), *spec.Overlay); err != nil {
			return fmt.Errorf("mount the world's overlay in the session: %w", err)
		}
	}
	bindFDs := make([]int, len(spec.Binds))
	for i, b := range spec.Binds {
		fd, err := cloneTree(b.Source)
		if err != nil {
			return fmt.Errorf("bind %s: %w", b.Source, err)
		}
		defer unix.Close(fd)
		bindFDs[i] = fd
	}
	plan := sandbox.Plan(spec.Boundary, sandbox.Input{Merged: spec.Merged, HostDev: spec.HostDev, Rootless: os.Geteuid() != 0 || spec.Overlay != nil})
	if !spec.CgroupPlaced {
		// No cgroup namespace of the init's own (it joined its cgroup after
		// the clone, or has none): a fresh cgroup2 mount would show the
		// whole hierarchy, or be refused in a user namespace. The host's
		// cgroupfs stays, read-only like the rest of the host.
		plan = slices.DeleteFunc(plan, func(s sandbox.Step) bool { return s.Op == sandbox.OpCgroup })
	}
	if session.Tracing() {
		sandbox.StepDone = func(s sandbox.Step) { session.Trace("init: sandbox " + s.String()) }
		session.Trace("init: sandbox plan made")
	}
	if err := sandbox.Apply(plan); err != nil {
		return fmt.Errorf("%s isolation: %w", spec.Boundary.Level, err)
	}
	for i, b := range spec.Binds {
		if err := attachTree(bindFDs[i], b.Target, fdIsDir(bindFDs[i])); err != nil {
			return fmt.Errorf("bind %s at %s: %w", b.Source, b.Target, err)
		}
		attr := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		if b.ReadOnly {
			attr = &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, b.Target, unix.AT_RECURSIVE, attr); err != nil {
			return fmt.Errorf("bind %s at %s: set read-only=%v: %w", b.Source, b.Target, b.ReadOnly, err)
		}
	}
	return nil
}

// setupSessionMounts builds the command's view in the init's (new, private) mount
// namespace: the World over the source path, the state root hidden, a private /dev
// and /proc, and for strict isolation everything else read-only.
func setupSessionMounts(spec *SessionSpec) error {
	// Looked at while this namespace still sees the host's tree (a strict
	// session's private /tmp would hide a source under /tmp): a source moved
	// or deleted since the session was asked for must not come back as an
	// empty directory that attachTree makes on the host.
	if fi, err := os.Stat(spec.Source); errors.Is(err, os.ErrNotExist) || err == nil && !fi.IsDir() {
		return fmt.Errorf("bind the world over %s: the source no longer exists (moved or deleted?)", spec.Source)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if spec.Overlay != nil {
		// Rootless: this user namespace owns the mount namespace, so the
		// kernel overlay (with userxattr) can be mounted here, privately.
		if err := mount.Mount(context.Background(), *spec.Overlay); err != nil {
			return fmt.Errorf("mount the world's overlay in the session: %w", err)
		}
	}
	// Detached copies of everything bound in later: covering the state root, /dev
	// or /tmp must not cover what lies under them.
	world, err := cloneTree(spec.Merged)
	if err != nil {
		return fmt.Errorf("world view %s: %w", spec.Merged, err)
	}
	defer unix.Close(world)
	bindFDs := make([]int, len(spec.Binds))
	for i, b := range spec.Binds {
		if bindFDs[i], err = cloneTree(b.Source); err != nil {
			return fmt.Errorf("bind %s: %w", b.Source, err)
		}
		defer unix.Close(bindFDs[i])
	}
	var devNodes map[string]int
	if !spec.HostDev {
		devNodes = map[string]int{}
		for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
			fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err != nil {
				return fmt.Errorf("clone /dev/%s: %w", name, err)
			}
			defer unix.Close(fd)
			devNodes[name] = fd
		}
	}

	for _, dir := range append([]string{spec.StateRoot}, spec.HideDirs...) {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555"); err != nil {
			return fmt.Errorf("hide %s: %w", dir, err)
		}
	}
	if spec.Isolation == IsolationStrict {
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("make the host read-only: %w", err)
		}
		if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("private /tmp: %w", err)
		}
		if spec.HostDev && isMountPoint("/dev") {
			if err := unix.MountSetattr(unix.AT_FDCWD, "/dev", unix.AT_RECURSIVE, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return fmt.Errorf("keep /dev writable: %w", err)
			}
		}
	}
	if !spec.HostDev {
		if err := setupDev(devNodes); err != nil {
			return err
		}
	}
	if err := attachTree(world, spec.Source, true); err != nil {
		return fmt.Errorf("bind the world over %s: %w", spec.Source, err)
	}
	for i, b := range spec.Binds {
		if err := attachTree(bindFDs[i], b.Target, fdIsDir(bindFDs[i])); err != nil {
			return fmt.Errorf("bind %s at %s: %w", b.Source, b.Target, err)
		}
		attr := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		if b.ReadOnly {
			attr = &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, b.Target, unix.AT_RECURSIVE, attr); err != nil {
			return fmt.Errorf("bind %s at %s: set read-only=%v: %w", b.Source, b.Target, b.ReadOnly, err)
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// Host-wide knobs root could otherwise turn from inside (reboot via sysrq,
	// kernel sysctls), and the cgroupfs: even at tree a command must not
	// freeze or kill other Worlds' sessions or leave its own cgroup (a
	// snapshot's freeze would miss it).
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/sys/fs/cgroup"} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("protect %s: %w", p, err)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}); err != nil {
			return fmt.Errorf("protect %s: %w", p, err)
		}
	}
	return nil
}

func isMountPoint(p string) bool {
	var st, parent unix.Stat_t
	return unix.Stat(p, &st) == nil && unix.Stat(filepath.Dir(p), &parent) == nil && st.Dev != parent.Dev
}

// fdIsDir tells a cloned tree's root type; its path may be covered by now.
func fdIsDir(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

func cloneTree(path string) (int, error) {
	return unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
}

// attachTree mounts a detached tree at target, creating target where the host
// lacks it (under the private /tmp, say).
func attachTree(fd int, target string, dir bool) error {
	if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
		if dir {
			err = os.MkdirAll(target, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("create mount point: %w", err)
		}
	}
	return unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// setupDev gives the session a private /dev: the harmless character devices bound
// from the host, a devpts instance of its own (so its terminals are its own), and a
// private /dev/shm; no disks.
func setupDev(nodes map[string]int) error {
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("private /dev: %w", err)
	}
	for name, fd := range nodes {
		if err := attachTree(fd, "/dev/"+name, false); err != nil {
			return fmt.Errorf("/dev/%s: %w", name, err)
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("private /dev: %w", err)
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := unix.Mount("shm", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	for link, target := range map[string]string{
		"/dev/ptmx": "pts/ptmx", "/dev/fd": "/proc/self/fd",
		"/dev/stdin": "/proc/self/fd/0", "/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("private /dev: %w", err)
		}
	}
	return nil
}

// loopbackUp brings up lo in the session's own network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	return nil
}

// start starts the command: in a resident init, under its reaper's lock
// (the reaper must know the pid before the command can end) and in the
// session's cgroup.
func (in *sessionInit) start(spec SessionSpec, files []*os.File) (*os.Process, error) {
	if in.res == nil {
		return startCommand(spec, files, -1, nil)
	}
	proc, status, err := in.res.reaper.start(func() (*os.Process, error) {
		return startCommand(spec, files, in.cgroupFD, in.res.dropped)
	})
	in.status = status
	return proc, err
}

// killLeftovers ends what the session's command left behind: every other
// process of the pid namespace for an init of its own (PID 1), the
// session's cgroup in a resident init (whose pid namespace is the World's).
func (in *sessionInit) killLeftovers() {
	if in.res == nil {
		_ = unix.Kill(-1, unix.SIGKILL)
		return
	}
	killCgroup(in.cgroupFD)
}
