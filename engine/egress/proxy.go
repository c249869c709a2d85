// Package egress is a World's way out to the network: an HTTP forward proxy
// that strata runs on a unix socket per World, which allows the hosts on the
// World's allow-list and refuses the others with a 403 naming the policy.
// Its other half, the bridge inside the World's network namespace, is
// package egress/bridge.
package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/egress/bridge"
)

// Denial is one host a World was refused, reported once per host.
type Denial struct {
	World string    `json:"world"`
	Host  string    `json:"host"`
	Port  int       `json:"port"`
	Time  time.Time `json:"time"`
	// AllowKey is the config key the host is added to, to allow it.
	AllowKey string `json:"allow_key"`
}

// Options configure a Proxy.
type Options struct {
	World string
	Allow boundary.Allowlist
	// AllowKey names where a person adds a host ("boundary.worlds.w.allow").
	AllowKey string
	// OnDeny is told of the first denial of each host. It is called from
	// the connection's goroutine and should not block for long.
	OnDeny func(Denial)
	// Dial reaches an allowed host (default: a net.Dialer, 30s timeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	Log  *slog.Logger
	// Now is the clock of denials (default time.Now).
	Now func() time.Time
}

// Stats counts a proxy's decisions.
type Stats struct {
	Allowed int64 // connections and requests let through
	Denied  int64 // connections and requests refused
}

// Proxy is one World's egress proxy. Its allow-list can be changed while it
// serves (SetAllow), for the TUI's "allow" action.
type Proxy struct {
	opts    Options
	allow   atomic.Pointer[boundary.Allowlist]
	allowed atomic.Int64
	denied  atomic.Int64

	mu       sync.Mutex
	reported map[string]bool
	srv      *http.Server
	rp       *httputil.ReverseProxy
}

// New makes a proxy; Serve runs it.
func New(o Options) *Proxy {
	if o.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		o.Dial = d.DialContext
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Proxy{opts: o, reported: map[string]bool{}}
	allow := append(boundary.Allowlist{}, o.Allow...)
	p.allow.Store(&allow)
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The absolute URI decides where the request goes, and the
			// Host header follows it: a Host naming another host is not
			// a way to reach it.
			pr.Out.Host = ""
		},
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           o.Dial,
			MaxIdleConns:          16,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 5 * time.Minute,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.opts.Log.Info("egress: upstream failed", "world", p.opts.World, "host", r.URL.Host, "err", err)
			http.Error(w, fmt.Sprintf("strata egress proxy: %s: %v\n", r.URL.Host, err), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug)}
	return p
}

// SetAllow replaces the allow-list; connections already open stay open.
func (p *Proxy) SetAllow(a boundary.Allowlist) {
	a = append(boundary.Allowlist{}, a...)
	p.allow.Store(&a)
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{Allowed: p.allowed.Load(), Denied: p.denied.Load()}
}

// Serve answers connections on l until Close; it returns nil then.
func (p *Proxy) Serve(l net.Listener) error {
	if err := p.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("egress proxy for world %q: %w", p.opts.World, err)
	}
	return nil
}

// Close stops the proxy and every connection through it.
func (p *Proxy) Close() error { return p.srv.Close() }

// ListenUnix listens on a unix socket at path, replacing a stale socket left
// by a crash (never another kind of file). The socket is connectable by
// anyone who can reach the path: the proxy, not the path, is the policy.
func ListenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("egress socket %s: exists and is not a socket; remove it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("egress socket %s: remove the stale socket: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	return l, nil
}

// ServeHTTP handles one request from the World: CONNECT host:port for TLS
// (and any TCP), or an absolute-URI request for plain HTTP.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "strata egress proxy: this is a forward proxy; send requests through it (HTTPS_PROXY / HTTP_PROXY), with an absolute URI\n", http.StatusBadRequest)
		return
	}
	if r.URL.Scheme != "http" {
		http.Error(w, fmt.Sprintf("strata egress proxy: scheme %q: use CONNECT for TLS (set HTTPS_PROXY)\n", r.URL.Scheme), http.StatusBadRequest)
		return
	}
	host, port, err := splitHostPort(r.URL.Host, 80)
	if err != nil {
		http.Error(w, "strata egress proxy: "+err.Error()+"\n", http.StatusBadRequest)
		return
	}
	if !p.check(w, host, port) {
		return
	}
	r.URL.Host = net.JoinHostPort(host, strconv.Itoa(port))
	p.rp.ServeHTTP(w, r)
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitHostPort(r.Host, 443)
	if err != nil {
		http.Error(w, "strata egress proxy: CONNECT "+err.Error()+"\n", http.StatusBadRequest)
		return
	}
	if !p.check(w, host, port) {
		return
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	up, err := p.opts.Dial(r.Context(), "tcp", addr)
	if err != nil {
		http.Error(w, fmt.Sprintf("strata egress proxy: %s: %v\n", addr, err), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "strata egress proxy: cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	down, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	// The server's header deadlines must not cut the tunnel.
	_ = down.SetDeadline(time.Time{})
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	bridge.Splice(down, brw.Reader, up)
}

// check decides host:port, counting and reporting; on a denial it has
// answered the request.
func (p *Proxy) check(w http.ResponseWriter, host string, port int) bool {
	allow := *p.allow.Load()
	if allow.Allows(host, port) {
		p.allowed.Add(1)
		return true
	}
	p.denied.Add(1)
	p.report(host, port)
	key := p.opts.AllowKey
	if key == "" {
		key = "boundary.allow"
	}
	w.Header().Set("X-Strata-Policy", "egress-denied")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "strata egress proxy: %s is not on the allow-list of World %q (network = \"proxy\", %d allowed hosts).\n"+
		"To allow it, add %q to %s in config.toml, or use the allow action on this event in strata's TUI.\n",
		net.JoinHostPort(host, strconv.Itoa(port)), p.opts.World, len(allow), host, key)
	return false
}

func (p *Proxy) report(host string, port int) {
	p.mu.Lock()
	seen := p.reported[host]
	p.reported[host] = true
	p.mu.Unlock()
	p.opts.Log.Info("egress: denied", "world", p.opts.World, "host", host, "port", port)
	if !seen && p.opts.OnDeny != nil {
		p.opts.OnDeny(Denial{World: p.opts.World, Host: host, Port: port, Time: p.opts.Now().UTC(), AllowKey: p.opts.AllowKey})
	}
}

// splitHostPort reads "host", "host:port" or "[v6]:port", lower-cased.
func splitHostPort(hp string, defPort int) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hp)
	if err != nil {
		host, portStr = strings.Trim(hp, "[]"), strconv.Itoa(defPort)
	}
	port, perr := strconv.Atoi(portStr)
	if host == "" || perr != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: want host:port", hp)
	}
	return strings.ToLower(strings.TrimSuffix(host, ".")), port, nil
}

// JSONL returns an OnDeny that appends each denial to w as one JSON line
// (the World's events file the TUI follows). Writes are serialised.
func JSONL(w io.Writer) func(Denial) {
	var mu sync.Mutex
	return func(d Denial) {
		line, err := json.Marshal(d)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(append(line, '\n')) // best effort: the event log never blocks the proxy
	}
}
