package cube

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvdPort is the port envd listens on inside every sandbox.
const EnvdPort = 49983

// envdBasicAuth is base64("root:"): envd runs commands as the user named
// in Basic auth.
const envdBasicAuth = "Basic cm9vdDo="

// Connect envelope flags.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
)

// maxEnvelope bounds one Connect message; envd sends output in small chunks.
const maxEnvelope = 16 << 20

// ExecRequest is one command to run in a sandbox.
type ExecRequest struct {
	Cmd  string // program; envd does not use a shell unless asked, e.g. Cmd "/bin/bash", Args {"-l", "-c", script}
	Args []string
	Envs map[string]string
	Cwd  string
	// Timeout, when positive, is sent as Connect-Timeout-Ms: envd ends the
	// process when it passes. A context deadline that comes first is sent
	// instead.
	Timeout time.Duration
	// PTY, when set, runs the command on a terminal of that size: its
	// output (stdout and stderr together) arrives as pty data, and input
	// and size changes go through SendInput and ResizePTY by its pid.
	PTY *PTYSize
	// Stdin keeps a stdin pipe open for the process (write with SendStdin,
	// end with CloseStdin). envd opens one unless told not to, so it is
	// always sent: false (the zero value) gives the process EOF on stdin,
	// which a non-interactive or detached command needs (one that reads
	// stdin would otherwise wait forever). A PTY process takes its input
	// through the terminal and is always sent false.
	Stdin bool
	// Tag names the process for Process.List.
	Tag string
	// OnStart, when set, is called with the process's pid in the sandbox as
	// soon as envd reports it started (before any output).
	OnStart func(pid int) `json:"-"`
}

// PTYSize is a terminal size in cells.
type PTYSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// ptyConfig is envd's PTY message: {"size":{"cols","rows"}}.
type ptyConfig struct {
	Size struct {
		Cols uint32 `json:"cols"`
		Rows uint32 `json:"rows"`
	} `json:"size"`
}

func newPTYConfig(size PTYSize) *ptyConfig {
	p := &ptyConfig{}
	p.Size.Cols, p.Size.Rows = uint32(size.Cols), uint32(size.Rows)
	return p
}

// ExecResult is how a process ended.
type ExecResult struct {
	ExitCode int    // exit status, or 128+N for signal N
	Status   string // envd's status text: "exit status 3", "signal: killed"
	PID      int
	Error    string // envd's error text for the process, if any
}

// EnvdURL is the base URL of a sandbox's envd as CubeProxy routes it.
func (c *Client) EnvdURL(sb *Sandbox) string {
	return fmt.Sprintf("%s://%d-%s.%s", c.scheme, EnvdPort, sb.SandboxID, sb.Domain)
}

func (c *Client) envdHeader(sb *Sandbox) http.Header {
	h := http.Header{"Authorization": {envdBasicAuth}}
	if sb.EnvdAccessToken != "" {
		h.Set("X-Access-Token", sb.EnvdAccessToken)
	}
	if sb.TrafficAccessToken != "" {
		h.Set("E2B-Traffic-Access-Token", sb.TrafficAccessToken)
	}
	return h
}

func checkSandbox(sb *Sandbox) error {
	if sb == nil || sb.SandboxID == "" || sb.Domain == "" {
		return errors.New("cube: sandbox has no id or domain")
	}
	return nil
}

type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  string            `json:"cwd,omitempty"`
}

// EncodeEnvelope frames one Connect message: flags, 4-byte big-endian
// length, payload.
func EncodeEnvelope(flags byte, payload []byte) []byte {
	out := make([]byte, 5+len(payload))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:5], uint32(len(payload)))
	copy(out[5:], payload)
	return out
}

// readEnvelope reads one Connect message.
func readEnvelope(r io.Reader) (flags byte, payload []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxEnvelope {
		return 0, nil, fmt.Errorf("envelope of %d bytes exceeds %d", n, maxEnvelope)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return head[0], payload, nil
}

type processEvent struct {
	Event struct {
		Start *struct {
			PID int `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout []byte `json:"stdout"`
			Stderr []byte `json:"stderr"`
			Pty    []byte `json:"pty"`
		} `json:"data"`
		End *struct {
			ExitCode *int   `json:"exitCode"`
			Exited   bool   `json:"exited"`
			Status   string `json:"status"`
			Error    string `json:"error"`
		} `json:"end"`
		Keepalive *struct{} `json:"keepalive"`
	} `json:"event"`
}

type endStream struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Exec runs a command in the sandbox through envd's process.Process/Start,
// streaming its output to stdout and stderr (either may be nil) as it
// arrives; PTY output goes to stdout. It is never retried: a dropped stream
// returns ErrStreamDropped, and the command may still have run.
func (c *Client) Exec(ctx context.Context, sb *Sandbox, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	if err := checkSandbox(sb); err != nil {
		return ExecResult{}, err
	}
	op := fmt.Sprintf("exec %s in sandbox %s", req.Cmd, sb.SandboxID)
	args := req.Args
	if args == nil {
		args = []string{}
	}
	envs := req.Envs
	if envs == nil {
		envs = map[string]string{}
	}
	start := struct {
		Process processConfig `json:"process"`
		PTY     *ptyConfig    `json:"pty,omitempty"`
		Tag     string        `json:"tag,omitempty"`
		Stdin   bool          `json:"stdin"`
	}{Process: processConfig{Cmd: req.Cmd, Args: args, Envs: envs, Cwd: req.Cwd}, Tag: req.Tag, Stdin: req.Stdin && req.PTY == nil}
	if req.PTY != nil {
		if req.PTY.Rows == 0 || req.PTY.Cols == 0 {
			return ExecResult{}, fmt.Errorf("cube: %s: terminal size %dx%d: rows and columns must be positive", op, req.PTY.Cols, req.PTY.Rows)
		}
		start.PTY = newPTYConfig(*req.PTY)
	}
	payload, err := json.Marshal(start)
	if err != nil {
		return ExecResult{}, fmt.Errorf("cube: %s: encode request: %w", op, err)
	}
	header := c.envdHeader(sb)
	header.Set("Connect-Protocol-Version", "1")
	// envd ends the process at the earlier of the request's timeout and the
	// caller's deadline, so a command does not outlive the caller's interest.
	timeout := req.Timeout
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); timeout <= 0 || left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	if timeout > 0 {
		header.Set("Connect-Timeout-Ms", strconv.FormatInt(max(timeout.Milliseconds(), 1), 10))
	}
	startCall := call{
		op: op, method: http.MethodPost, url: c.EnvdURL(sb) + "/process.Process/Start",
		body: EncodeEnvelope(0, payload), contentType: "application/connect+json", header: header, envd: true,
	}
	return c.serverStream(ctx, op, startCall, req.OnStart, stdout, stderr)
}

// Attach re-attaches to a process envd started and that is still running
// (envd's process.Process/Connect by pid): its output from now on goes to
// stdout and stderr, and Attach returns how it ended, like Exec. A runner
// whose stream dropped uses it to carry on; ErrNotFound when the process
// has ended meanwhile (its end was not seen: run it again or report it).
func (c *Client) Attach(ctx context.Context, sb *Sandbox, pid int, stdout, stderr io.Writer) (ExecResult, error) {
	return c.AttachNotify(ctx, sb, pid, nil, stdout, stderr)
}

// AttachNotify is Attach that calls onStart (when set) with the pid once
// envd confirmed the process and the stream is open, before any output.
func (c *Client) AttachNotify(ctx context.Context, sb *Sandbox, pid int, onStart func(pid int), stdout, stderr io.Writer) (ExecResult, error) {
	if err := checkSandbox(sb); err != nil {
		return ExecResult{}, err
	}
	op := fmt.Sprintf("attach to process %d in sandbox %s", pid, sb.SandboxID)
	payload, err := json.Marshal(struct {
		Process processSelector `json:"process"`
	}{processSelector{pid}})
	if err != nil {
		return ExecResult{}, fmt.Errorf("cube: %s: encode request: %w", op, err)
	}
	header := c.envdHeader(sb)
	header.Set("Connect-Protocol-Version", "1")
	return c.serverStream(ctx, op, call{
		op: op, method: http.MethodPost, url: c.EnvdURL(sb) + "/process.Process/Connect",
		body: EncodeEnvelope(0, payload), contentType: "application/connect+json", header: header, envd: true,
	}, onStart, stdout, stderr)
}

// serverStream sends a Start or Connect request and reads its events up
// to the process's end.
func (c *Client) serverStream(ctx context.Context, op string, startCall call, onStart func(int), stdout, stderr io.Writer) (ExecResult, error) {
	var err error
	// Only a request that provably never reached envd is sent again.
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		var sent bool
		resp, sent, err = c.open(ctx, startCall)
		if err == nil {
			break
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		err = &TransportError{Op: op, Sent: sent, Err: err}
		delay, retry := c.shouldRetry(retryUnsent, attempt, err)
		if !retry || ctx.Err() != nil {
			return ExecResult{}, err
		}
		select {
		case <-ctx.Done():
			return ExecResult{}, err
		case <-time.After(delay):
		}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return ExecResult{}, parseAPIError(op, resp, body)
	}

	var res ExecResult
	ended := false
	br := bufio.NewReader(resp.Body)
	for {
		flags, msg, err := readEnvelope(br)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return res, fmt.Errorf("cube: %s: %w", op, ctxErr)
			}
			if ended {
				// The process's end was reported; only the trailer is missing.
				return res, nil
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return res, fmt.Errorf("cube: %s: %w: %w", op, ErrStreamDropped, err)
		}
		if flags&flagCompressed != 0 {
			return res, fmt.Errorf("cube: %s: compressed envelope not negotiated", op)
		}
		if flags&flagEndStream != 0 {
			var end endStream
			if err := json.Unmarshal(msg, &end); err != nil {
				return res, fmt.Errorf("cube: %s: decode end of stream: %w", op, err)
			}
			if end.Error != nil {
				return res, &StreamError{Op: op, Code: end.Error.Code, Message: end.Error.Message}
			}
			if !ended {
				return res, fmt.Errorf("cube: %s: %w: stream closed without an end event", op, ErrStreamDropped)
			}
			return res, nil
		}
		var ev processEvent
		if err := json.Unmarshal(msg, &ev); err != nil {
			return res, fmt.Errorf("cube: %s: decode event: %w", op, err)
		}
		switch e := ev.Event; {
		case e.Start != nil:
			res.PID = e.Start.PID
			if onStart != nil {
				onStart(res.PID)
			}
		case e.Data != nil:
			if err := writeOut(stdout, e.Data.Stdout); err != nil {
				return res, fmt.Errorf("cube: %s: write stdout: %w", op, err)
			}
			if err := writeOut(stdout, e.Data.Pty); err != nil {
				return res, fmt.Errorf("cube: %s: write stdout: %w", op, err)
			}
			if err := writeOut(stderr, e.Data.Stderr); err != nil {
				return res, fmt.Errorf("cube: %s: write stderr: %w", op, err)
			}
		case e.End != nil:
			ended = true
			res.Status = e.End.Status
			res.Error = e.End.Error
			res.ExitCode = exitCodeOf(e.End.Status, e.End.ExitCode)
		}
	}
}

func writeOut(w io.Writer, p []byte) error {
	if w == nil || len(p) == 0 {
		return nil
	}
	_, err := w.Write(p)
	return err
}

// exitCodeOf reads envd's status text, which is Go's ProcessState.String():
// "exit status N" or "signal: NAME". exitCode is omitted on the wire when 0
// and is -1 for a signal, so the text is the better source.
func exitCodeOf(status string, exitCode *int) int {
	if rest, ok := strings.CutPrefix(status, "exit status "); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
			return n
		}
	}
	if name, ok := strings.CutPrefix(status, "signal: "); ok {
		name = strings.TrimSuffix(strings.TrimSpace(name), " (core dumped)")
		for sig := syscall.Signal(1); sig < 65; sig++ {
			if sig.String() == name {
				return 128 + int(sig)
			}
		}
		if n, ok := strings.CutPrefix(name, "signal "); ok {
			if v, err := strconv.Atoi(n); err == nil {
				return 128 + v
			}
		}
	}
	if exitCode != nil && *exitCode >= 0 {
		return *exitCode
	}
	if exitCode == nil {
		return 0
	}
	return -1
}

// processSelector names a process by its pid in the sandbox.
type processSelector struct {
	PID int `json:"pid"`
}

// unary sends one Connect unary call to envd's process service: a JSON
// body, a JSON reply ({} on success, {"code","message"} on failure).
func (c *Client) unary(ctx context.Context, sb *Sandbox, op, method string, class retryClass, body any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("cube: %s: encode request: %w", op, err)
	}
	header := c.envdHeader(sb)
	header.Set("Connect-Protocol-Version", "1")
	_, err = c.do(ctx, call{
		op: op, method: http.MethodPost, url: c.EnvdURL(sb) + "/process.Process/" + method,
		body: payload, contentType: "application/json", header: header, envd: true, class: class, ok: []int{http.StatusOK},
	})
	return err
}

// SendInput writes data to the terminal of a process started with a PTY
// (envd's process.Process/SendInput, input.pty). Input is not idempotent:
// it is sent again only when it provably never reached envd.
func (c *Client) SendInput(ctx context.Context, sb *Sandbox, pid int, data []byte) error {
	return c.sendInput(ctx, sb, pid, "input", struct {
		PTY []byte `json:"pty"`
	}{data}, len(data))
}

// ResizePTY sets the terminal size of a process started with a PTY
// (envd's process.Process/Update). Setting a size twice is harmless.
func (c *Client) ResizePTY(ctx context.Context, sb *Sandbox, pid int, size PTYSize) error {
	if err := checkSandbox(sb); err != nil {
		return err
	}
	op := fmt.Sprintf("resize the terminal of process %d in sandbox %s", pid, sb.SandboxID)
	if size.Rows == 0 || size.Cols == 0 {
		return fmt.Errorf("cube: %s: terminal size %dx%d: rows and columns must be positive", op, size.Cols, size.Rows)
	}
	return c.unary(ctx, sb, op, "Update", retrySafe,
		struct {
			Process processSelector `json:"process"`
			PTY     *ptyConfig      `json:"pty"`
		}{processSelector{pid}, newPTYConfig(size)})
}

// ReadFile reads a file in the sandbox (ErrNotFound when it is absent).
func (c *Client) ReadFile(ctx context.Context, sb *Sandbox, path string) ([]byte, error) {
	if err := checkSandbox(sb); err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, call{
		op: "read " + path + " in sandbox " + sb.SandboxID, method: http.MethodGet,
		url:    c.EnvdURL(sb) + "/files?" + url.Values{"path": {path}}.Encode(),
		header: c.envdHeader(sb), envd: true, class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	return rep.body, nil
}

// WriteFile writes a file in the sandbox, creating its parent directories.
// Writing the same bytes twice is harmless, so it is retried like a GET.
func (c *Client) WriteFile(ctx context.Context, sb *Sandbox, path string, data []byte) error {
	if err := checkSandbox(sb); err != nil {
		return err
	}
	if data == nil {
		data = []byte{}
	}
	_, err := c.do(ctx, call{
		op: "write " + path + " in sandbox " + sb.SandboxID, method: http.MethodPost,
		url:  c.EnvdURL(sb) + "/files?" + url.Values{"path": {path}}.Encode(),
		body: data, contentType: "application/octet-stream",
		header: c.envdHeader(sb), envd: true, class: retrySafe, ok: []int{http.StatusOK, http.StatusCreated, http.StatusNoContent},
	})
	return err
}

// SendStdin writes data to the stdin of a process started with Stdin
// (envd's SendInput, input.stdin). Like SendInput it is sent again only when
// it provably never reached envd.
func (c *Client) SendStdin(ctx context.Context, sb *Sandbox, pid int, data []byte) error {
	return c.sendInput(ctx, sb, pid, "stdin", struct {
		Stdin []byte `json:"stdin"`
	}{data}, len(data))
}

// sendInput is envd's process.Process/SendInput for one kind of input (the
// PTY's or stdin's); n bytes of it, nothing sent when n is 0.
func (c *Client) sendInput(ctx context.Context, sb *Sandbox, pid int, what string, input any, n int) error {
	if err := checkSandbox(sb); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return c.unary(ctx, sb, fmt.Sprintf("send %s to process %d in sandbox %s", what, pid, sb.SandboxID), "SendInput", retryUnsent,
		struct {
			Process processSelector `json:"process"`
			Input   any             `json:"input"`
		}{processSelector{pid}, input})
}

// CloseStdin closes the stdin of a process started with Stdin: it reads
// EOF (envd's CloseStdin; not for PTY processes, which take Ctrl-D).
func (c *Client) CloseStdin(ctx context.Context, sb *Sandbox, pid int) error {
	if err := checkSandbox(sb); err != nil {
		return err
	}
	return c.unary(ctx, sb, fmt.Sprintf("close stdin of process %d in sandbox %s", pid, sb.SandboxID), "CloseStdin", retryUnsent,
		struct {
			Process processSelector `json:"process"`
		}{processSelector{pid}})
}

// Signal is envd's Signal enum: only SIGTERM and SIGKILL can be sent.
type Signal string

// Signals envd can send.
const (
	SignalTerm Signal = "SIGNAL_SIGTERM"
	SignalKill Signal = "SIGNAL_SIGKILL"
)

// SendSignal signals a process started through envd (envd's SendSignal).
// ErrNotFound once the process has ended.
func (c *Client) SendSignal(ctx context.Context, sb *Sandbox, pid int, sig Signal) error {
	if err := checkSandbox(sb); err != nil {
		return err
	}
	if sig != SignalTerm && sig != SignalKill {
		return fmt.Errorf("cube: signal %q: envd sends only %s and %s", sig, SignalTerm, SignalKill)
	}
	return c.unary(ctx, sb, fmt.Sprintf("send %s to process %d in sandbox %s", sig, pid, sb.SandboxID), "SendSignal", retrySafe,
		struct {
			Process processSelector `json:"process"`
			Signal  Signal          `json:"signal"`
		}{processSelector{pid}, sig})
}

// ProcessInfo is one entry of envd's Process.List.
type ProcessInfo struct {
	PID    int    `json:"pid"`
	Tag    string `json:"tag,omitempty"`
	Config struct {
		Cmd  string            `json:"cmd"`
		Args []string          `json:"args"`
		Envs map[string]string `json:"envs"`
		Cwd  string            `json:"cwd,omitempty"`
	} `json:"config"`
}

// ListProcesses lists the processes envd started that are still running
// (envd's Process.List): a runner that lost its stream finds its command
// here by pid or tag.
func (c *Client) ListProcesses(ctx context.Context, sb *Sandbox) ([]ProcessInfo, error) {
	if err := checkSandbox(sb); err != nil {
		return nil, err
	}
	header := c.envdHeader(sb)
	header.Set("Connect-Protocol-Version", "1")
	op := "list processes in sandbox " + sb.SandboxID
	rep, err := c.do(ctx, call{
		op: op, method: http.MethodPost, url: c.EnvdURL(sb) + "/process.Process/List",
		body: []byte("{}"), contentType: "application/json", header: header, envd: true, class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	var out struct {
		Processes []ProcessInfo `json:"processes"`
	}
	if err := decodeJSON(rep, &out); err != nil {
		return nil, fmt.Errorf("cube: %s: %w", op, err)
	}
	return out.Processes, nil
}
