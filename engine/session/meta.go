package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/fsx"
	"golang.org/x/sys/unix"
)

// Files in a session dir.
const (
	MetaFile     = "meta.json"
	AttachSocket = "attach.sock"
	// EndFIFO is held open for writing by the init until the session's end is
	// recorded; see EndWatch.
	EndFIFO        = "end.fifo"
	InitLogFile    = "init.log"
	MetaTempPrefix = ".meta.json.tmp-"
)

// DefaultEnvRedact are the variable name patterns whose values are not recorded.
var DefaultEnvRedact = []string{"*TOKEN*", "*SECRET*", "*PASSWORD*", "*KEY*"}

// State is a session's life-cycle state.
type State string

const (
	Starting State = "starting"
	Running  State = "running"
	Exited   State = "exited" // exit code 0
	Failed   State = "failed" // non-zero exit, or could not start
	Killed   State = "killed" // ended by a signal
	Lost     State = "lost"   // its init vanished without recording an end
	// Broken is never written: its meta.json cannot be read (Error
	// says why). Its transcript is still there to read.
	Broken State = "broken"
)

// LostExitCode is a lost session's ExitCode: how its command ended is not
// known, and 0 would claim success (strata exec exits 255 for it, like ssh
// when the connection, not the command, failed).
const LostExitCode = -1

// Ended reports whether the session will not change any more.
func (s State) Ended() bool {
	switch s {
	case Exited, Failed, Killed, Lost, Broken:
		return true
	}
	return false
}

// Meta is a session's record, stored as meta.json in its dir.
type Meta struct {
	ID     string   `json:"id"`
	World  string   `json:"world"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env,omitempty"` // redacted
	Source string   `json:"source"`
	Cwd    string   `json:"cwd"`
	TTY    bool     `json:"tty"`
	// Runtime is where the command ran; "" in meta.json written before it
	// was recorded reads as local.
	Runtime world.Runtime `json:"runtime,omitempty"`
	// Isolation is the local runtime's level; "" for a cube session (a
	// MicroVM of its own).
	Isolation world.Isolation `json:"isolation,omitempty"`
	NoNetwork bool            `json:"no_network"`
	// InitPID and PID (the command, also its process group) are host pids.
	InitPID int `json:"init_pid,omitempty"`
	// InitStartTime is the init's start time in clock ticks after boot
	// (/proc/<pid>/stat field 22), which tells a reused pid from the init.
	InitStartTime uint64 `json:"init_start_time,omitempty"`
	PID           int    `json:"pid,omitempty"`
	// GuestPID is a cube session's command pid inside its sandbox.
	GuestPID  int       `json:"guest_pid,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	State     State     `json:"state"`
	ExitCode  int       `json:"exit_code"`        // LostExitCode (-1) when lost: no status was recorded
	Signal    string    `json:"signal,omitempty"` // e.g. "SIGKILL"; ExitCode is then 128+N
	Error     string    `json:"error,omitempty"`
	Attention Attention `json:"attention"`
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
func (m Meta) Duration() time.Duration {
	if m.EndedAt.IsZero() {
		return time.Since(m.StartedAt)
	}
	return m.EndedAt.Sub(m.StartedAt)
}

var (
	// ErrStartFailed: the session's command could not be started (Error says why).
	ErrStartFailed = errors.New("session command did not start")
	// ErrSessionNotRunning: the session has ended.
	ErrNotRunning = errors.New("session is not running")
	// ErrNoSession: the dir holds no session.
	ErrNotFound = errors.New("no such session")
)

// NewID returns a short id that sorts by creation time: milliseconds since
// the epoch in base 36, a dash, and 4 random base-36 digits.
func NewID() string {
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

// WriteMetaPath writes meta.json atomically (temp file, rename).
func WriteMetaPath(dir string, meta Meta) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write session meta: %w", err)
	}
	defer root.Close()
	return WriteMeta(root, meta)
}

// WriteMeta writes meta.json through a root handle, which keeps working in the
// init after the state root is hidden from its mount namespace. Only an ended
// session's meta is fsynced: after a crash a starting or running session is lost
// whatever its file says, and each fsync costs a short command's whole run time
// again. Readers always see a whole file (rename).
func WriteMeta(root *os.Root, meta Meta) error {
	return WriteMetaSync(root, meta, meta.State.Ended())
}

// WriteMetaSync is WriteMeta, fsyncing the file when sync is set (the init's
// end fsyncs after it has told the waiting caller: see syncSessionEnd).
func WriteMetaSync(root *os.Root, meta Meta, sync bool) error {
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("encode session meta: %w", err)
	}
	data = append(data, '\n')
	tmp := MetaTempPrefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write session meta: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && sync {
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

// ReadMeta reads a session's meta.json. A session recorded as starting or
// running whose init has gone (or whose pid now belongs to another process) is
// reported as lost.
func ReadMeta(dir string) (Meta, error) {
	meta, err := readMetaFile(dir)
	if err != nil || meta.State.Ended() {
		return meta, err
	}
	if InitAlive(meta) {
		return meta, nil
	}
	// The init may have written its end just now, right before it exited.
	meta, err = readMetaFile(dir)
	if err != nil || meta.State.Ended() || InitAlive(meta) {
		return meta, err
	}
	meta.State, meta.Attention = Lost, AttentionLost
	// Nobody knows how the command ended: never let that read as success.
	meta.ExitCode = LostExitCode
	if meta.Error == "" {
		meta.Error = fmt.Sprintf("session lost: its runner (pid %d) ended without recording an exit status", meta.InitPID)
	}
	return meta, nil
}

func readMetaFile(dir string) (Meta, error) {
	var meta Meta
	data, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if errors.Is(err, os.ErrNotExist) {
		return meta, fmt.Errorf("read session %s: %w", dir, ErrNotFound)
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
			meta.KilledByStrata = KilledByStrata(dir)
		}
		meta.Attention = AttentionOf(meta)
	}
	return meta, nil
}

// legacyIsolationCube is how meta.json recorded a cube session before it
// had a runtime of its own: as an isolation level.
const legacyIsolationCube world.Isolation = "cube"

// upgrade reads older meta.json: no runtime means local, and isolation
// "cube" meant the cube runtime.
func (m *Meta) upgrade() {
	if m.Isolation == legacyIsolationCube {
		m.Runtime, m.Isolation = world.RuntimeCube, ""
	}
	if m.Runtime == "" {
		m.Runtime = world.RuntimeLocal
	}
}

// startingGrace is how long a session may stay "starting" without an init pid: the
// caller writes that state just before it starts the init.
const startingGrace = 30 * time.Second

// InitAlive reports whether the session's init (or runner) still runs: its
// pid is alive and, when recorded, started when the init did; a session not
// yet given an init pid counts as alive for a short grace.
func InitAlive(meta Meta) bool {
	if meta.InitPID <= 0 {
		return meta.State == Starting && time.Since(meta.StartedAt) < startingGrace
	}
	st, err := ReadProcStat(meta.InitPID)
	if err != nil || st.State == 'Z' || st.State == 'X' {
		return false
	}
	return meta.InitStartTime == 0 || st.StartTime == meta.InitStartTime
}

// ProcStat holds the fields strata reads from /proc/<pid>/stat.
type ProcStat struct {
	State     byte   // field 3: R, S, D, Z, ...
	Pgrp      int    // field 5: its process group
	StartTime uint64 // field 22: clock ticks after boot
}

// ReadProcStat reads the fields strata needs from /proc/<pid>/stat.
func ReadProcStat(pid int) (ProcStat, error) {
	return ReadProcStatFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
}

// ReadProcStatFile reads a stat file at path (a /proc of another pid
// namespace, or a test's).
func ReadProcStatFile(path string) (ProcStat, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ProcStat{}, err
	}
	return parseProcStat(data)
}

func parseProcStat(data []byte) (ProcStat, error) {
	// The command name is in parentheses and may hold spaces or ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return ProcStat{}, errors.New("malformed stat")
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 {
		return ProcStat{}, errors.New("malformed stat")
	}
	pgrp, err := strconv.Atoi(fields[2])
	if err != nil {
		return ProcStat{}, fmt.Errorf("malformed stat: %w", err)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return ProcStat{}, fmt.Errorf("malformed stat: %w", err)
	}
	return ProcStat{State: fields[0][0], Pgrp: pgrp, StartTime: start}, nil
}

// Wait waits until the session has ended (or is lost) and returns its meta.
func Wait(ctx context.Context, dir string) (Meta, error) {
	end := OpenEndWatch(dir)
	defer end.close()
	for {
		meta, err := ReadMeta(dir)
		if err != nil || meta.State.Ended() {
			return meta, err
		}
		if err := ctx.Err(); err != nil {
			return meta, err
		}
		end.wait(ctx, LostCheckInterval)
	}
}

// EndWatch notices a session's end without inotify (closing an inotify watch costs
// a kernel grace period, 5-40 ms, on every short strata process): the init holds
// end.fifo open for writing while it runs and closes it right after writing its
// end, so a reader holding the FIFO sees POLLHUP then, or when the init dies.
type EndWatch struct {
	fd  int
	hup bool
}

// OpenEndWatch holds the session dir's end FIFO; without one (an old
// session) Wait only sleeps.
func OpenEndWatch(dir string) *EndWatch {
	fd, err := unix.Open(filepath.Join(dir, EndFIFO), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &EndWatch{fd: -1}
	}
	return &EndWatch{fd: fd}
}

// wait returns when the init let go of the FIFO, after timeout, or when ctx ends
// (within 100 ms). A FIFO reports a hang-up only if a writer came and went since
// it was opened, so callers re-read the meta after each wait.
func (e *EndWatch) wait(ctx context.Context, timeout time.Duration) {
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

func (e *EndWatch) close() {
	if e.fd >= 0 {
		unix.Close(e.fd)
	}
}

// List returns the sessions of a World (worldDir/sessions/*), oldest first.
// A dir whose meta.json is unreadable is listed as a Broken session
// (its transcript can still be read); one with no meta.json yet, a session
// being created, is skipped.
func List(worldDir string) ([]Meta, error) {
	entries, err := os.ReadDir(filepath.Join(worldDir, "sessions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var sessions []Meta
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(worldDir, "sessions", e.Name())
		meta, err := ReadMeta(dir)
		if errors.Is(err, ErrNotFound) {
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
	slices.SortFunc(sessions, func(a, b Meta) int { return strings.Compare(a.ID, b.ID) })
	return sessions, nil
}

// brokenSession stands for a session whose meta.json cannot be read: its id
// is its directory's name, and its start the directory's mtime.
func brokenSession(dir, id, world string, err error) Meta {
	m := Meta{
		ID: id, World: world, State: Broken, Attention: AttentionLost, ExitCode: -1,
		Error: fmt.Sprintf("%v; its transcript is still readable (strata logs %s %s); remove it with the World or by deleting %s", err, world, id, dir),
	}
	if st, serr := os.Stat(dir); serr == nil {
		m.StartedAt = st.ModTime().UTC()
	}
	return m
}

// MarkKilled records that strata is about to end the session on purpose.
func MarkKilled(dir string) {
	_ = os.WriteFile(filepath.Join(dir, KilledMarker), nil, 0o600)
}

// UnmarkKilled takes MarkKilled back when the signal could not be sent.
func UnmarkKilled(dir string) { _ = os.Remove(filepath.Join(dir, KilledMarker)) }

// KilledByStrata says strata ended the session on purpose.
func KilledByStrata(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, KilledMarker))
	return err == nil
}

// KilledMarker, in a session dir, says strata ended the session on
// purpose (K, kill, rollback --kill, rm --kill): not a failure.
const KilledMarker = "killed-by-strata"

// UserHZ is the kernel's clock tick rate as /proc reports times (USER_HZ,
// 100 on every Linux architecture strata runs on).
const UserHZ = 100
