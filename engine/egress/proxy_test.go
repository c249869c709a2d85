package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/boundary"
)

// servers is an allowed and a denied HTTP server on two loopback addresses,
// each counting the requests that reach it.
type servers struct {
	allowed, denied         *httptest.Server
	allowedHits, deniedHits atomic.Int64
	tlsAllowed              *httptest.Server
}

func startServers(t *testing.T) *servers {
	t.Helper()
	s := &servers{}
	s.allowed = listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.allowedHits.Add(1)
		fmt.Fprintf(w, "allowed host=%s", r.Host)
	}))
	s.denied = listenOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.deniedHits.Add(1)
		fmt.Fprint(w, "DENIED SERVER REACHED")
	}))
	s.tlsAllowed = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "tls allowed")
	}))
	s.tlsAllowed.StartTLS()
	t.Cleanup(s.tlsAllowed.Close)
	return s
}

func listenOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func hostPort(t *testing.T, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// startProxy serves a proxy for World w allowing allow, on a unix socket, and
// records its denials as JSONL.
func startProxy(t *testing.T, allow ...string) (*Proxy, string, *syncBuffer) {
	t.Helper()
	list, err := boundary.ParseAllowlist(allow)
	if err != nil {
		t.Fatal(err)
	}
	events := &syncBuffer{}
	p := New(Options{World: "w", Allow: list, AllowKey: "boundary.worlds.w.allow", OnDeny: JSONL(events)})
	sock := filepath.Join(t.TempDir(), "egress.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return p, sock, events
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// raw sends one raw request over the proxy's socket and returns the response.
func raw(t *testing.T, sock, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func viaSocket(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}, Timeout: 10 * time.Second}
}

func TestProxyAllowsListedHostsAndRefusesOthers(t *testing.T) {
	s := startServers(t)
	allowed, denied := hostPort(t, s.allowed.URL), hostPort(t, s.denied.URL)
	// The denied server is reachable: a 403 below is the policy, not the network.
	if resp, err := http.Get(s.denied.URL); err != nil || resp.StatusCode != 200 {
		t.Fatalf("denied server not reachable directly: %v", err)
	}
	s.deniedHits.Store(0)
	p, sock, events := startProxy(t, allowed, hostPort(t, s.tlsAllowed.URL))
	client := viaSocket(sock)

	resp, err := client.Get(s.allowed.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "allowed host="+allowed {
		t.Fatalf("allowed GET = %d %q", resp.StatusCode, body)
	}

	resp, err = client.Get(s.denied.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(body), `add "127.0.0.2" to boundary.worlds.w.allow in config.toml`) || resp.Header.Get("X-Strata-Policy") != "egress-denied" {
		t.Fatalf("denied GET = %d %q, want a 403 naming the config key", resp.StatusCode, body)
	}

	// A Host header naming the allowed host does not open the denied one, and
	// one naming the denied host does not reach it through the allowed one.
	if resp, _ := raw(t, sock, "GET http://"+denied+"/ HTTP/1.1\r\nHost: "+allowed+"\r\n\r\n"); resp.StatusCode != 403 {
		t.Errorf("absolute URI to the denied host with an allowed Host header = %d, want 403", resp.StatusCode)
	}
	if resp, body := raw(t, sock, "GET http://"+allowed+"/ HTTP/1.1\r\nHost: "+denied+"\r\n\r\n"); resp.StatusCode != 200 || body != "allowed host="+allowed {
		t.Errorf("absolute URI to the allowed host with the denied Host header = %d %q, want the allowed host answering for itself", resp.StatusCode, body)
	}
	// Userinfo that looks like the allowed host.
	if resp, _ := raw(t, sock, "GET http://"+allowed+"@"+denied+"/ HTTP/1.1\r\nHost: "+denied+"\r\n\r\n"); resp.StatusCode != 403 {
		t.Errorf("userinfo trick = %d, want 403", resp.StatusCode)
	}
	// An origin-form request (not through a proxy) is refused, not served.
	if resp, _ := raw(t, sock, "GET / HTTP/1.1\r\nHost: "+allowed+"\r\n\r\n"); resp.StatusCode != 400 {
		t.Errorf("origin-form request = %d, want 400", resp.StatusCode)
	}

	// CONNECT: TLS to an allowed host works end to end; a denied one gets 403.
	pool := x509.NewCertPool()
	pool.AddCert(s.tlsAllowed.Certificate())
	tlsClient := viaSocket(sock)
	tlsClient.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	resp, err = tlsClient.Get(s.tlsAllowed.URL)
	if err != nil {
		t.Fatalf("TLS through CONNECT: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	if string(body) != "tls allowed" {
		t.Fatalf("TLS through CONNECT = %q", body)
	}
	if resp, body := raw(t, sock, "CONNECT "+denied+" HTTP/1.1\r\nHost: "+denied+"\r\n\r\n"); resp.StatusCode != 403 || !strings.Contains(body, "boundary.worlds.w.allow") {
		t.Errorf("CONNECT to the denied host = %d %q, want 403", resp.StatusCode, body)
	}
	if resp, _ := raw(t, sock, "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n"); resp.StatusCode != 403 {
		t.Errorf("CONNECT to evil.example = %d, want 403", resp.StatusCode)
	}

	if n := s.deniedHits.Load(); n != 0 {
		t.Fatalf("the denied server got %d requests through the proxy", n)
	}
	// Each denied host is reported once, however often it was tried.
	var got []Denial
	for _, line := range strings.Split(strings.TrimSpace(events.String()), "\n") {
		var d Denial
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		got = append(got, d)
	}
	if len(got) != 2 || got[0].Host != "127.0.0.2" || got[1].Host != "evil.example" || got[1].Port != 443 || got[0].World != "w" || got[0].Time.IsZero() || got[0].AllowKey != "boundary.worlds.w.allow" {
		t.Fatalf("denial events = %+v, want 127.0.0.2 then evil.example, once each", got)
	}
	st := p.Stats()
	if st.Allowed != 3 || st.Denied != 5 {
		t.Errorf("stats = %+v, want 3 allowed (GET, GET with Host, CONNECT) and 5 denied", st)
	}

	// The TUI's allow action: the denied host is let through from now on.
	p.SetAllow(append(*p.allow.Load(), boundary.HostPattern{Host: "127.0.0.2"}))
	if resp, body := raw(t, sock, "GET http://"+denied+"/ HTTP/1.1\r\nHost: "+denied+"\r\n\r\n"); resp.StatusCode != 200 || body != "DENIED SERVER REACHED" {
		t.Errorf("after SetAllow = %d %q", resp.StatusCode, body)
	}
}

func TestListenUnixRefusesToReplaceAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.sock")
	l, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	// A stale socket from a crash is replaced.
	l, err = ListenUnix(path)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	l.Close()
	file := filepath.Join(t.TempDir(), "notes")
	if err := writeFile(file); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenUnix(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("ListenUnix over a file = %v, want a refusal", err)
	}
}
