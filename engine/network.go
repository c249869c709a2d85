package engine

// A World's network, by policy (docs/security.md, "Egress"):
//
//   - none: the session's own network namespace, loopback only;
//   - proxy: its own network namespace whose one way out is the bridge on
//     127.0.0.1:PORT (run by the session init, egress/bridge) to the World's
//     egress proxy, which allows the hosts on the World's allow-list;
//   - host: the host's network (today's behaviour, explicit).
//
// Who runs the proxy. The init is inside the session's namespaces and cannot
// dial the outside, and `strata exec` returns once the command runs, so the
// proxy is a process of its own: `strata __egress STATE_ROOT WORLD`, one per
// World, started by the first proxied session (ensureEgress) and ending by
// itself once the World has had no live session for egressIdle. It listens on
// worlds/W/egress/proxy.sock (the proxy) and control.sock (the allow-list is
// pushed there, so `strata allow` takes effect live) and appends every
// denied host to the activity log as an egress.denied event.
//
// Crashes. A session start holds worlds/W/egress/lock from its liveness check
// until the session is recorded, and the proxy takes the same lock before it
// decides to end, so it never ends under a starting session. A proxy that
// died leaves a socket nobody answers: the next proxied session finds it
// dead, starts a new proxy, which replaces the stale socket; sessions still
// running reach the new one, because their bridge dials the socket's path
// through a directory handle, not a handle on the old socket.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/egress"
	"github.com/stratahq/strata/engine/local"
	"github.com/stratahq/strata/engine/sandbox"
)

// EgressArg is the hidden command that runs a World's egress proxy:
// `strata __egress STATE_ROOT WORLD` (started by strata itself).
const EgressArg = "__egress"

// Files in a World's egress dir (worlds/W/egress).
const (
	egressDirName = "egress"
	egressSocket  = local.EgressSocket
	egressControl = "control.sock"
	egressLock    = "lock"
	// egressAllowFile holds the hosts allowed for this World by `strata
	// allow` (one allow-list entry a line): World metadata, removed with it.
	egressAllowFile = "allow"
	egressLogFile   = "egress.log"
	egressPIDFile   = "pid" // the running proxy's pid, for doctor and tests
)

// egressIdle is how long a World's proxy outlives its last session. A
// session started while it lives finds it running (a statx and a read of
// egress/pushed); one started later pays a proxy's start, a strata process
// and its sockets, as much again as the rest of a short exec. An idle proxy
// sleeps in accept but for a tick every egressIdle/4 that reads the
// meta.json of live sessions only. Passed to the proxy in egressIdleEnv.
var egressIdle = 30 * time.Second

// egressIdleEnv carries egressIdle to the proxy process (tests shorten it).
const egressIdleEnv = "STRATA_EGRESS_IDLE"

// EventEgressDenied: a World's egress proxy refused a host (once per host
// per proxy run); detail: host, port, allow_key.
const EventEgressDenied EventType = "egress.denied"

// EventEgressAllowed: a host was added to a World's allow-list (strata
// allow, the TUI's allow action); detail: host, live (a running proxy took it).
const EventEgressAllowed EventType = "egress.allowed"

// EgressDir is where a World's egress proxy keeps its sockets and allow-list.
func (e *Engine) EgressDir(name string) string {
	return filepath.Join(e.Paths.World(name), egressDirName)
}

// sessionNetwork is the network mode of a session of w at isolation iso:
// the session's request (--network, --no-network), else the World's own
// (new --network), else its config layer, else [boundary], else the level's default (tree: host, strict:
// none, sandbox: proxy).
func (e *Engine) sessionNetwork(w *World, iso Isolation, o ExecOptions) (boundary.Network, error) {
	n, err := boundary.ParseNetwork(string(o.Network))
	if err != nil {
		return "", fmt.Errorf("--network %w", err)
	}
	if o.NoNetwork {
		if n != "" && n != boundary.NetworkNone {
			return "", fmt.Errorf("--no-network and --network %s contradict each other: give one", n)
		}
		n = boundary.NetworkNone
	}
	if n == "" {
		n = boundary.Network(w.Network)
	}
	if n == "" {
		n = boundary.Network(e.Config.Boundary.Worlds[w.Name].Network)
	}
	if n == "" {
		n = boundary.Network(e.Config.Boundary.Network)
	}
	if n == "" {
		switch boundary.Level(iso) {
		case boundary.LevelTree:
			n = boundary.NetworkHost
		case boundary.LevelStrict:
			n = boundary.NetworkNone
		default:
			n = boundary.NetworkProxy
		}
	}
	return n, nil
}

// setWorldNetwork records `new --network` in the World.
func setWorldNetwork(w *World, n Network) error {
	if _, err := boundary.ParseNetwork(string(n)); err != nil {
		return fmt.Errorf("new world %q: network %w", w.Name, err)
	}
	w.Network = string(n)
	return nil
}

// worldAgent is the agent a World runs ("" for none): its "agent" label.
func worldAgent(w *World) string { return w.Labels["agent"] }

// EgressAllowlist is World name's effective allow-list: the defaults,
// [boundary] allow, [boundary.worlds.NAME] allow, the World's agent's hosts
// ([boundary.agents.AGENT] allow and the preset's egress) and the hosts
// allowed with `strata allow`.
func (e *Engine) EgressAllowlist(name string) (boundary.Allowlist, error) {
	w, err := e.World(name)
	if err != nil {
		return nil, err
	}
	bc := e.Config.Boundary
	entries := append(append([]string{}, boundary.DefaultAllow...), bc.Allow...)
	entries = append(entries, bc.Worlds[name].Allow...)
	if a := worldAgent(w); a != "" {
		entries = append(entries, bc.Agents[a].Allow...)
		if p, ok := agent.Builtins()[a]; ok {
			entries = append(entries, p.Egress...)
		}
	}
	extra, err := e.allowedHosts(name)
	if err != nil {
		return nil, err
	}
	entries = append(entries, extra...)
	list, err := boundary.ParseAllowlist(entries)
	if err != nil {
		return nil, fmt.Errorf("egress allow-list of world %q: %w", name, err)
	}
	return list, nil
}

// allowedHosts reads the hosts `strata allow` added to World name.
func (e *Engine) allowedHosts(name string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(e.EgressDir(name), egressAllowFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("world %q: read its allowed hosts: %w", name, err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, nil
}

// AllowResult says what AllowEgress did.
type AllowResult struct {
	Entry   string `json:"entry"`   // as stored
	Already bool   `json:"already"` // it was on the World's own list already
	// Live: a running proxy of the World took the new list; the World's
	// next request to the host goes through without restarting anything.
	Live bool `json:"live"`
}

// AllowEgress adds host (an allow-list entry: host, *.domain or host:port)
// to World name's allow-list, kept with the World, and hands the new list to
// the World's proxy if one runs.
func (e *Engine) AllowEgress(ctx context.Context, name, host string) (AllowResult, error) {
	w, err := e.World(name)
	if err != nil {
		return AllowResult{}, err
	}
	p, err := boundary.ParseHostPattern(host)
	if err != nil {
		return AllowResult{}, fmt.Errorf("allow in world %q: %w", name, err)
	}
	res := AllowResult{Entry: p.String()}
	dir := e.EgressDir(w.Name)
	unlock, err := lockEgress(dir)
	if err != nil {
		return res, fmt.Errorf("allow in world %q: %w", name, err)
	}
	defer unlock()
	hosts, err := e.allowedHosts(name)
	if err != nil {
		return res, err
	}
	if slices.Contains(hosts, res.Entry) {
		res.Already = true
	} else {
		hosts = append(hosts, res.Entry)
		data := "# hosts allowed for this World by strata allow, one allow-list entry a line\n" + strings.Join(hosts, "\n") + "\n"
		if err := writeFileAtomic(filepath.Join(dir, egressAllowFile), []byte(data)); err != nil {
			return res, fmt.Errorf("allow in world %q: %w", name, err)
		}
	}
	list, err := e.EgressAllowlist(name)
	if err != nil {
		return res, err
	}
	res.Live = pushAllow(ctx, dir, list) == nil
	e.activity(ctx, Event{Type: EventEgressAllowed, World: name, Detail: map[string]any{"host": res.Entry, "live": res.Live}})
	return res, nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// lockEgress creates the egress dir and holds its lock until the returned
// func is called.
func lockEgress(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("egress dir: %w", err)
	}
	fd, err := unix.Open(filepath.Join(dir, egressLock), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("egress lock: %w", err)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("egress lock: %w", err)
	}
	return func() { unix.Close(fd) }, nil
}

// dialIn dials the unix socket name in dir through a handle on dir, so a
// long state root path does not hit the 108-byte limit of socket addresses.
func dialIn(ctx context.Context, dir, name string) (net.Conn, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var d net.Dialer
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd)+"/"+name)
}

// controlClient talks to a World's proxy on its control socket.
func controlClient(dir string) *http.Client {
	return &http.Client{
		Timeout: 3 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialIn(ctx, dir, egressControl)
		}},
	}
}

// allowMessage is the control socket's POST /allow body.
type allowMessage struct {
	Allow []string `json:"allow"`
}

// pushAllow hands list to the World's running proxy; an error means none
// answers. It keeps egressPushedFile true: forgotten before, recorded after.
func pushAllow(ctx context.Context, dir string, list boundary.Allowlist) error {
	_ = os.Remove(filepath.Join(dir, egressPushedFile))
	body, _ := json.Marshal(allowMessage{Allow: list.Strings()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://egress/allow", bytes.NewReader(body))
	if err != nil {
		return err
	}
	c := controlClient(dir)
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("egress proxy: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	markEgressPushed(dir, list.Strings())
	return nil
}

// ensureEgress makes sure World w's egress proxy runs with its current
// allow-list, starting one (or replacing a dead one). It returns holding the
// egress lock: release it once the session is recorded, so the proxy cannot
// decide the World is idle in between.
func (e *Engine) ensureEgress(ctx context.Context, w *World) (release func(), err error) {
	dir := e.EgressDir(w.Name)
	unlock, err := lockEgress(dir)
	if err != nil {
		return nil, fmt.Errorf("egress proxy of world %q: %w", w.Name, err)
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	Trace("egress: locked")
	list, err := e.EgressAllowlist(w.Name)
	if err != nil {
		return nil, err
	}
	Trace("egress: allow-list computed")
	if egressPushed(dir, list.Strings()) {
		Trace("egress: the running proxy has the allow-list")
		return unlock, nil
	}
	if pushAllow(ctx, dir, list) == nil {
		Trace("egress: allow-list pushed to the running proxy")
		return unlock, nil
	}
	if err := e.startEgress(ctx, w.Name, dir); err != nil {
		return nil, fmt.Errorf("egress proxy of world %q: %w", w.Name, err)
	}
	if err := pushAllow(ctx, dir, list); err != nil {
		return nil, fmt.Errorf("egress proxy of world %q: started but does not answer: %w", w.Name, err)
	}
	return unlock, nil
}

// startEgress starts `strata __egress ROOT WORLD` in its own session and
// waits until it listens.
func (e *Engine) startEgress(ctx context.Context, name, dir string) error {
	exe := e.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("find strata binary: %w", err)
		}
	}
	logf, err := os.OpenFile(filepath.Join(dir, egressLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if fi, err := logf.Stat(); err == nil && fi.Size() > 1<<20 {
		_ = logf.Truncate(0)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readyR.Close()
	cmd := exec.Command(exe, EgressArg, e.Paths.Root, name)
	cmd.Dir = dir
	cmd.Env = []string{defaultPath, egressIdleEnv + "=" + egressIdle.String()}
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return fmt.Errorf("start %s %s: %w", exe, EgressArg, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(readyR).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.TrimSpace(s) == "ready" {
			return nil
		}
		err := <-exited
		return fmt.Errorf("the proxy ended (%v) before it listened: %s", err, egressLogTail(dir))
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		return fmt.Errorf("the proxy did not listen within 10s: %s", egressLogTail(dir))
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return ctx.Err()
	}
}

func egressLogTail(dir string) string {
	data, _ := os.ReadFile(filepath.Join(dir, egressLogFile))
	data = bytes.TrimSpace(data)
	if len(data) > 1000 {
		data = data[len(data)-1000:]
	}
	if len(data) == 0 {
		return "no log (" + filepath.Join(dir, egressLogFile) + ")"
	}
	return string(data)
}

// EgressMain is `strata __egress STATE_ROOT WORLD`: World's egress proxy,
// in the World's egress dir, until the World has been idle for egressIdle
// or is removed. It returns the process exit code.
func EgressMain(args []string) int {
	// Long-lived: it must not hold what its starter leaked (sandbox.CloseInherited).
	sandbox.CloseInherited([]int{3})
	if len(args) > 0 && args[0] == EgressArg {
		args = args[1:]
	}
	if len(args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: strata %s STATE_ROOT WORLD (started by strata itself)\n", EgressArg)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if d, err := time.ParseDuration(os.Getenv(egressIdleEnv)); err == nil && d >= 100*time.Millisecond {
		egressIdle = d
	}
	e := &Engine{Paths: Paths{Root: args[0]}, Config: &Config{}, Log: log}
	var ready io.WriteCloser
	if f := os.NewFile(3, "ready"); f != nil {
		unix.CloseOnExec(3)
		ready = f
	}
	if err := e.serveEgress(context.Background(), args[1], ready); err != nil {
		log.Error("egress proxy", "world", args[1], "err", err)
		return 1
	}
	return 0
}

// serveEgress runs World name's proxy (see EgressMain); ready, when set, is
// told "ready" once both sockets listen.
func (e *Engine) serveEgress(ctx context.Context, name string, ready io.WriteCloser) error {
	dir := e.EgressDir(name)
	// Listen on names relative to the dir: a state root's path may be longer
	// than a socket address holds.
	if err := os.Chdir(dir); err != nil {
		return err
	}
	pl, err := egress.ListenUnix(egressSocket)
	if err != nil {
		return err
	}
	cl, err := egress.ListenUnix(egressControl)
	if err != nil {
		pl.Close()
		return err
	}
	key := "boundary.worlds." + name + ".allow"
	p := egress.New(egress.Options{
		World: name, AllowKey: key, Log: e.Log,
		OnDeny: func(d egress.Denial) {
			e.activity(ctx, Event{Time: d.Time, Type: EventEgressDenied, World: name, Detail: map[string]any{
				"host": d.Host, "port": d.Port, "allow_key": key,
			}})
		},
	})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /allow", func(w http.ResponseWriter, r *http.Request) {
		var m allowMessage
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		list, err := boundary.ParseAllowlist(m.Allow)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.SetAllow(list)
		fmt.Fprintf(w, "%d hosts\n", len(list))
	})
	ctl := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.Serve(pl) }()
	go func() { _ = ctl.Serve(cl) }()
	defer func() {
		_ = p.Close()
		_ = ctl.Close()
	}()
	_ = writeFileAtomic(egressPIDFile, []byte(strconv.Itoa(os.Getpid())+"\n"))
	e.Log.Info("egress proxy listening", "world", name, "pid", os.Getpid())
	if ready != nil {
		_, _ = io.WriteString(ready, "ready\n")
		_ = ready.Close()
	}
	tick := time.NewTicker(egressIdle / 4)
	defer tick.Stop()
	var idleSince time.Time
	ended := map[string]bool{} // sessions seen ended: not read again
	for range tick.C {
		if _, err := os.Stat(e.Paths.World(name)); err != nil {
			e.Log.Info("egress proxy: the world is gone", "world", name)
			return nil
		}
		if e.worldLiveSkipping(name, ended) {
			idleSince = time.Time{}
			continue
		}
		if idleSince.IsZero() {
			idleSince = time.Now()
		}
		if time.Since(idleSince) < egressIdle {
			continue
		}
		fd, err := lockDirFileNB(filepath.Join(dir, egressLock))
		if err != nil {
			continue // a session is starting
		}
		if e.worldLiveSkipping(name, ended) {
			unix.Close(fd)
			idleSince = time.Time{}
			continue
		}
		// Gone before the lock is released: a session starting next finds
		// no socket and starts a proxy of its own.
		_ = os.Remove(egressSocket)
		_ = os.Remove(egressControl)
		_ = os.Remove(egressPIDFile)
		e.Log.Info("egress proxy: no session left", "world", name, "stats", p.Stats())
		return nil // the lock goes with the process
	}
	return nil
}

func lockDirFileNB(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return -1, err
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// worldLive tells whether World name has a session starting or running.
func (e *Engine) worldLive(name string) bool {
	ss, err := ListSessions(e.Paths.World(name))
	if err != nil {
		return true // unsure: keep serving
	}
	for _, s := range ss {
		if !s.State.Ended() {
			return true
		}
	}
	return false
}

// prepareNetwork resolves a local session's network mode and, for proxy,
// makes sure the World's egress proxy runs. release (never nil) is called
// once the session is recorded (see ensureEgress).
func (e *Engine) prepareNetwork(ctx context.Context, w *World, iso Isolation, o ExecOptions, spec *SessionSpec) (release func(), err error) {
	n, err := e.sessionNetwork(w, iso, o)
	if err != nil {
		return func() {}, fmt.Errorf("exec in world %q: %w", w.Name, err)
	}
	spec.Network, spec.NoNetwork = n, n == boundary.NetworkNone
	if n != boundary.NetworkProxy {
		return func() {}, nil
	}
	spec.EgressDir = e.EgressDir(w.Name)
	release, err = e.ensureEgress(ctx, w)
	if err != nil {
		return func() {}, fmt.Errorf("exec in world %q: network proxy: %w (or run it with --network none or host)", w.Name, err)
	}
	return release, nil
}

// Network is a session's network mode (none, proxy, host).
type Network = boundary.Network

// NetworkNames returns the network modes, for usage text and completion.
func NetworkNames() []string {
	return []string{string(boundary.NetworkNone), string(boundary.NetworkProxy), string(boundary.NetworkHost)}
}
