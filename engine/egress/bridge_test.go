package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/egress/bridge"
)

// The netns helper: the test binary re-executed in a new network namespace,
// where only its own loopback exists, runs a Bridge to the proxy socket named
// in its environment and reports what a command there could reach.
func TestMain(m *testing.M) {
	if sock := os.Getenv("STRATA_EGRESS_HELPER_SOCKET"); sock != "" {
		os.Exit(netnsHelper(sock, os.Getenv("STRATA_EGRESS_HELPER_ALLOWED"), os.Getenv("STRATA_EGRESS_HELPER_DENIED")))
	}
	os.Exit(m.Run())
}

// helperReport is what the helper saw, printed as JSON.
type helperReport struct {
	DirectErr     string `json:"direct_err"`     // dialing the allowed server without the proxy
	AllowedStatus int    `json:"allowed_status"` // GET through the bridge
	AllowedBody   string `json:"allowed_body"`
	DeniedStatus  int    `json:"denied_status"`
	DeniedBody    string `json:"denied_body"`
	ConnectStatus int    `json:"connect_status"` // CONNECT to the denied server
	Err           string `json:"err,omitempty"`
}

func netnsHelper(sock, allowed, denied string) int {
	rep := helperReport{}
	defer func() { json.NewEncoder(os.Stdout).Encode(rep) }()
	if err := loopbackUp(); err != nil {
		rep.Err = err.Error()
		return 0
	}
	// Without the proxy, the host's servers do not exist here.
	if c, err := net.DialTimeout("tcp", allowed, 2*time.Second); err == nil {
		c.Close()
		rep.DirectErr = ""
	} else {
		rep.DirectErr = err.Error()
	}
	l, err := bridge.Listen(0)
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bridge.Serve(ctx, l, sock) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && rep.Err == "" {
			rep.Err = "bridge: " + err.Error()
		}
	}()
	proxyURL := &url.URL{Scheme: "http", Host: l.Addr().String()}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, Timeout: 10 * time.Second}
	get := func(u string) (int, string, error) {
		resp, err := client.Get(u)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if rep.AllowedStatus, rep.AllowedBody, err = get("http://" + allowed + "/"); err != nil {
		rep.Err = err.Error()
		return 0
	}
	if rep.DeniedStatus, rep.DeniedBody, err = get("http://" + denied + "/"); err != nil {
		rep.Err = err.Error()
		return 0
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", denied, denied)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	rep.ConnectStatus = resp.StatusCode
	return 0
}

// loopbackUp brings up lo in the helper's new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// A command in a network namespace of its own reaches an allowed host only
// through the bridge and the proxy's unix socket, and gets the proxy's 403
// for a denied one; the denial is recorded.
func TestBridgeInsideANetworkNamespace(t *testing.T) {
	s := startServers(t)
	allowed, denied := hostPort(t, s.allowed.URL), hostPort(t, s.denied.URL)
	p, sock, events := startProxy(t, allowed)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STRATA_EGRESS_HELPER_SOCKET="+sock, "STRATA_EGRESS_HELPER_ALLOWED="+allowed, "STRATA_EGRESS_HELPER_DENIED="+denied)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
		t.Skipf("no network namespaces here: %v", err)
	}
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var rep helperReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	if rep.Err != "" {
		t.Fatalf("helper: %s", rep.Err)
	}
	if rep.DirectErr == "" {
		t.Fatalf("the helper reached %s without the proxy: not in its own network namespace", allowed)
	}
	if rep.AllowedStatus != 200 || rep.AllowedBody != "allowed host="+allowed {
		t.Errorf("allowed through the bridge = %d %q", rep.AllowedStatus, rep.AllowedBody)
	}
	if rep.DeniedStatus != 403 || !strings.Contains(rep.DeniedBody, "boundary.worlds.w.allow") {
		t.Errorf("denied through the bridge = %d %q, want the proxy's 403", rep.DeniedStatus, rep.DeniedBody)
	}
	if rep.ConnectStatus != 403 {
		t.Errorf("CONNECT to the denied host through the bridge = %d, want 403", rep.ConnectStatus)
	}
	if n := s.deniedHits.Load(); n != 0 {
		t.Errorf("the denied server got %d requests", n)
	}
	if !strings.Contains(events.String(), `"host":"127.0.0.2"`) || strings.Count(events.String(), "\n") != 1 {
		t.Errorf("denial events = %q, want one for 127.0.0.2", events.String())
	}
	if st := p.Stats(); st.Allowed != 1 || st.Denied != 2 {
		t.Errorf("stats = %+v, want 1 allowed, 2 denied", st)
	}
}

// Bridge stops with its context, closing the connections it carries.
func TestBridgeStopsWithItsContext(t *testing.T) {
	_, sock, _ := startProxy(t)
	l, err := bridge.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bridge.Serve(ctx, l, sock) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 10.255.255.1:9 HTTP/1.1\r\nHost: 10.255.255.1:9\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("through the bridge: %v %v", resp, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Bridge did not return after its context ended")
	}
	if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		t.Fatal("the bridge still listens after its context ended")
	}
}
