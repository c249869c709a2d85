package local

import (
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
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/sandbox"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay/mount"
)

// A World's resident init (docs/design.md, "Exec latency") is a session
// init that stays: it sets up the World's namespaces and view once, then
// starts each session's command itself, when a `strata exec` asks it over
// its socket. A session of it is one clone and one exec, where a session
// with an init of its own is a clone into six new namespaces, a second Go
// process start and the whole mount plan.
//
// What its sessions share, that sessions with an init of their own do not:
// the World's pid namespace (a command sees, and can signal, the other
// running sessions of its World, never another World's or the host's), its
// private /tmp, /run and /dev/shm, and its network namespace. Each session
// still has its own cgroup (r-*/<session>), frozen, counted and, at its end,
// killed on its own.

// ResidentInitArg is the first argument of a resident init:
// `strata-init __world-init <resident dir>`.
const ResidentInitArg = "__world-init"

// residentInit is the running resident init.
type residentInit struct {
	key   string
	attrs procAttrs // the starting strata's: the requests it serves have the same
	// sessionsHost is the World's sessions dir on the host; sessions the
	// same dir through a detached clone (the state root is hidden here).
	sessionsHost string
	sessions     string
	// cgroup is a clone of the init's cgroup dir (r-*): each session's
	// cgroup is made in it.
	cgroup   int
	hostProc int
	initPID  int
	initTime uint64
	// activity is the World's activity log, dup'ed for each session.
	activity *os.File
	// watch is what each session watches, through the init's clones.
	watch *SessionWatch
	// proxyPort is the egress bridge's port (network proxy), 0 without.
	proxyPort int
	egress    *os.File
	reaper    reaper
	// private are the tmpfs mounts sessions get fresh ones of (/tmp,
	// /var/tmp, /run, /dev/shm): renewed whenever no session runs.
	private []privateTmpfs
	// dropped starts every command: a thread with the commands'
	// capabilities and no_new_privs, made once.
	dropped *droppedThread
	// template is the spec the view was set up from: every session's but
	// its own part (residentSession).
	template SessionSpec
	sockIno  uint64
	dir      string
	pidFile  string

	handles  sync.WaitGroup // sessions accepted, until their handler returns
	mu       sync.Mutex
	ln       *net.UnixListener
	lock     int
	active   int
	retiring bool
	idleFor  time.Duration
	idle     *time.Timer
	done     chan struct{}
	doneOnce sync.Once
	// renewDue: the last session ended and the next one wants fresh
	// private dirs (renewIfDue).
	renewDue bool
	// mqueue is a detached mount of the World's message queues (-1: none).
	mqueue int
}

// residentRequest is what `strata exec` sends a resident init: the key of
// the view it expects and what of the session's spec is its own (its dir,
// fifo and meta.json already made; the rest is the view's, which the key
// covers); its stdin, if any, comes with it (SCM_RIGHTS).
type residentRequest struct {
	Key     string          `json:"key"`
	Session residentSession `json:"session"`
	// Attrs are the asking strata's process attributes, which its command
	// would inherit from an init of its own (procattrs_linux.go).
	Attrs procAttrs `json:"attrs"`
}

// residentSession is the part of a session's spec a resident init's
// template does not have.
type residentSession struct {
	ID        string   `json:"id"`
	Dir       string   `json:"dir"`
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	EnvRedact []string `json:"env_redact,omitempty"`
	Cwd       string   `json:"cwd"`
	TTY       bool     `json:"tty,omitempty"`
	Rows      uint16   `json:"rows,omitempty"`
	Cols      uint16   `json:"cols,omitempty"`
	HasStdin  bool     `json:"has_stdin,omitempty"`
	Trace     bool     `json:"trace,omitempty"`
}

// sessionOf is the resident's template with s's own part.
func (r *residentInit) sessionOf(s residentSession) initSpec {
	is := initSpec{SessionSpec: r.template, HasStdin: s.HasStdin}
	sp := &is.SessionSpec
	sp.ID, sp.Dir, sp.Argv, sp.Env, sp.EnvRedact, sp.Cwd = s.ID, s.Dir, s.Argv, s.Env, s.EnvRedact, s.Cwd
	sp.TTY, sp.Rows, sp.Cols, sp.Trace = s.TTY, s.Rows, s.Cols, s.Trace
	return is
}

// residentReply is a resident init's first answer to a request: accepted
// (the command may start from here: a ready message follows), or refused
// (nothing of the session was touched).
// refusedAttrs is the refusal of a request whose process attributes are
// not the resident init's: the session gets an init of its own, and the
// resident init stays for the World's other sessions.
const refusedAttrs = "other process attributes"

type residentReply struct {
	Accepted bool   `json:"accepted,omitempty"`
	Refused  string `json:"refused,omitempty"`
}

// residentReady is what a new resident init tells the strata that started
// it, once its view is set up and it listens (OK), or why it will not serve.
type residentReady struct {
	OK     bool   `json:"ok,omitempty"`
	Exists bool   `json:"exists,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Error  string `json:"error,omitempty"`
}

// ResidentInitMain is a World's resident init: started by strata in new
// namespaces and in a cgroup of its own (cgroup.PrepareResident), with the
// spec of the session that asked for it on fd 3 and a pipe to report its
// setup on fd 4. It returns the process exit code.
func ResidentInitMain(args []string) int {
	if len(args) > 0 && args[0] == ResidentInitArg {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "usage: strata %s RESIDENT_DIR (started by strata itself)\n", ResidentInitArg)
		return 2
	}
	for _, fd := range []int{initSpecFD, initReadyFD} {
		unix.CloseOnExec(fd)
	}
	ready := os.NewFile(initReadyFD, "ready")
	specFile := os.NewFile(initSpecFD, "spec")
	var spec residentSpec
	err := json.NewDecoder(specFile).Decode(&spec)
	specFile.Close()
	sandbox.CloseInherited([]int{initReadyFD})
	report := func(msg residentReady) {
		_ = json.NewEncoder(ready).Encode(msg)
		ready.Close()
	}
	if err != nil {
		report(residentReady{Error: "read spec: " + err.Error()})
		return 1
	}
	if spec.Build != "" && spec.Build != BuildStamp() {
		// Another build's strata-init: strata starts the session's own init.
		report(residentReady{Error: fmt.Sprintf("%s is not from the build of %s", os.Args[0], spec.Strata)})
		return 1
	}
	r, err := setupResident(&spec)
	if errors.Is(err, errResidentExists) {
		report(residentReady{Exists: true})
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "resident init %s: %v\n", args[0], err)
		report(residentReady{Error: err.Error()})
		return 1
	}
	report(residentReady{OK: true, PID: r.initPID})
	r.serve()
	return 0
}

// residentSpec is what a resident init is handed: the spec of the session
// that asked for it (its view is the World's for every session of the key)
// and its own part.
type residentSpec struct {
	initSpec
	Resident residentParams `json:"resident"`
}

type residentParams struct {
	Key string `json:"key"`
	// Dir is the World's resident dir (its socket, lock and pid files).
	Dir string `json:"dir"`
	// Cgroup is the init's cgroup dir (host path): it was born there, in a
	// cgroup namespace rooted there.
	Cgroup string        `json:"cgroup"`
	Idle   time.Duration `json:"idle"`
	// Attrs are the process attributes of the strata that started it,
	// which it and its commands inherit: it serves requests with the same.
	Attrs procAttrs `json:"attrs"`
}

var errResidentExists = errors.New("the World has a resident init")

func setupResident(rs *residentSpec) (*residentInit, error) {
	session.EnableInitTrace(rs.Trace)
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("set non-dumpable: %w", err)
	}
	spec := &rs.SessionSpec
	r := &residentInit{
		key: rs.Resident.Key, attrs: rs.Resident.Attrs, idleFor: rs.Resident.Idle, mqueue: -1, done: make(chan struct{}), lock: -1, cgroup: -1,
		sessionsHost: filepath.Dir(spec.Dir),
	}
	if r.idleFor <= 0 {
		r.idleFor = DefaultResidentIdle
	}
	// Its own dir: the lock that makes it the World's one resident init,
	// the socket and a pid file, all reached through a clone (the state
	// root is hidden below, and made read-only at strict).
	dirFD, err := unix.OpenTree(unix.AT_FDCWD, rs.Resident.Dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rs.Resident.Dir, err)
	}
	r.dir = "/proc/self/fd/" + strconv.Itoa(dirFD)
	if r.lock, err = unix.Open(r.dir+"/"+residentLock, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600); err != nil {
		return nil, fmt.Errorf("resident lock: %w", err)
	}
	if err := unix.Flock(r.lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errResidentExists
		}
		return nil, fmt.Errorf("resident lock: %w", err)
	}
	sock := r.dir + "/" + residentSocket
	_ = unix.Unlink(sock) // a crashed init's
	if r.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"}); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	r.ln.SetUnlinkOnClose(false)
	var st unix.Stat_t
	if err := unix.Stat(sock, &st); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	r.sockIno = st.Ino
	_ = unix.Chmod(sock, 0o600)

	sessFD, err := unix.OpenTree(unix.AT_FDCWD, r.sessionsHost, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("open sessions dir: %w", err)
	}
	r.sessions = "/proc/self/fd/" + strconv.Itoa(sessFD)
	// Its cgroup: the init moves to r-*/init, and r-* hands its
	// controllers down to the sessions' cgroups.
	if r.cgroup, err = unix.OpenTree(unix.AT_FDCWD, rs.Resident.Cgroup, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", rs.Resident.Cgroup, err)
	}
	cg := "/proc/self/fd/" + strconv.Itoa(r.cgroup)
	if err := unix.Mkdirat(r.cgroup, "init", 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if err := os.WriteFile(cg+"/init/cgroup.procs", []byte("0"), 0); err != nil {
		return nil, fmt.Errorf("cgroup: join %s/init: %w", rs.Resident.Cgroup, err)
	}
	for _, c := range []string{"+cpu", "+memory", "+pids"} {
		_ = os.WriteFile(cg+"/cgroup.subtree_control", []byte(c), 0)
	}

	if r.hostProc, err = unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	if self, err := os.Readlink("/proc/self"); err == nil {
		r.initPID, _ = strconv.Atoi(self)
		if st, err := session.ReadProcStat(r.initPID); err == nil {
			r.initTime = st.StartTime
		}
	}
	r.pidFile = r.dir + "/" + strconv.Itoa(r.initPID) + ".pid"
	if err := os.WriteFile(r.pidFile, []byte(fmt.Sprintf("%d %d\n", r.initPID, r.initTime)), 0o600); err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	if err := r.openEvidence(spec); err != nil {
		return nil, err
	}
	base := &sessionInit{spec: rs.initSpec}
	if err := base.openEgress(spec); err != nil {
		return nil, err
	}
	r.egress = base.egress
	spec.CgroupPlaced = true // born in r-*, in a cgroup namespace rooted there
	if err := setupSandboxMounts(spec); err != nil {
		return nil, err
	}
	hostname := spec.World
	if hostname == "" {
		hostname = "strata"
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return nil, fmt.Errorf("set hostname: %w", err)
	}
	if err := base.setupNetwork(spec); err != nil {
		return nil, err
	}
	r.proxyPort = base.proxyPort
	if err := unix.Chdir("/"); err != nil {
		return nil, err
	}
	r.template = *spec
	r.template.Env = nil
	for _, s := range sandbox.Plan(spec.Boundary, sandbox.Input{Merged: spec.Merged, HostDev: spec.HostDev}) {
		switch s.Op {
		case sandbox.OpTmpfs:
			r.private = append(r.private, privateTmpfs{target: s.Target, options: s.Options})
		case sandbox.OpDev:
			r.private = append(r.private, privateTmpfs{target: filepath.Join(s.Target, "shm"), options: "mode=1777"})
		}
	}
	r.mqueue = mqueueMount()
	if mounts, err := selfMounts(); err == nil {
		for i, p := range r.private {
			if top, ok := topMount(mounts, p.target); ok {
				r.private[i].points = attachedBeneath(mounts, top)
			}
		}
	}
	if r.dropped, err = newDroppedThread(); err != nil {
		return nil, err
	}
	// Signals from the host retire it (it serves no new session, and
	// ends once its sessions have); a command of its World can do no
	// more (SIGKILL from inside its pid namespace does not reach it).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE)
	go func() {
		for s := range sigs {
			switch s {
			case unix.SIGTERM, unix.SIGINT, unix.SIGHUP:
				r.retire()
			}
		}
	}()
	return r, nil
}

// openEvidence opens, while the state root is still visible, what each
// session's evidence needs: the activity log and the watcher's dirs.
func (r *residentInit) openEvidence(spec *SessionSpec) error {
	if spec.ActivityLog != "" {
		if f, err := os.OpenFile(spec.ActivityLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			f.Close()
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, spec.ActivityLog, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err == nil {
			r.activity, err = os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_WRONLY|os.O_APPEND, 0)
			unix.Close(fd)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "activity log %s: %v\n", spec.ActivityLog, err)
		}
	}
	if spec.Watch == nil {
		return nil
	}
	w := *spec.Watch
	for _, d := range []string{w.Objects, w.Bases, w.Provenance} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "no bases or provenance: %v\n", err)
			return nil
		}
	}
	for _, p := range []*string{&w.Upper, &w.Objects, &w.Bases, &w.Provenance} {
		fd, err := unix.OpenTree(unix.AT_FDCWD, *p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			fmt.Fprintf(os.Stderr, "no bases or provenance: clone %s: %v\n", *p, err)
			return nil
		}
		*p = "/proc/self/fd/" + strconv.Itoa(fd)
	}
	// The source is only read: a plain descriptor, taken before the
	// World's view is bound over its path.
	fd, err := unix.Open(w.Lower, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "no bases or provenance: open source %s: %v\n", w.Lower, err)
		return nil
	}
	w.Lower = "/proc/self/fd/" + strconv.Itoa(fd)
	r.watch = &w
	return nil
}

// serve accepts sessions until it retires, or has had none for idleFor.
func (r *residentInit) serve() {
	go r.reaper.loop()
	r.mu.Lock()
	r.armIdle()
	ln := r.ln
	r.mu.Unlock()
	go func() {
		for {
			conn, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			go r.handle(conn)
		}
	}()
	<-r.done
	// A session told its end may still be making it durable (fsyncs).
	finished := make(chan struct{})
	go func() { r.handles.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
	}
	_ = os.Remove(r.pidFile)
}

// armIdle starts the idle clock; r.mu held.
func (r *residentInit) armIdle() {
	if r.active > 0 || r.idle != nil {
		return
	}
	r.idle = time.AfterFunc(r.idleFor, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.active == 0 {
			r.retireLocked()
		}
	})
}

// retire stops serving new sessions; the init ends with its last one.
func (r *residentInit) retire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retireLocked()
}

// retireLocked is retire with r.mu held.
func (r *residentInit) retireLocked() {
	r.stopListening()
	if r.active == 0 {
		r.end()
	}
}

// end lets serve return (once): no session runs and none will.
func (r *residentInit) end() { r.doneOnce.Do(func() { close(r.done) }) }

// stopListening removes its socket (if still its own) and lets go of the
// lock, so that a new resident init can start while this one's sessions
// end; r.mu held.
func (r *residentInit) stopListening() {
	if r.retiring {
		return
	}
	r.retiring = true
	sock := r.dir + "/" + residentSocket
	var st unix.Stat_t
	if unix.Stat(sock, &st) == nil && st.Ino == r.sockIno {
		_ = unix.Unlink(sock)
	}
	_ = r.ln.Close()
	if r.lock >= 0 {
		unix.Close(r.lock)
		r.lock = -1
	}
}

func (r *residentInit) sessionEnded() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
	if r.active > 0 {
		return
	}
	if r.retiring {
		r.end()
		return
	}
	// The next session gets fresh private dirs: made once the end is told
	// (renewAfterEnd), or by the next request if it comes first.
	r.renewDue = true
	r.armIdle()
}

// renewAfterEnd makes the fresh private dirs sessionEnded made due, after
// the session's end was told (off its caller's path).
func (r *residentInit) renewAfterEnd() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active == 0 {
		r.renewIfDue()
	}
}

// renewIfDue makes the private dirs fresh when due (no session runs); false
// when they cannot be: this init then serves no more sessions (the next
// exec starts one). r.mu held.
func (r *residentInit) renewIfDue() bool {
	if !r.renewDue {
		return !r.retiring
	}
	r.renewDue = false
	if err := r.renewPrivate(); err != nil {
		// A private dir it could not mount again would show the host's,
		// or mounts a session moved would be missing where they belong.
		fmt.Fprintf(os.Stderr, "resident init: %v; retiring\n", err)
		r.retireLocked()
		return false
	}
	return true
}

// privateTmpfs is one private dir sessions get a fresh one of; points are
// the mounts attached on it as the init set up (the World's source, binds
// under /tmp or /run), where they must still be when it is renewed.
type privateTmpfs struct {
	target, options string
	points          []string
}

// renewPrivate gives the next session what a session with an init of its
// own gets, fresh private /tmp, /var/tmp, /run and /dev/shm, whenever no
// session runs (sessions running at once share them). One that holds
// nothing is kept. One with mounts on it (the World's source, a bind or a
// credential's cover under /tmp or /run) gets them back on the fresh one:
// each is cloned first, with what is mounted beneath it, and attached at
// its place again, as the plan attached it. r.mu held.
func (r *residentInit) renewPrivate() error {
	// What a session left in the World's IPC namespace (System V shared
	// memory, message queues, semaphores) is gone too, as the end of an
	// init of its own would take its namespace.
	removeSysVIPC()
	removeMessageQueues(r.mqueue)
	if len(r.private) == 0 {
		return nil
	}
	mounts, err := selfMounts()
	if err != nil {
		return nil // kept as they are
	}
	for _, p := range r.private {
		top, ok := topMount(mounts, p.target)
		if !ok || top.FSType != "tmpfs" {
			continue
		}
		points := attachedBeneath(mounts, top)
		if !slices.Equal(points, p.points) {
			// A session renamed a dir above one (mv /tmp/a /tmp/b takes the
			// World's source along): the next would not find it where it
			// belongs. This init serves no more; the next exec starts one.
			return fmt.Errorf("the mounts on the private %s moved: %q, set up as %q", p.target, points, p.points)
		}
		if skeletonOnly(p.target, points) {
			continue
		}
		if err := renewTmpfs(p, points); err != nil {
			return err
		}
	}
	return nil
}

// removeSysVIPC removes every System V IPC object of this IPC namespace
// (/proc/sysvipc lists them): shared memory segments (freed once detached:
// no session runs), message queues and semaphore sets.
func removeSysVIPC() {
	for _, kind := range []struct {
		file string
		rm   func(id int)
	}{
		{"shm", func(id int) { _, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) }},
		{"msg", func(id int) { _, _, _ = unix.Syscall(unix.SYS_MSGCTL, uintptr(id), unix.IPC_RMID, 0) }},
		{"sem", func(id int) { _, _, _ = unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), 0, unix.IPC_RMID, 0, 0, 0) }},
	} {
		data, err := os.ReadFile("/proc/sysvipc/" + kind.file)
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); i > 0 && len(f) > 1 {
				if id, err := strconv.Atoi(f[1]); err == nil {
					kind.rm(id)
				}
			}
		}
	}
}

// mqueueMount is a detached mount of this IPC namespace's mqueue file
// system (nothing of it is seen by the sessions), -1 when there is none:
// made once, so that removing the queues costs no mount.
func mqueueMount() int {
	fsfd, err := unix.Fsopen("mqueue", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return mfd
}

// removeMessageQueues removes every POSIX message queue of this IPC
// namespace, through its mqueue mount mfd.
func removeMessageQueues(mfd int) {
	if mfd < 0 {
		return
	}
	dfd, err := unix.Openat(mfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	dir := os.NewFile(uintptr(dfd), "mqueue")
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	for _, n := range names {
		_ = unix.Unlinkat(mfd, n, 0)
	}
}

// renewTmpfs mounts a fresh tmpfs at p.target in place of the one there
// and attaches again, on the fresh one, what was mounted at points (each
// with what lies beneath it). Kept as it is (nil) when a mount cannot be
// cloned or the old one cannot be taken off; an error when the fresh one
// cannot be made whole (the init must then serve no session).
func renewTmpfs(p privateTmpfs, points []string) error {
	fds := make([]int, 0, len(points))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, pt := range points {
		fd, err := cloneTree(pt)
		if err != nil {
			return nil // kept as it is
		}
		fds = append(fds, fd)
	}
	if err := unix.Unmount(p.target, unix.MNT_DETACH); err != nil {
		return nil // the old one stays
	}
	if err := unix.Mount("tmpfs", p.target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, p.options); err != nil {
		return fmt.Errorf("renew private %s: %w", p.target, err)
	}
	for i, pt := range points {
		if err := attachTree(fds[i], pt, fdIsDir(fds[i])); err != nil {
			return fmt.Errorf("renew private %s: attach %s again: %w", p.target, pt, err)
		}
	}
	return nil
}

// selfMounts is this mount namespace's table (/proc/self/mountinfo).
func selfMounts() ([]mount.MountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return mount.ParseMountInfo(f)
}

// topMount is the mount seen at point: the one there that no other mount
// covers at the same point.
func topMount(mounts []mount.MountInfo, point string) (mount.MountInfo, bool) {
	var top mount.MountInfo
	found := false
	for _, m := range mounts {
		if m.MountPoint != point {
			continue
		}
		covered := false
		for _, c := range mounts {
			if c.Parent == m.ID && c.MountPoint == point {
				covered = true
				break
			}
		}
		if !covered {
			top, found = m, true
		}
	}
	return top, found
}

// attachedBeneath names the mount points attached on top (its children),
// leaving out one hidden by another (a child under another child's point)
// and naming a point once. Mounts under top's point that hang from the
// mounts it covers (the host's, hidden by it) are not its children.
func attachedBeneath(mounts []mount.MountInfo, top mount.MountInfo) []string {
	var pts []string
	for _, m := range mounts {
		if m.Parent == top.ID && m.MountPoint != top.MountPoint && !slices.Contains(pts, m.MountPoint) {
			pts = append(pts, m.MountPoint)
		}
	}
	return slices.DeleteFunc(pts, func(pt string) bool {
		for _, o := range pts {
			if o != pt && strings.HasPrefix(pt, o+"/") {
				return true
			}
		}
		return false
	})
}

// skeletonOnly says dir holds nothing but the mount points (and the
// directories leading to them): nothing a session left there.
func skeletonOnly(dir string, points []string) bool {
	leads := map[string]bool{}
	for _, pt := range points {
		for d := pt; d != dir && strings.HasPrefix(d, dir+"/"); d = filepath.Dir(d) {
			leads[d] = true
		}
	}
	var walk func(d string) bool
	walk = func(d string) bool {
		f, err := os.Open(d)
		if err != nil {
			return false
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return false
		}
		for _, n := range names {
			c := d + "/" + n
			if !leads[c] {
				return false
			}
			if !slices.Contains(points, c) && !walk(c) {
				return false
			}
		}
		return true
	}
	return walk(dir)
}

// handle serves one request: refuses it untouched (another key, or
// retiring), or runs its session.
func (r *residentInit) handle(conn *net.UnixConn) {
	defer func() { _ = conn.Close() }()
	req, stdin, err := readResidentRequest(conn)
	if err != nil {
		fmt.Fprintf(os.Stderr, "resident init: request: %v\n", err)
		return
	}
	reply := func(m residentReply) error { return json.NewEncoder(conn).Encode(m) }
	r.mu.Lock()
	refused := ""
	switch {
	case r.retiring:
		refused = "retiring"
	case req.Key != r.key:
		refused = "another view"
	case !req.Attrs.same(r.attrs):
		refused = refusedAttrs
	case !fsx.ValidName(req.Session.ID) || req.Session.Dir != filepath.Join(r.sessionsHost, req.Session.ID) || len(req.Session.Argv) == 0:
		refused = "not a session of this World"
	case !r.renewIfDue():
		refused = "retiring"
	default:
		r.active++
		if r.idle != nil {
			r.idle.Stop()
			r.idle = nil
		}
	}
	r.mu.Unlock()
	dir := r.sessions + "/" + req.Session.ID
	if refused == "" {
		r.handles.Add(1)
		defer r.handles.Done()
		// Its dir, end fifo and meta.json (starting), made here. Any of
		// them failing (a dir that exists is another session's; a full
		// disk) leaves nothing: the caller starts an init of its own,
		// which fails the same way and says so as it always has.
		if err := makeSessionDir(dir, r.sessionOf(req.Session).SessionSpec); err != nil {
			refused = err.Error()
			r.sessionEnded()
		}
	}
	if refused != "" {
		if stdin != nil {
			stdin.Close()
		}
		_ = reply(residentReply{Refused: refused})
		if refused == "another view" {
			// The World's view or boundary changed (a remount, a new
			// config): the strata asking starts the init for the new one.
			r.retire()
		}
		return
	}
	in := &sessionInit{spec: r.sessionOf(req.Session), ready: conn, res: r, cgroupFD: -1, stdin: stdin}
	defer in.endOnce.Do(r.sessionEnded)
	if err := reply(residentReply{Accepted: true}); err != nil {
		// The caller is gone before the command could start: no session.
		_ = os.RemoveAll(dir)
		if stdin != nil {
			stdin.Close()
		}
		return
	}
	if req.Session.Trace {
		session.EnableInitTrace(true) // to the resident's log
	}
	if err := in.runResident(); err != nil {
		fmt.Fprintf(os.Stderr, "session %s: %v\n", req.Session.ID, err)
	}
}

// makeSessionDir makes a session's dir, end fifo and starting meta.json,
// or nothing.
func makeSessionDir(dir string, spec SessionSpec) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	meta := SessionMeta{
		ID: spec.ID, World: spec.World, Argv: spec.Argv, Env: RedactEnv(spec.Env, spec.EnvRedact),
		Source: spec.Source, Cwd: spec.Cwd, TTY: spec.TTY, Runtime: RuntimeLocal, Isolation: spec.Isolation, NoNetwork: spec.NoNetwork,
		StartedAt: time.Now(), State: SessionStarting, Attention: AttentionRunning, Network: spec.Network,
	}
	err := unix.Mkfifo(dir+"/"+session.EndFIFO, 0o600)
	if err == nil {
		err = session.WriteMetaPath(dir, meta)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	return nil
}

// runResident is the session's part of run, in the resident init.
func (in *sessionInit) runResident() error {
	r := in.res
	spec := &in.spec.SessionSpec
	in.dir = r.sessions + "/" + spec.ID
	root, err := os.OpenRoot(in.dir)
	if err != nil {
		return fmt.Errorf("open session dir: %w", err)
	}
	in.root = root
	defer root.Close()
	if in.endFIFO, err = root.OpenFile(session.EndFIFO, os.O_RDWR|unix.O_NONBLOCK, 0); err != nil {
		return fmt.Errorf("open %s: %w", session.EndFIFO, err)
	}
	in.meta = SessionMeta{
		ID: spec.ID, World: spec.World, Argv: spec.Argv, Env: RedactEnv(spec.Env, spec.EnvRedact),
		Source: spec.Source, Cwd: spec.Cwd, TTY: spec.TTY, Runtime: RuntimeLocal, Isolation: spec.Isolation, NoNetwork: spec.NoNetwork,
		StartedAt: time.Now(), State: SessionStarting, Attention: AttentionRunning, Network: spec.Network,
		InitPID: r.initPID, InitStartTime: r.initTime,
	}
	tf, ln, err := in.openOutput()
	if err != nil {
		return err
	}
	defer tf.Close()
	session.Trace("init: session dir, fifo, transcript opened")
	if err := unix.Mkdirat(r.cgroup, spec.ID, 0o755); err != nil {
		return in.startFailed(1, fmt.Errorf("session cgroup: %w", err))
	}
	if in.cgroupFD, err = unix.Openat(r.cgroup, spec.ID, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return in.startFailed(1, fmt.Errorf("session cgroup: %w", err))
	}
	defer func() { go r.removeCgroup(spec.ID, in.cgroupFD) }()
	session.Trace("init: session cgroup made")
	if r.activity != nil {
		if fd, err := unix.FcntlInt(r.activity.Fd(), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			in.activity = os.NewFile(uintptr(fd), "activity")
		}
	}
	if r.watch != nil && spec.Watch != nil {
		if w, err := openUpperWatch(*r.watch, spec.ID); err != nil {
			fmt.Fprintf(os.Stderr, "session %s: no bases or provenance: %v\n", spec.ID, err)
		} else {
			in.watch = w
			// Closed once the end is recorded and told (closing an inotify
			// descriptor waits for a grace period); an init of its own
			// leaves it to its exit.
			defer w.close()
		}
	}
	session.Trace("init: evidence opened (activity, watch)")
	if r.proxyPort > 0 {
		spec.Env = withProxyEnv(spec.Env, r.proxyPort)
	}
	spec.CgroupPlaced = true
	return in.runSession(r.hostProc, tf, ln)
}

// removeCgroup removes an ended session's cgroup once its processes are
// gone (the sweep of the World's cgroups removes it otherwise).
func (r *residentInit) removeCgroup(id string, fd int) {
	defer unix.Close(fd)
	for range 200 {
		if v, err := keyedIntAt(fd, "cgroup.events", "populated"); err != nil || v == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = unix.Unlinkat(r.cgroup, id, unix.AT_REMOVEDIR)
}

func keyedIntAt(dirfd int, name, key string) (int64, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", name, key)
}

// killCgroup kills every process of the cgroup dir fd (cgroup.kill).
func killCgroup(fd int) {
	if fd < 0 {
		return
	}
	kfd, err := unix.Openat(fd, "cgroup.kill", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_, _ = unix.Write(kfd, []byte("1"))
	unix.Close(kfd)
}

// readResidentRequest reads a request: a 4-byte length, the JSON, and the
// stdin descriptor passed with the first bytes.
func readResidentRequest(conn *net.UnixConn) (residentRequest, *os.File, error) {
	var req residentRequest
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	head := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(4*2))
	n, oobn, _, _, err := conn.ReadMsgUnix(head, oob)
	if err != nil {
		return req, nil, err
	}
	var stdin *os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err != nil {
					continue
				}
				for _, fd := range fds {
					unix.CloseOnExec(fd)
					if stdin == nil {
						stdin = os.NewFile(uintptr(fd), "stdin")
					} else {
						unix.Close(fd)
					}
				}
			}
		}
	}
	if _, err := io.ReadFull(conn, head[n:]); err != nil {
		return req, stdin, err
	}
	size := int(head[0])<<24 | int(head[1])<<16 | int(head[2])<<8 | int(head[3])
	if size > 16<<20 {
		return req, stdin, fmt.Errorf("request of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil {
		return req, stdin, err
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, stdin, err
	}
	if !req.Session.HasStdin && stdin != nil {
		stdin.Close()
		stdin = nil
	}
	return req, stdin, nil
}

// reaper is a resident init's one wait4(-1) loop: it hands each command's
// status to its session and reaps the orphans the World's sessions leave
// (they come to PID 1).
type reaper struct {
	mu      sync.Mutex
	waiting map[int]chan unix.WaitStatus
	kick    chan struct{}
	once    sync.Once
}

func (p *reaper) init() {
	p.once.Do(func() {
		p.waiting = map[int]chan unix.WaitStatus{}
		p.kick = make(chan struct{}, 1)
	})
}

// start runs fn (which starts a process) with the pid registered before
// the loop can reap it, and returns the channel its status comes on.
func (p *reaper) start(fn func() (*os.Process, error)) (*os.Process, <-chan unix.WaitStatus, error) {
	p.init()
	p.mu.Lock()
	proc, err := fn()
	var ch chan unix.WaitStatus
	if err == nil {
		ch = make(chan unix.WaitStatus, 1)
		p.waiting[proc.Pid] = ch
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return proc, ch, err
}

func (p *reaper) loop() {
	p.init()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil { // ECHILD: nothing runs; wait for a start
			<-p.kick
			continue
		}
		p.mu.Lock()
		if ch, ok := p.waiting[got]; ok {
			ch <- ws
			delete(p.waiting, got)
		}
		p.mu.Unlock()
	}
}

// droppedThread runs functions on one OS thread that has dropped the
// capabilities a command may not have (dropCapabilities) and set
// no_new_privs: what a function starts there inherits that. The thread is
// locked to its goroutine for the process's life; nothing else runs on it.
type droppedThread struct{ fns chan func() }

func newDroppedThread() (*droppedThread, error) {
	t := &droppedThread{fns: make(chan func())}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		if err := dropCapabilities(); err != nil {
			errc <- err
			return
		}
		errc <- nil
		for fn := range t.fns {
			fn()
		}
	}()
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("drop capabilities: %w", err)
	}
	return t, nil
}

// do runs fn on the thread and returns once it has.
func (t *droppedThread) do(fn func()) {
	done := make(chan struct{})
	t.fns <- func() { fn(); close(done) }
	<-done
}
