package cubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
)

// Options configures a fake. The zero value works.
type Options struct {
	// Templates are the template ids a create may name (default "base").
	Templates []string
	// Domain is the sandbox domain handed out (default "cube.app").
	Domain string
	// APIKey, when set, is required on CubeAPI calls as X-API-Key or
	// Authorization: Bearer (else 401). GET /health stays open.
	APIKey string
	// AccessTokens makes sandboxes carry envdAccessToken and
	// trafficAccessToken, which CubeProxy then requires.
	AccessTokens bool
	// SnapshotPageSize caps a GET /snapshots page (default 100).
	SnapshotPageSize int
	// KeepaliveEvery is the keepalive interval of exec streams (default 1s).
	KeepaliveEvery time.Duration
	// PauseDelay keeps a pausing sandbox in state "pausing" that long;
	// DELETE meanwhile gets 503 with Retry-After.
	PauseDelay time.Duration
	// RetryAfterSeconds is the Retry-After of that 503 (default 2, as CubeAPI).
	RetryAfterSeconds int
	// Dir holds sandbox and snapshot state (default: a temporary directory
	// removed by Close).
	Dir string
	// APIAddr is CubeAPI's listen address (default 127.0.0.1:0).
	APIAddr string
	// BuildSteps is how many status polls a template build takes to reach
	// READY (default 3); a build of image "fail" ends FAILED.
	BuildSteps int
	// Nodes, when set, are served as CubeAPI's /cubeapi/v1 cluster surface
	// (GET /cubeapi/v1/nodes and /cubeapi/v1/cluster/overview); without
	// them those routes are 404, as on CubeAPI builds that dropped it.
	Nodes []cube.Node
	// LegacySnapshots plays an older CubeAPI whose CubeMaster lacks the
	// snapshot endpoint: POST /sandboxes/{id}/snapshots answers 201 with a
	// made-up id (a UUID, not snap-…) and takes no snapshot.
	LegacySnapshots bool
	// RouteTimeout, LongRouteTimeout and SnapshotRouteTimeout are
	// CubeAPI's per-route budgets (tower-http TimeoutLayer in routes.rs:
	// 30 s by default; 120 s for pause, resume and connect; 240 s for
	// snapshot, rollback and DELETE /templates/{id}). A CubeAPI request
	// that outlives its budget (an injected Delay, a slow handler) is
	// answered 408 with an empty body, as that layer does. Zero means the
	// real value; tests set them short.
	RouteTimeout         time.Duration
	LongRouteTimeout     time.Duration
	SnapshotRouteTimeout time.Duration
	// HoldOutput, when set, is asked about every process envd starts, by
	// its tag: a non-nil channel holds that process's output (stdout,
	// stderr, terminal) back until it is closed, as a slow link between
	// envd and its client would; the start event and the process itself
	// are not held.
	HoldOutput func(tag string) <-chan struct{}
}

// Request is one recorded request, as the fake received it.
type Request struct {
	Server   string // "api" or "proxy"
	Method   string
	Path     string
	RawQuery string
	Host     string
	Header   http.Header
	Body     []byte
	Start    time.Time     // when the fake received it
	Status   int           // status the fake replied with (0 if the connection was cut)
	Duration time.Duration // time the fake spent handling it (0 while in flight)
}

// Fault changes the fake's reply to matching requests.
type Fault struct {
	// Route is "METHOD /path" with path.Match wildcards, e.g.
	// "DELETE /sandboxes/*" or "POST /process.Process/Start"; "" matches
	// every request.
	Route string
	// Status, when non-zero, is replied instead of handling the request,
	// with a {"code","message"} body (plain text with PlainText).
	Status    int
	Message   string
	PlainText bool
	// RetryAfter sets a Retry-After header (whole seconds, rounded up).
	RetryAfter time.Duration
	// Delay is waited before anything else (a slow server).
	Delay time.Duration
	// DropStreamAfter cuts an exec stream after this many envelopes (the
	// command is killed).
	DropStreamAfter int
	// DropReply handles the request for real, then cuts the connection
	// without a reply: the client cannot know whether it happened.
	DropReply bool
	// Skip lets this many matching requests through untouched first.
	Skip int
	// Count is how many matching requests it applies to: 0 means 1, a
	// negative value means every one.
	Count int
}

// Server is a running fake.
type Server struct {
	opts    Options
	dir     string
	ownsDir bool

	api   *listener
	proxy *listener

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	killed    map[string]bool
	snapshots map[string]*snapshot
	templates map[string]bool
	aliases   map[string]string    // template alias → template id
	builds    map[string]*buildJob // by job id
	seq       int
	snapSeq   int
	faults    []*Fault
	requests  []*Request
	closed    bool
}

// listener is one HTTP server that can be taken down and brought back on
// the same address. Its port stays held while it is down (portHold), so
// "down" is always a refused connection, never another server.
type listener struct {
	handler http.Handler
	mu      sync.Mutex
	addr    string
	hold    *portHold
	ln      net.Listener
	srv     *http.Server
	closed  bool
}

func (l *listener) start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errClosed
	}
	if l.srv != nil {
		return nil
	}
	if l.hold == nil {
		h, err := holdPort(l.addr)
		if err != nil {
			return err
		}
		l.hold, l.addr = h, h.addr
	}
	ln, err := l.hold.listen()
	if err != nil {
		return err
	}
	l.ln = ln
	l.srv = &http.Server{Handler: l.handler, ReadHeaderTimeout: 10 * time.Second}
	go l.srv.Serve(ln) //nolint:errcheck // returns ErrServerClosed on Close
	return nil
}

// stop closes the server and keeps the port held.
func (l *listener) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.srv != nil {
		_ = l.srv.Close()
		// Serve may not have taken the listener yet (a Down right after
		// Up), and then Close leaves it open: close it here, so the
		// port is never listening while down.
		_ = l.ln.Close()
		l.srv, l.ln = nil, nil
	}
}

// close stops the server and frees the port.
func (l *listener) close() {
	l.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.hold != nil {
		l.hold.release()
	}
}

func (l *listener) address() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr
}

// New starts a fake and closes it when the test ends. It skips the test
// when the fake cannot make mount namespaces (not root).
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("cubetest needs root: each sandbox is a private mount namespace")
	}
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	s, err := NewServer(opts)
	if err != nil {
		tb.Fatalf("start cube fake: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// NewServer starts a fake; Close stops it.
func NewServer(opts Options) (*Server, error) {
	if len(opts.Templates) == 0 {
		opts.Templates = []string{"base"}
	}
	if opts.Domain == "" {
		opts.Domain = "cube.app"
	}
	if opts.SnapshotPageSize <= 0 {
		opts.SnapshotPageSize = 100
	}
	if opts.KeepaliveEvery <= 0 {
		opts.KeepaliveEvery = time.Second
	}
	if opts.RetryAfterSeconds <= 0 {
		opts.RetryAfterSeconds = 2
	}
	if opts.APIAddr == "" {
		opts.APIAddr = "127.0.0.1:0"
	}
	s := &Server{
		opts:      opts,
		dir:       opts.Dir,
		sandboxes: map[string]*sandbox{},
		killed:    map[string]bool{},
		snapshots: map[string]*snapshot{},
		templates: map[string]bool{},
	}
	for _, t := range opts.Templates {
		s.templates[t] = true
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "cubetest-")
		if err != nil {
			return nil, fmt.Errorf("cubetest: state dir: %w", err)
		}
		s.dir, s.ownsDir = dir, true
	}
	s.api = &listener{addr: opts.APIAddr, handler: s.middleware("api", s.withRouteTimeout(s.faultsInBudget(s.apiRoutes())))}
	s.proxy = &listener{addr: "127.0.0.1:0", handler: s.middleware("proxy", http.HandlerFunc(s.serveProxy))}
	if err := s.api.start(); err != nil {
		return nil, fmt.Errorf("cubetest: listen for CubeAPI: %w", err)
	}
	if err := s.proxy.start(); err != nil {
		s.api.close()
		return nil, fmt.Errorf("cubetest: listen for CubeProxy: %w", err)
	}
	return s, nil
}

// Close stops the listeners and every sandbox.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.api.close()
	s.proxy.close()
	s.mu.Lock()
	boxes := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		boxes = append(boxes, sb)
	}
	s.sandboxes = map[string]*sandbox{}
	s.mu.Unlock()
	for _, sb := range boxes {
		sb.destroy()
	}
	if s.ownsDir {
		_ = os.RemoveAll(s.dir)
	}
}

// Down makes both listeners refuse connections (Cube unreachable); Up
// brings them back on the same addresses. State is kept. The ports stay
// bound (not listening) while down, so no other server can take them and
// a connection is refused, never answered elsewhere.
func (s *Server) Down() {
	s.api.stop()
	s.proxy.stop()
}

// Up undoes Down.
func (s *Server) Up() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errClosed
	}
	if err := s.api.start(); err != nil {
		return fmt.Errorf("cubetest: relisten CubeAPI on %s: %w", s.api.address(), err)
	}
	if err := s.proxy.start(); err != nil {
		return fmt.Errorf("cubetest: relisten CubeProxy on %s: %w", s.proxy.address(), err)
	}
	return nil
}

// URL is CubeAPI's base URL.
func (s *Server) URL() string { return "http://" + s.api.address() }

// ProxyAddr is CubeProxy's host:port.
func (s *Server) ProxyAddr() string { return s.proxy.address() }

// Domain is the sandbox domain.
func (s *Server) Domain() string { return s.opts.Domain }

// Config is a client configuration for this fake, with fast retries.
func (s *Server) Config() cube.Config {
	return cube.Config{
		Endpoint:  s.URL(),
		APIKey:    s.opts.APIKey,
		ProxyAddr: s.ProxyAddr(),
		Retry:     cube.RetryPolicy{Max: 4, Base: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
	}
}

// AddTemplate makes a template id known.
func (s *Server) AddTemplate(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templates[id] = true
}

// AddAlias names a template by an alias (GET /templates/aliases/{alias}).
func (s *Server) AddAlias(alias, templateID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aliases == nil {
		s.aliases = map[string]string{}
	}
	s.aliases[alias] = templateID
}

// Inject queues a fault; faults are matched in the order injected.
func (s *Server) Inject(f Fault) {
	if f.Count == 0 {
		f.Count = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults drops every pending fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Requests returns the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
	}
	return out
}

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// SandboxIDs lists live sandboxes (running, pausing or paused), sorted.
func (s *Server) SandboxIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.sandboxes)
}

// SnapshotIDs lists existing snapshots, sorted.
func (s *Server) SnapshotIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.snapshots)
}

// ScratchDir is the host directory that is /tmp in a sandbox, or "".
func (s *Server) ScratchDir(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[id]; sb != nil {
		return sb.scratch()
	}
	return ""
}

// takeFault returns the first pending fault matching the request.
func (s *Server) takeFault(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	route := r.Method + " " + r.URL.Path
	for i, f := range s.faults {
		if f.Route != "" {
			if ok, _ := path.Match(f.Route, route); !ok {
				continue
			}
		}
		if f.Skip > 0 {
			f.Skip--
			continue
		}
		taken := *f
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return &taken
	}
	return nil
}

type faultKey struct{}

// faultOf returns the fault that applies to a request being handled.
func faultOf(r *http.Request) *Fault {
	f, _ := r.Context().Value(faultKey{}).(*Fault)
	return f
}

// statusRecorder remembers the status for the request log while keeping
// http.Flusher reachable through Unwrap.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusRecorder) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush() //nolint:errcheck // best effort
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routeBudget is CubeAPI's timeout for a request (see
// Options.RouteTimeout).
func (s *Server) routeBudget(r *http.Request) time.Duration {
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	route := r.Method + " " + r.URL.Path
	for _, pat := range []string{"POST /sandboxes/*/pause", "POST /sandboxes/*/resume", "POST /sandboxes/*/connect"} {
		if ok, _ := path.Match(pat, route); ok {
			return or(s.opts.LongRouteTimeout, 120*time.Second)
		}
	}
	for _, pat := range []string{"POST /sandboxes/*/snapshots", "POST /sandboxes/*/rollback", "DELETE /templates/*"} {
		if ok, _ := path.Match(pat, route); ok {
			return or(s.opts.SnapshotRouteTimeout, 240*time.Second)
		}
	}
	return or(s.opts.RouteTimeout, 30*time.Second)
}

// bufferedReply holds a CubeAPI reply until the handler is done within
// its budget.
type bufferedReply struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedReply) Header() http.Header { return b.header }
func (b *bufferedReply) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedReply) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// withRouteTimeout runs a CubeAPI request under its route budget: past it
// the client gets 408 and an empty body, and the handler's reply is
// dropped (its work may still finish, as a cancelled axum future's
// CubeMaster call may).
func (s *Server) withRouteTimeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.routeBudget(r))
		defer cancel()
		reply := &bufferedReply{header: http.Header{}}
		done := make(chan any, 1)
		go func() {
			defer func() { done <- recover() }()
			next.ServeHTTP(reply, r.WithContext(ctx))
		}()
		select {
		case p := <-done:
			if p != nil {
				panic(p) // http.ErrAbortHandler: cut the connection
			}
			for k, v := range reply.header {
				w.Header()[k] = v
			}
			if reply.status == 0 {
				reply.status = http.StatusOK
			}
			w.WriteHeader(reply.status)
			_, _ = w.Write(reply.body.Bytes())
		case <-ctx.Done():
			if r.Context().Err() != nil {
				return // the client went away
			}
			w.WriteHeader(http.StatusRequestTimeout)
		}
	})
}

// middleware records every request and applies faults before the routes.
func (s *Server) middleware(server string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w}
		// Recorded before handling, so that a client holding its reply
		// always finds its request in the log.
		s.mu.Lock()
		logged := &Request{
			Server: server, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Host: r.Host,
			Header: r.Header.Clone(), Body: body, Start: start,
		}
		s.requests = append(s.requests, logged)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			logged.Status = rec.status
			logged.Duration = time.Since(start)
			s.mu.Unlock()
		}()

		if server == "api" {
			// Faults are applied inside the route budget (faultsInBudget).
			next.ServeHTTP(rec, r)
			return
		}
		s.applyFaults(rec, r, next)
	})
}

// faultsInBudget applies injected faults to a CubeAPI request, inside its route
// budget: a Delay longer than the budget is a 408.
func (s *Server) faultsInBudget(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.applyFaults(w, r, next) })
}

// applyFaults applies the fault that matches r, if any, then hands r on.
func (s *Server) applyFaults(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rec := w
	{
		f := s.takeFault(r)
		if f != nil {
			if f.Delay > 0 {
				select {
				case <-time.After(f.Delay):
				case <-r.Context().Done():
					return
				}
			}
			if f.RetryAfter > 0 {
				w.Header().Set("Retry-After", fmt.Sprint(int((f.RetryAfter+time.Second-1)/time.Second)))
			}
			if f.Status != 0 {
				msg := f.Message
				if msg == "" {
					msg = fmt.Sprintf("injected fault: %s", http.StatusText(f.Status))
				}
				if f.PlainText {
					w.Header().Set("Content-Type", "text/plain; charset=utf-8")
					rec.WriteHeader(f.Status)
					_, _ = io.WriteString(rec, msg)
					return
				}
				writeError(rec, f.Status, msg)
				return
			}
			if f.DropReply {
				// Do the work for real, then hang up before replying.
				next.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithValue(r.Context(), faultKey{}, f)))
				panic(http.ErrAbortHandler)
			}
			r = r.WithContext(context.WithValue(r.Context(), faultKey{}, f))
		}
		next.ServeHTTP(rec, r)
	}
}

var errClosed = errors.New("cubetest: server closed")
