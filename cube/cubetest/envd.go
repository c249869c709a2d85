package cubetest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/cube"
)

// serveProxy is CubeProxy: it routes on the Host header to a sandbox's envd.
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request) {
	port, id, ok := idFromHost(r.Host, s.opts.Domain)
	if !ok {
		proxyError(w, http.StatusBadRequest, "310400")
		return
	}
	s.mu.Lock()
	sb := s.sandboxes[id]
	s.mu.Unlock()
	switch {
	case sb == nil:
		// CubeProxy finds no routing entry (HostIP) for a sandbox that is
		// gone or never was: 500 with retcode 310507, whatever the reason.
		proxyError(w, http.StatusInternalServerError, "310507")
		return
	case port != cube.EnvdPort:
		// The sandbox has no host port mapping for that container port.
		proxyError(w, http.StatusInternalServerError, "310507")
		return
	}
	if sb.envdToken != "" && (r.Header.Get("X-Access-Token") != sb.envdToken ||
		r.Header.Get("E2B-Traffic-Access-Token") != sb.trafficToken) {
		http.Error(w, "invalid access token", http.StatusUnauthorized)
		return
	}
	sb.mu.Lock()
	paused := sb.state != cube.StateRunning
	sb.mu.Unlock()
	if paused && (!sb.autoResume || !sb.resume()) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("sandbox %s is paused", id), http.StatusServiceUnavailable)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/process.Process/Start":
		s.startProcess(w, r, sb)
	case r.Method == http.MethodPost && r.URL.Path == "/process.Process/SendInput":
		s.sendInput(w, r, sb)
	case r.Method == http.MethodPost && r.URL.Path == "/process.Process/Update":
		s.updateProcess(w, r, sb)
	case r.Method == http.MethodPost && r.URL.Path == "/process.Process/Connect":
		s.connectProcess(w, r, sb)
	case r.Method == http.MethodPost && r.URL.Path == "/process.Process/CloseStdin":
		s.closeStdinRPC(w, r, sb)
	case r.Method == http.MethodPost && r.URL.Path == "/process.Process/List":
		s.listProcesses(w, r, sb)
	case r.Method == http.MethodPost && r.URL.Path == "/process.Process/SendSignal":
		s.sendSignal(w, r, sb)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/"):
		switch method := strings.TrimPrefix(r.URL.Path, "/filesystem.Filesystem/"); method {
		case "Stat", "ListDir", "MakeDir", "Move", "Remove":
			s.filesystemRPC(w, r, sb, method)
		default:
			writeConnectError(w, http.StatusNotFound, "unimplemented", "filesystem."+method+" is not implemented")
		}
	case r.Method == http.MethodGet && r.URL.Path == "/files":
		s.readFile(w, r, sb)
	case r.Method == http.MethodPost && r.URL.Path == "/files":
		s.writeFile(w, r, sb)
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// proxyError is an error CubeProxy (nginx) answers itself: its stock HTML
// page and the X-Cube-Retcode header saying why.
func proxyError(w http.ResponseWriter, status int, retcode string) {
	w.Header().Set("X-Cube-Retcode", retcode)
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(status)
	text := http.StatusText(status)
	_, _ = fmt.Fprintf(w, "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n<hr><center>openresty</center>\r\n</body>\r\n</html>\r\n", status, text, status, text)
}

// processSpec is the "process" of a Start request.
type processSpec struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  string            `json:"cwd"`
}

// ptySpec is envd's PTY message.
type ptySpec struct {
	Size struct {
		Cols uint32 `json:"cols"`
		Rows uint32 `json:"rows"`
	} `json:"size"`
}

// baseEnv is what envd gives every process before create-time and
// per-process variables.
var baseEnv = map[string]string{
	"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME": "/root",
	"USER": "root",
}

// start runs a command in the sandbox's namespace, with its output on two
// pipes, or, with a pty, on a terminal whose master is returned as stdout
// (stderr is then nil) and registered for SendInput and Update by pid.
func (sb *sandbox) start(spec processSpec, pty *ptySpec, withStdin bool) (cmd *exec.Cmd, stdout, stderr *os.File, err error) {
	env := map[string]string{}
	for _, m := range []map[string]string{baseEnv, sb.envVars, spec.Envs} {
		for k, v := range m {
			env[k] = v
		}
	}
	envList := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		envList = append(envList, k+"="+env[k])
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = env["HOME"]
	}
	if pty != nil {
		return sb.startOnTerminal(spec, pty, envList, cwd, env["PATH"])
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return nil, nil, nil, err
	}
	defer func() { _ = outW.Close() }()
	defer func() { _ = errW.Close() }()
	// envd gives a process a stdin pipe unless asked not to ("stdin":
	// false): a command reading it waits for SendInput or CloseStdin.
	var inR, inW *os.File
	if withStdin {
		if inR, inW, err = os.Pipe(); err != nil {
			_ = outR.Close()
			_ = errR.Close()
			return nil, nil, nil, err
		}
		defer func() { _ = inR.Close() }()
	}

	sb.mu.Lock()
	g := sb.guest
	sb.mu.Unlock()
	if g == nil {
		err = errGuestGone
	} else {
		err = g.run(func() error {
			path, err := lookPath(spec.Cmd, env["PATH"])
			if err != nil {
				return err
			}
			cmd = &exec.Cmd{
				Path: path, Args: append([]string{spec.Cmd}, spec.Args...), Env: envList, Dir: cwd,
				Stdout: outW, Stderr: errW,
				// Own process group, so kill and pause reach its children;
				// killed with the namespace thread.
				SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
			}
			if inR != nil {
				cmd.Stdin = inR
			}
			return cmd.Start()
		})
	}
	if err != nil {
		_ = outR.Close()
		_ = errR.Close()
		if inW != nil {
			_ = inW.Close()
		}
		return nil, nil, nil, err
	}
	if inW != nil {
		sb.mu.Lock()
		if sb.stdins == nil {
			sb.stdins = map[int]*os.File{}
		}
		sb.stdins[cmd.Process.Pid] = inW
		sb.mu.Unlock()
	}
	return cmd, outR, errR, nil
}

// closeStdin closes and forgets a process's stdin pipe; false if it has none.
func (sb *sandbox) closeStdin(pid int) bool {
	sb.mu.Lock()
	f := sb.stdins[pid]
	delete(sb.stdins, pid)
	sb.mu.Unlock()
	if f != nil {
		_ = f.Close()
	}
	return f != nil
}

// startOnTerminal is start with a PTY: the command leads a session of its
// own with the terminal as its controlling tty and stdio.
func (sb *sandbox) startOnTerminal(spec processSpec, pty *ptySpec, envList []string, cwd, pathEnv string) (cmd *exec.Cmd, master, _ *os.File, err error) {
	if pty.Size.Rows == 0 || pty.Size.Cols == 0 || pty.Size.Rows > 0xffff || pty.Size.Cols > 0xffff {
		return nil, nil, nil, fmt.Errorf("invalid pty size %dx%d", pty.Size.Cols, pty.Size.Rows)
	}
	sb.mu.Lock()
	g := sb.guest
	sb.mu.Unlock()
	if g == nil {
		return nil, nil, nil, errGuestGone
	}
	var slave *os.File
	err = g.run(func() error {
		path, err := lookPath(spec.Cmd, pathEnv)
		if err != nil {
			return err
		}
		if master, slave, err = openTerminal(uint16(pty.Size.Rows), uint16(pty.Size.Cols)); err != nil {
			return err
		}
		cmd = &exec.Cmd{
			Path: path, Args: append([]string{spec.Cmd}, spec.Args...), Env: envList, Dir: cwd,
			Stdin: slave, Stdout: slave, Stderr: slave,
			SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL},
		}
		return cmd.Start()
	})
	if slave != nil {
		_ = slave.Close()
	}
	if err != nil {
		if master != nil {
			_ = master.Close()
		}
		return nil, nil, nil, err
	}
	sb.mu.Lock()
	if sb.terminals == nil {
		sb.terminals = map[int]*os.File{}
	}
	sb.terminals[cmd.Process.Pid] = master
	sb.mu.Unlock()
	return cmd, master, nil, nil
}

// openTerminal opens a PTY pair; the master is non-blocking so its reads
// go through the runtime poller and end when it is closed.
func openTerminal(rows, cols uint16) (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		_ = unix.Close(mfd)
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	if err := unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		_ = unix.Close(mfd)
		return nil, nil, fmt.Errorf("size pty: %w", err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		_ = unix.Close(mfd)
		return nil, nil, fmt.Errorf("open pty slave: %w", errno)
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(sfd, "pty-slave"), nil
}

// terminal returns the PTY master of a running process, or answers
// not_found and returns nil.
func (sb *sandbox) terminal(w http.ResponseWriter, pid int) *os.File {
	sb.mu.Lock()
	master := sb.terminals[pid]
	sb.mu.Unlock()
	if master == nil {
		writeConnectError(w, http.StatusNotFound, "not_found", fmt.Sprintf("process with pid %d not found", pid))
	}
	return master
}

func (sb *sandbox) forgetTerminal(pid int) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	delete(sb.terminals, pid)
}

// writeConnectError writes a Connect unary error: {"code": name, "message"}.
func writeConnectError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}

// readUnary reads a Connect unary request body (application/json).
func readUnary(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeConnectError(w, http.StatusUnsupportedMediaType, "invalid_argument", "unsupported content type "+r.Header.Get("Content-Type"))
		return false
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(v); err != nil {
		writeConnectError(w, http.StatusBadRequest, "invalid_argument", "malformed request: "+err.Error())
		return false
	}
	return true
}

// sendInput is envd's process.Process/SendInput for PTY input.
func (s *Server) sendInput(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Process struct {
			PID int `json:"pid"`
		} `json:"process"`
		Input struct {
			Stdin []byte `json:"stdin"`
			PTY   []byte `json:"pty"`
		} `json:"input"`
	}
	if !readUnary(w, r, &req) {
		return
	}
	if req.Input.PTY == nil && req.Input.Stdin != nil {
		sb.mu.Lock()
		in, known := sb.stdins[req.Process.PID], sb.procs[req.Process.PID]
		sb.mu.Unlock()
		switch {
		case in != nil:
			if _, err := in.Write(req.Input.Stdin); err != nil {
				writeConnectError(w, http.StatusInternalServerError, "internal", "write to stdin: "+err.Error())
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{})
		case known.config.Cmd != "":
			writeConnectError(w, http.StatusBadRequest, "failed_precondition", "stdin not enabled or closed for this process")
		default:
			writeConnectError(w, http.StatusNotFound, "not_found", fmt.Sprintf("process with pid %d not found", req.Process.PID))
		}
		return
	}
	master := sb.terminal(w, req.Process.PID)
	if master == nil {
		return
	}
	if _, err := master.Write(req.Input.PTY); err != nil {
		writeConnectError(w, http.StatusInternalServerError, "internal", "write to pty: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// closeStdinRPC is envd's process.Process/CloseStdin.
func (s *Server) closeStdinRPC(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Process struct {
			PID int `json:"pid"`
		} `json:"process"`
	}
	if !readUnary(w, r, &req) {
		return
	}
	if !sb.closeStdin(req.Process.PID) {
		writeConnectError(w, http.StatusNotFound, "not_found", fmt.Sprintf("process with pid %d has no open stdin", req.Process.PID))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// listProcesses is envd's process.Process/List.
func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct{}
	if !readUnary(w, r, &req) {
		return
	}
	sb.mu.Lock()
	pids := make([]int, 0, len(sb.procs))
	for pid := range sb.procs {
		pids = append(pids, pid)
	}
	infos := make([]map[string]any, 0, len(pids))
	sort.Ints(pids)
	for _, pid := range pids {
		p := sb.procs[pid]
		info := map[string]any{"config": p.config, "pid": pid}
		if p.tag != "" {
			info["tag"] = p.tag
		}
		infos = append(infos, info)
	}
	sb.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"processes": infos})
}

// sendSignal is envd's process.Process/SendSignal: SIGNAL_SIGTERM or
// SIGNAL_SIGKILL (the enum's names, or its numbers 15 and 9) to the
// process's group.
func (s *Server) sendSignal(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Process struct {
			PID int `json:"pid"`
		} `json:"process"`
		Signal json.RawMessage `json:"signal"`
	}
	if !readUnary(w, r, &req) {
		return
	}
	var sig syscall.Signal
	switch string(req.Signal) {
	case `"SIGNAL_SIGTERM"`, "15":
		sig = syscall.SIGTERM
	case `"SIGNAL_SIGKILL"`, "9":
		sig = syscall.SIGKILL
	default:
		writeConnectError(w, http.StatusBadRequest, "invalid_argument", "signal: want SIGNAL_SIGTERM or SIGNAL_SIGKILL, have "+string(req.Signal))
		return
	}
	sb.mu.Lock()
	_, known := sb.procs[req.Process.PID]
	sb.mu.Unlock()
	if !known {
		writeConnectError(w, http.StatusNotFound, "not_found", fmt.Sprintf("process with pid %d not found", req.Process.PID))
		return
	}
	if err := syscall.Kill(-req.Process.PID, sig); err != nil {
		writeConnectError(w, http.StatusInternalServerError, "internal", "signal: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// updateProcess is envd's process.Process/Update: a PTY resize.
func (s *Server) updateProcess(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Process struct {
			PID int `json:"pid"`
		} `json:"process"`
		PTY *ptySpec `json:"pty"`
	}
	if !readUnary(w, r, &req) {
		return
	}
	master := sb.terminal(w, req.Process.PID)
	switch {
	case master == nil:
		return
	case req.PTY == nil || req.PTY.Size.Rows == 0 || req.PTY.Size.Cols == 0 || req.PTY.Size.Rows > 0xffff || req.PTY.Size.Cols > 0xffff:
		writeConnectError(w, http.StatusBadRequest, "invalid_argument", "pty.size needs positive cols and rows")
		return
	}
	rc, err := master.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(req.PTY.Size.Rows), Col: uint16(req.PTY.Size.Cols)})
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		writeConnectError(w, http.StatusInternalServerError, "internal", "resize pty: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// envelopeWriter writes Connect envelopes and flushes each one, counting
// them for DropStreamAfter.
type envelopeWriter struct {
	w       http.ResponseWriter
	ctl     *http.ResponseController
	written int
}

func (e *envelopeWriter) send(flags byte, v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return err
	}
	head := make([]byte, 5, 5+len(payload))
	head[0] = flags
	binary.BigEndian.PutUint32(head[1:], uint32(len(payload)))
	if _, err := e.w.Write(append(head, payload...)); err != nil {
		return err
	}
	e.written++
	return e.ctl.Flush()
}

type outputChunk struct {
	stderr bool
	data   []byte
}

// proc is a process envd started. It lives on its own: a stream that
// drops leaves it running, as under envd, and Connect attaches new streams
// to its output. Output while no stream is attached is not kept.
type proc struct {
	pid  int
	mu   sync.Mutex
	subs map[*procStream]bool
	end  map[string]any // the end event, once ended
	done chan struct{}  // closed when it has ended
}

// procStream is one attached exec stream.
type procStream struct {
	events chan map[string]any
	gone   chan struct{} // closed when the stream's handler returns
}

func (p *proc) attach() *procStream {
	st := &procStream{events: make(chan map[string]any, 64), gone: make(chan struct{})}
	p.mu.Lock()
	p.subs[st] = true
	p.mu.Unlock()
	return st
}

func (p *proc) detach(st *procStream) {
	p.mu.Lock()
	delete(p.subs, st)
	p.mu.Unlock()
	close(st.gone)
}

// publish hands an event to every attached stream (waiting for slow ones,
// skipping those that went away).
func (p *proc) publish(ev map[string]any) {
	p.mu.Lock()
	subs := make([]*procStream, 0, len(p.subs))
	for st := range p.subs {
		subs = append(subs, st)
	}
	p.mu.Unlock()
	for _, st := range subs {
		select {
		case st.events <- ev:
		case <-st.gone:
		}
	}
}

// run supervises the process until it ends: output to the attached
// streams, the request's timeout enforced (envd ends a process whose
// Connect-Timeout-Ms passes, whether or not its stream is still there).
func (p *proc) run(sb *sandbox, cmd *exec.Cmd, stdout, stderr *os.File, isPTY bool, deadline time.Duration, hold <-chan struct{}) {
	chunks := make(chan outputChunk, 16)
	var pumps sync.WaitGroup
	pump := func(f *os.File, isStderr bool) {
		defer pumps.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				chunks <- outputChunk{stderr: isStderr, data: append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				return
			}
		}
	}
	if stderr != nil {
		pumps.Add(2)
		go pump(stdout, false)
		go pump(stderr, true)
	} else {
		pumps.Add(1)
		go pump(stdout, false) // the terminal: EIO once no process holds it
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait() //nolint:errcheck // ProcessState says how it ended
		close(exited)
	}()
	pumpsDone := make(chan struct{})
	go func() { pumps.Wait(); close(pumpsDone) }()
	sendChunk := func(c outputChunk) {
		if hold != nil {
			<-hold
		}
		key := "stdout"
		switch {
		case isPTY:
			key = "pty"
		case c.stderr:
			key = "stderr"
		}
		p.publish(map[string]any{"event": map[string]any{"data": map[string][]byte{key: c.data}}})
	}
	var timeout <-chan time.Time
	if deadline > 0 {
		t := time.NewTimer(deadline)
		defer t.Stop()
		timeout = t.C
	}
	// Stream output until the pipes close. Background children that keep
	// them open after the command exits get a short grace, then the pipes
	// are closed on our side (the children live on, as under envd).
	var grace <-chan time.Time
	exitedC := exited
	for streaming := true; streaming; {
		select {
		case c := <-chunks:
			sendChunk(c)
		case <-pumpsDone:
			streaming = false
		case <-exitedC:
			exitedC = nil
			grace = time.After(200 * time.Millisecond)
		case <-grace:
			grace = nil
			_ = stdout.Close()
			if stderr != nil {
				_ = stderr.Close()
			}
		case <-timeout:
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			timeout = nil
		}
	}
	for len(chunks) > 0 {
		sendChunk(<-chunks)
	}
	for waiting := true; waiting; {
		select {
		case <-exited:
			waiting = false
		case <-timeout:
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			timeout = nil
		}
	}
	_ = stdout.Close()
	if stderr != nil {
		_ = stderr.Close()
	}
	// An ended process is gone before its end is reported: input, signals
	// and Connect after the end event get not_found, as from envd.
	sb.closeStdin(p.pid)
	sb.mu.Lock()
	delete(sb.procs, p.pid)
	sb.mu.Unlock()
	if isPTY {
		sb.forgetTerminal(p.pid)
	}
	state := cmd.ProcessState
	end := map[string]any{"status": state.String()}
	if code := state.ExitCode(); code != 0 {
		end["exitCode"] = code
	}
	if state.Exited() {
		end["exited"] = true
	}
	ev := map[string]any{"event": map[string]any{"end": end}}
	p.mu.Lock()
	p.end = ev
	p.mu.Unlock()
	p.publish(ev)
	close(p.done)
}

// readStartEnvelope reads the one request message of a server stream.
func readStartEnvelope(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/connect+json" {
		http.Error(w, "unsupported content type "+r.Header.Get("Content-Type"), http.StatusUnsupportedMediaType)
		return nil, false
	}
	var head [5]byte
	if _, err := io.ReadFull(r.Body, head[:]); err != nil || head[0] != 0 {
		http.Error(w, "malformed request envelope", http.StatusBadRequest)
		return nil, false
	}
	payload := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(r.Body, payload); err != nil {
		http.Error(w, "truncated request envelope", http.StatusBadRequest)
		return nil, false
	}
	return payload, true
}

type endErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// startProcess is envd's process.Process/Start: a Connect server stream of
// start, data, keepalive and end events, then the end-of-stream message.
func (s *Server) startProcess(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	payload, ok := readStartEnvelope(w, r)
	if !ok {
		return
	}
	var req struct {
		Process *processSpec `json:"process"`
		PTY     *ptySpec     `json:"pty"`
		Tag     string       `json:"tag"`
		// Stdin defaults to true in envd, for old SDKs.
		Stdin *bool `json:"stdin"`
	}
	if err := json.Unmarshal(payload, &req); err != nil || req.Process == nil || req.Process.Cmd == "" {
		http.Error(w, "request needs process.cmd", http.StatusBadRequest)
		return
	}
	var deadline time.Duration
	if v := r.Header.Get("Connect-Timeout-Ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			http.Error(w, "invalid Connect-Timeout-Ms", http.StatusBadRequest)
			return
		}
		deadline = time.Duration(ms) * time.Millisecond
	}

	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	out := &envelopeWriter{w: w, ctl: http.NewResponseController(w)}
	withStdin := req.PTY == nil && (req.Stdin == nil || *req.Stdin)
	cmd, stdout, stderr, err := sb.start(*req.Process, req.PTY, withStdin)
	if err != nil {
		_ = out.send(0x02, map[string]any{"error": endErr{Code: "internal", Message: err.Error()}})
		return
	}
	p := &proc{pid: cmd.Process.Pid, subs: map[*procStream]bool{}, done: make(chan struct{})}
	st := p.attach()
	sb.mu.Lock()
	if sb.procs == nil {
		sb.procs = map[int]procInfo{}
	}
	sb.procs[p.pid] = procInfo{config: *req.Process, tag: req.Tag, proc: p}
	sb.mu.Unlock()
	var hold <-chan struct{}
	if s.opts.HoldOutput != nil {
		hold = s.opts.HoldOutput(req.Tag)
	}
	go p.run(sb, cmd, stdout, stderr, req.PTY != nil, deadline, hold)
	s.stream(w, r, out, p, st)
}

// connectProcess is envd's process.Process/Connect: a new stream of a
// running process's events (start with its pid, then what it does next).
func (s *Server) connectProcess(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	payload, ok := readStartEnvelope(w, r)
	if !ok {
		return
	}
	var req struct {
		Process struct {
			PID int    `json:"pid"`
			Tag string `json:"tag"`
		} `json:"process"`
	}
	if err := json.Unmarshal(payload, &req); err != nil {
		http.Error(w, "malformed request", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	out := &envelopeWriter{w: w, ctl: http.NewResponseController(w)}
	sb.mu.Lock()
	var p *proc
	for pid, info := range sb.procs {
		if (req.Process.PID != 0 && pid == req.Process.PID) || (req.Process.PID == 0 && req.Process.Tag != "" && info.tag == req.Process.Tag) {
			p = info.proc
		}
	}
	sb.mu.Unlock()
	if p == nil {
		_ = out.send(0x02, map[string]any{"error": endErr{Code: "not_found", Message: fmt.Sprintf("process with pid %d not found", req.Process.PID)}})
		return
	}
	st := p.attach()
	p.mu.Lock()
	ended := p.end
	p.mu.Unlock()
	if ended != nil {
		p.detach(st)
		_ = out.send(0x02, map[string]any{"error": endErr{Code: "not_found", Message: fmt.Sprintf("process with pid %d not found", p.pid)}})
		return
	}
	s.stream(w, r, out, p, st)
}

// stream writes a process's events to one attached stream until its end
// event, the client going away, or an injected drop; only the end event
// ends the process's story, the rest leave it running.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, out *envelopeWriter, p *proc, st *procStream) {
	defer p.detach(st)
	fault := faultOf(r)
	dropAfter := 0
	if fault != nil {
		dropAfter = fault.DropStreamAfter
	}
	send := func(v any) {
		if err := out.send(0, v); err != nil {
			panic(http.ErrAbortHandler) // the client went away
		}
		if dropAfter > 0 && out.written >= dropAfter {
			panic(http.ErrAbortHandler)
		}
	}
	send(map[string]any{"event": map[string]any{"start": map[string]int{"pid": p.pid}}})
	keepalive := time.NewTicker(s.opts.KeepaliveEvery)
	defer keepalive.Stop()
	for {
		select {
		case ev := <-st.events:
			send(ev)
			if e, _ := ev["event"].(map[string]any); e != nil {
				if _, isEnd := e["end"]; isEnd {
					_ = out.send(0x02, map[string]any{})
					return
				}
			}
		case <-keepalive.C:
			send(map[string]any{"event": map[string]any{"keepalive": map[string]any{}}})
		case <-r.Context().Done():
			return
		}
	}
}

// resolve makes a request path absolute; relative paths are from HOME.
func resolve(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(baseEnv["HOME"], p)
	}
	return filepath.Clean(p)
}

func fileErrorStatus(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EROFS),
		errors.Is(err, fs.ErrPermission):
		return http.StatusBadRequest
	case errors.Is(err, errGuestGone):
		return http.StatusGone
	}
	return http.StatusInternalServerError
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, http.StatusBadRequest, "path is required")
		return
	}
	p = resolve(p)
	var f *os.File
	err := sb.inGuest(func() error {
		var err error
		if f, err = os.Open(p); err != nil {
			return err
		}
		st, err := f.Stat()
		if err == nil && st.IsDir() {
			_ = f.Close()
			return fmt.Errorf("%s: %w", p, syscall.EISDIR)
		}
		return err
	})
	if err != nil {
		writeError(w, fileErrorStatus(err), err.Error())
		return
	}
	defer func() { _ = f.Close() }()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, http.StatusBadRequest, "path is required")
		return
	}
	p = resolve(p)
	var body io.Reader = r.Body
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		file, _, err := r.FormFile("file")
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("multipart upload needs a file field: %v", err))
			return
		}
		defer func() { _ = file.Close() }()
		body = file
	}
	var f *os.File
	err := sb.inGuest(func() error {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		var err error
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		return err
	})
	if err != nil {
		writeError(w, fileErrorStatus(err), err.Error())
		return
	}
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		writeError(w, fileErrorStatus(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, []map[string]string{{"name": filepath.Base(p), "type": "file", "path": p}})
}

// inGuest runs fn on the sandbox's namespace thread.
func (sb *sandbox) inGuest(fn func() error) error {
	sb.mu.Lock()
	g := sb.guest
	sb.mu.Unlock()
	if g == nil {
		return errGuestGone
	}
	return g.run(fn)
}
