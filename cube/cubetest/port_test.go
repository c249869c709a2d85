package cubetest

import (
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// While the fake is Down its ports stay taken: another server cannot
// listen there (on the old fake it could, and a client retrying against
// "down" Cube was answered by that server), and a connection is refused,
// not reset after it was made. Up brings the same addresses back.
func TestDownKeepsPortsRefusing(t *testing.T) {
	s := New(t, Options{})
	api, proxy := s.api.address(), s.ProxyAddr()
	s.Down()
	for _, addr := range []string{api, proxy} {
		if ln, err := net.Listen("tcp", addr); err == nil {
			_ = ln.Close()
			t.Errorf("another server listened on %s while the fake was down", addr)
		} else if !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("listen on %s while down: %v, want EADDRINUSE", addr, err)
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			t.Errorf("dial %s while down connected", addr)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial %s while down: %v, want connection refused", addr, err)
		}
	}
	if err := s.Up(); err != nil {
		t.Fatalf("up: %v", err)
	}
	if s.api.address() != api || s.ProxyAddr() != proxy {
		t.Fatalf("up moved the fake: %s %s, was %s %s", s.api.address(), s.ProxyAddr(), api, proxy)
	}
	create(t, s, `{"templateID":"base"}`)
	// Down and Up again: the hold survives more than one cycle.
	s.Down()
	if ln, err := net.Listen("tcp", api); err == nil {
		_ = ln.Close()
		t.Errorf("another server listened on %s while the fake was down again", api)
	}
	if err := s.Up(); err != nil {
		t.Fatalf("second up: %v", err)
	}
	// The fake's crash cut the kept-alive connection of the first create.
	http.DefaultClient.CloseIdleConnections()
	create(t, s, `{"templateID":"base"}`)
}

// Close frees the ports.
func TestCloseFreesPorts(t *testing.T) {
	s := New(t, Options{})
	api := s.api.address()
	s.Close()
	ln, err := net.Listen("tcp", api)
	if err != nil {
		t.Fatalf("listen on %s after Close: %v", api, err)
	}
	_ = ln.Close()
	if err := s.Up(); err == nil {
		t.Errorf("Up after Close succeeded")
	}
}
