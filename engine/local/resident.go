package local

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/cgroup"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/fsx"
)

// The caller's side of a World's resident init (resident_linux.go).

const (
	// ResidentDir is the World's dir of its resident init: its socket,
	// lock, pid files and log.
	ResidentDir    = "resident"
	residentSocket = "init.sock"
	residentLock   = "init.lock"
	residentLog    = "init.log"
	// DefaultResidentIdle is how long a resident init waits for the next
	// session after its last one ended ($STRATA_RESIDENT_IDLE overrides).
	DefaultResidentIdle = 30 * time.Second
)

// ResidentEnabled says whether sessions may run in resident inits:
// $STRATA_RESIDENT=0 turns them off (every session gets an init of its own).
func ResidentEnabled() bool { return os.Getenv("STRATA_RESIDENT") != "0" }

func residentIdle() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("STRATA_RESIDENT_IDLE")); err == nil && d > 0 {
		return d
	}
	return DefaultResidentIdle
}

// residentOK says whether spec's session can run in the World's resident
// init: a confined level (sandbox, strict) of a real World, as root, with
// cgroups (each session's own is what freezes, counts and ends it).
func (spec *SessionSpec) residentOK() bool {
	return ResidentEnabled() && spec.Boundary != nil && spec.Overlay == nil && os.Geteuid() == 0 &&
		spec.StateRoot != "" && fsx.ValidName(spec.World) && cgroup.V2Root() != "" &&
		filepath.Dir(spec.Dir) == filepath.Join(Paths{Root: spec.StateRoot}.World(spec.World), "sessions")
}

// residentKey identifies the view a resident init sets up: every part of
// the spec its mounts and namespaces come from, the build, and the mounts
// and the source it binds (a remount, a moved source or a credential made
// since give another key). The environment, argv, cwd and terminal are the
// session's own.
func residentKey(spec *SessionSpec) (string, error) {
	b := *spec.Boundary
	b.Env, b.EnvAllow, b.DroppedEnv = nil, nil, nil
	var ids []uint64
	for _, p := range append([]string{spec.Merged, spec.Source}, bindSources(spec.Binds)...) {
		id, err := mountID(p)
		if err != nil {
			return "", err
		}
		ids = append(ids, id)
	}
	var st unix.Stat_t
	if err := unix.Stat(spec.Source, &st); err != nil {
		return "", err
	}
	// What is bound in by path, as it is now: a granted credential file
	// replaced by a rename, or a shared cache or home dir made anew, is
	// another inode, which a standing bind would not follow.
	var inodes []uint64
	bound := []string{b.Home}
	for _, p := range append(slices.Clone(b.Granted), b.Writable...) {
		bound = append(bound, p.Path)
	}
	for _, p := range bound {
		var pst unix.Stat_t
		if p != "" && unix.Stat(p, &pst) == nil {
			inodes = append(inodes, pst.Dev, pst.Ino)
		} else {
			inodes = append(inodes, 0, 0)
		}
	}
	// The binary it runs: another strata (or its strata-init rebuilt,
	// replaced or passed over) starts its own.
	initBin, _ := initExe(spec.Exe)
	var ist unix.Stat_t
	if err := unix.Stat(initBin, &ist); err != nil {
		return "", err
	}
	// Written field by field: a reflective encoder's first use costs a
	// short exec ~0.2 ms. TestResidentKeyCoversTheSpec fails when the
	// spec or the boundary gains a field this does not name.
	h := sha256.New()
	k := keyWriter{h: h}
	k.str(initBin)
	k.u(ist.Dev, ist.Ino, uint64(ist.Size), uint64(ist.Mtim.Nano()))
	k.str(BuildStamp())
	k.str(spec.World, spec.Source, spec.Merged, spec.StateRoot, spec.EgressDir, spec.ActivityLog, string(spec.Network), string(spec.Isolation))
	k.strs(spec.HideDirs)
	k.n(len(spec.Binds))
	for _, bd := range spec.Binds {
		k.str(bd.Source, bd.Target)
		k.b(bd.ReadOnly)
	}
	k.b(spec.HostDev, spec.NoNetwork, spec.Watch != nil)
	if w := spec.Watch; w != nil {
		k.str(w.Upper, w.Lower, w.Objects, w.Bases, w.Provenance, string(w.Dialect))
		k.strs(w.Ignore)
		k.n(w.MaxWatches)
	}
	k.str(b.World, string(b.Level), b.Source, b.Home, b.HomeUpper, b.HomeWork, string(b.Network))
	k.b(b.ReadOnlyHost, b.PrivateRun)
	for _, ps := range [][]boundary.Path{b.Writable, b.Hidden, b.Granted} {
		k.n(len(ps))
		for _, p := range ps {
			k.str(p.Path, string(p.Kind))
			k.b(p.Exists, p.Dir)
		}
	}
	k.u(ids...)
	k.u(inodes...)
	k.u(st.Dev, st.Ino)
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// keyWriter writes a key's fields unambiguously: each string with its
// length, each list with its count.
type keyWriter struct{ h hash.Hash }

func (k keyWriter) str(ss ...string) {
	for _, s := range ss {
		k.n(len(s))
		_, _ = io.WriteString(k.h, s)
	}
}

func (k keyWriter) strs(ss []string) {
	k.n(len(ss))
	k.str(ss...)
}

func (k keyWriter) n(n int) { k.u(uint64(n)) }

func (k keyWriter) u(vs ...uint64) {
	var buf [8]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint64(buf[:], v)
		_, _ = k.h.Write(buf[:])
	}
}

func (k keyWriter) b(bs ...bool) {
	for _, v := range bs {
		if v {
			k.u(1)
		} else {
			k.u(0)
		}
	}
}

func bindSources(bs []Bind) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Source)
	}
	return out
}

// mountID is the unique id of the mount p is on (never reused, unlike the
// plain mount id, where the kernel has it).
func mountID(p string) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_MNT_ID_UNIQUE, &stx); err == nil && stx.Mask&unix.STATX_MNT_ID_UNIQUE != 0 {
		return stx.Mnt_id, nil
	}
	if err := unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, fmt.Errorf("mount id of %s: %w", p, err)
	}
	return stx.Mnt_id, nil
}

// errNoResident: no resident init took the session; nothing of it ran.
var errNoResident = errors.New("no resident init")

// errResidentDeclined: the World's resident init serves other process
// attributes (refusedAttrs).
var errResidentDeclined = errors.New("the resident init has other process attributes")

// startResident runs spec's session in the World's resident init, starting
// one when there is none (or the one there sets up another view). ok is
// false when no resident init took the session, and nothing of it ran: the
// caller starts an init of its own.
func startResident(ctx context.Context, spec *SessionSpec, w *world.World, fail func(error) (SessionMeta, error)) (_ SessionMeta, _ error, ok bool) {
	attrs := currentProcAttrs()
	if attrs.SigIgn != "" {
		session.Trace("session: SIGHUP or SIGINT ignored; an init of its own")
		return SessionMeta{}, nil, false
	}
	key, err := residentKey(spec)
	if err != nil {
		return SessionMeta{}, nil, false
	}
	dir := filepath.Join(Paths{Root: spec.StateRoot}.World(spec.World), ResidentDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return SessionMeta{}, nil, false
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return SessionMeta{}, nil, false
	}
	defer unix.Close(dfd)
	// Reached through the dir's handle: the state root's path may be
	// longer than a socket address holds.
	sock := "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + residentSocket
	rs := residentSession{
		ID: spec.ID, Dir: spec.Dir, Argv: spec.Argv, Env: spec.Env, EnvRedact: spec.EnvRedact, Cwd: spec.Cwd,
		TTY: spec.TTY, Rows: spec.Rows, Cols: spec.Cols, HasStdin: spec.Stdin != nil && !spec.TTY, Trace: spec.Trace,
	}
	req, err := json.Marshal(residentRequest{Key: key, Session: rs, Attrs: attrs})
	if err != nil {
		return SessionMeta{}, nil, false
	}
	var stdin *os.File
	if rs.HasStdin {
		stdin = spec.Stdin
	}
	session.Trace("session: resident key made")
	conn, dec, err := askResident(sock, req, stdin)
	if errors.Is(err, errResidentDeclined) {
		// Started by a strata with other attributes: this session gets an
		// init of its own, with this strata's.
		session.Trace("session: resident init has other process attributes")
		return SessionMeta{}, nil, false
	}
	if errors.Is(err, errNoResident) {
		if spawnFailedLately(dir, key) {
			return SessionMeta{}, nil, false
		}
		session.Trace("session: no resident init; starting one")
		if err := spawnResident(spec, w, key, dir, attrs); err != nil {
			// The session gets an init of its own; the next ones too for
			// a while (a strata-init of another build refuses every time).
			noteSpawnFailed(dir, key, err)
			return SessionMeta{}, nil, false
		}
		session.Trace("session: resident init started")
		conn, dec, err = askResident(sock, req, stdin)
		// Another strata's start won the World's lock: its init may still
		// be setting up.
		for deadline := time.Now().Add(5 * time.Second); errors.Is(err, errNoResident) && residentLocked(dir) && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
			conn, dec, err = askResident(sock, req, stdin)
		}
	}
	if err != nil {
		return SessionMeta{}, nil, false
	}
	defer func() { _ = conn.Close() }()
	session.Trace("session: resident init took the session")
	type result struct {
		msg session.ReadyMessage
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var msg session.ReadyMessage
		err := dec.Decode(&msg)
		ch <- result{msg, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		// The command may be starting: end it once it has.
		select {
		case r = <-ch:
			if r.err == nil && r.msg.Meta.PID > 0 {
				_ = unix.Kill(-r.msg.Meta.PID, unix.SIGKILL)
			}
		case <-time.After(5 * time.Second):
		}
		m, err := fail(ctx.Err())
		return m, err, true
	}
	if r.err != nil {
		// The init records the command as running just before it says so:
		// if it died in between, the command did start.
		if m, err := session.ReadMeta(spec.Dir); err == nil && m.PID > 0 && (m.State == SessionRunning || m.State == session.Lost) {
			return m, nil, true
		}
		m, err := fail(fmt.Errorf("the World's resident init ended before the command started (%v); see %s", r.err, filepath.Join(dir, residentLog)))
		return m, err, true
	}
	if r.msg.Meta.State == SessionFailed {
		return r.msg.Meta, fmt.Errorf("start session %s: %s: %w", spec.ID, r.msg.Meta.Error, session.ErrStartFailed), true
	}
	return r.msg.Meta, nil, true
}

const residentFailed = "failed"

// spawnFailedLately says a resident init for key failed to start in the
// last minute.
func spawnFailedLately(dir, key string) bool {
	p := filepath.Join(dir, residentFailed)
	fi, err := os.Stat(p)
	if err != nil || time.Since(fi.ModTime()) > time.Minute {
		return false
	}
	data, _ := os.ReadFile(p)
	return strings.HasPrefix(string(data), key+" ")
}

// noteSpawnFailed records why the resident init for key did not start, in
// its log and for spawnFailedLately.
func noteSpawnFailed(dir, key string, err error) {
	_ = os.WriteFile(filepath.Join(dir, residentFailed), []byte(key+" "+err.Error()+"\n"), 0o600)
	if f, ferr := os.OpenFile(filepath.Join(dir, residentLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); ferr == nil {
		fmt.Fprintf(f, "%s strata: %v (sessions get an init of their own for a minute)\n", time.Now().UTC().Format(time.RFC3339), err)
		f.Close()
	}
}

// residentLocked says a resident init of the World holds its lock (it is
// setting up or serving).
func residentLocked(dir string) bool {
	fd, err := unix.Open(filepath.Join(dir, residentLock), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(fd, unix.LOCK_UN)
	return false
}

// askResident sends the request (and stdin) to the resident init at sock
// and reads its answer: errNoResident when none listens or it refused (the
// session untouched); the connection and its decoder when it took it.
func askResident(sock string, req []byte, stdin *os.File) (*net.UnixConn, *json.Decoder, error) {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, nil, errNoResident
	}
	ok := false
	defer func() {
		if !ok {
			_ = conn.Close()
		}
	}()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	head := []byte{byte(len(req) >> 24), byte(len(req) >> 16), byte(len(req) >> 8), byte(len(req))}
	var oob []byte
	if stdin != nil {
		oob = unix.UnixRights(int(stdin.Fd()))
	}
	if _, _, err := conn.WriteMsgUnix(head, oob, nil); err != nil {
		return nil, nil, errNoResident
	}
	if _, err := conn.Write(req); err != nil {
		return nil, nil, errNoResident
	}
	dec := json.NewDecoder(conn)
	var reply residentReply
	err = dec.Decode(&reply)
	if err == nil && reply.Refused == refusedAttrs {
		return nil, nil, errResidentDeclined
	}
	if err != nil || !reply.Accepted {
		// Refused, or gone before it answered (it answers before it
		// touches the session): nothing ran.
		return nil, nil, errNoResident
	}
	_ = conn.SetDeadline(time.Time{})
	ok = true
	return conn, dec, nil
}

// spawnResident starts the World's resident init for spec's view and waits
// until it listens (or another strata's does).
func spawnResident(spec *SessionSpec, w *world.World, key, dir string, attrs procAttrs) error {
	cg := cgroup.PrepareResident(w)
	if cg == "" {
		return errors.New("no cgroup for a resident init")
	}
	keepCg := false
	defer func() {
		if !keepCg {
			_ = unix.Rmdir(filepath.Join(cg, "init"))
			_ = unix.Rmdir(cg)
		}
	}()
	cgFD, err := unix.Open(cg, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("resident init cgroup: %w", err)
	}
	defer unix.Close(cgFD)
	logPath := filepath.Join(dir, residentLog)
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > 1<<20 {
		_ = os.Rename(logPath, logPath+".old")
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("resident init log: %w", err)
	}
	defer logf.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devNull.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer specR.Close()
	defer specW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readyR.Close()
	exe, small := initExe(spec.Exe)
	cmd := exec.Command(exe, ResidentInitArg, dir)
	cmd.Env, cmd.Dir = []string{}, "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, devNull, logf
	cmd.ExtraFiles = []*os.File{specR, readyW}
	flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP)
	if spec.ownNetns() {
		flags |= unix.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: flags, UseCgroupFD: true, CgroupFD: cgFD}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return fmt.Errorf("start resident init %s: %w", exe, err)
	}
	go func() { _ = cmd.Wait() }() // reaped when it ends while this strata lives
	tmpl := *spec
	tmpl.Env, tmpl.Stdin = []string{DefaultPath}, nil
	rs := residentSpec{initSpec: initSpec{SessionSpec: tmpl}, Resident: residentParams{Key: key, Dir: dir, Cgroup: cg, Idle: residentIdle(), Attrs: attrs}}
	if small {
		rs.Build, rs.Strata = BuildStamp(), spec.Exe
	}
	data, err := json.Marshal(rs)
	if err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	_, _ = specW.Write(data)
	specW.Close()
	ch := make(chan residentReady, 1)
	go func() {
		var m residentReady
		if err := json.NewDecoder(readyR).Decode(&m); err != nil {
			m.Error = "it ended while setting up; see " + logPath
		}
		ch <- m
	}()
	select {
	case m := <-ch:
		switch {
		case m.OK:
			keepCg = true
			return nil
		case m.Exists:
			return nil // another strata's took the World: ask it
		default:
			_ = cmd.Process.Kill()
			return fmt.Errorf("resident init: %s", m.Error)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		return errors.New("resident init: no answer in 10s")
	}
}

// ResidentPIDs lists the live resident inits of the World at worldDir
// (the one serving and any retired one still running sessions), removing
// the pid files of those that died.
func ResidentPIDs(worldDir string) []int {
	files, _ := filepath.Glob(filepath.Join(worldDir, ResidentDir, "*.pid"))
	var pids []int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pid int
		var start uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(string(data)), "%d %d", &pid, &start); err != nil || pid <= 0 {
			_ = os.Remove(f)
			continue
		}
		st, err := session.ReadProcStat(pid)
		if err != nil || st.StartTime != start || st.State == 'Z' {
			_ = os.Remove(f) // it died without removing it
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// RetireResidents tells the resident inits of the World at worldDir to
// serve no new session and end with their last one, and waits up to wait
// for those with no session to end: their view of the World (its overlay
// mounts) goes with them, before an unmount, rollback or removal.
func RetireResidents(worldDir string, wait time.Duration) {
	var pids []int
	for _, pid := range ResidentPIDs(worldDir) {
		if unix.Kill(pid, unix.SIGTERM) == nil {
			pids = append(pids, pid)
		}
	}
	deadline := time.Now().Add(wait)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			if st, err := session.ReadProcStat(pid); err != nil || st.State == 'Z' {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}
