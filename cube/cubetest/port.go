package cubetest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// portHold keeps a TCP port bound for the life of a fake, so that while
// the fake is Down nothing else can take the port: a connection there is
// refused (RST, no listener), never answered by another test's server or
// joined to a client's own ephemeral port. The hold is a socket bound with
// SO_REUSEPORT and never listening; the fake's listener binds the same
// address with SO_REUSEPORT too, which the kernel allows only to sockets
// that both set it under the same uid. Go's net.Listen does not set it, and
// the kernel never hands a port bound this way to bind(":0") or to an
// outgoing connection.
type portHold struct {
	fd   int
	addr string // host:port, with the port the kernel chose
}

// holdPort binds addr (a host:port, port 0 for any) and returns the hold.
func holdPort(addr string) (*portHold, error) {
	ap, err := resolveAddrPort(addr)
	if err != nil {
		return nil, err
	}
	family, sa := sockaddr(ap)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cubetest: socket to hold %s: %w", addr, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("cubetest: SO_REUSEPORT on the hold of %s: %w", addr, err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("cubetest: hold %s: %w", addr, err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("cubetest: address of the hold of %s: %w", addr, err)
	}
	var port int
	switch b := bound.(type) {
	case *unix.SockaddrInet4:
		port = b.Port
	case *unix.SockaddrInet6:
		port = b.Port
	}
	return &portHold{fd: fd, addr: net.JoinHostPort(ap.Addr().Unmap().String(), fmt.Sprint(port))}, nil
}

// listen starts listening on the held address, sharing the port with the
// hold.
func (h *portHold) listen() (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", h.addr)
}

// release frees the port (Close).
func (h *portHold) release() {
	if h.fd >= 0 {
		_ = unix.Close(h.fd)
		h.fd = -1
	}
}

func resolveAddrPort(addr string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("cubetest: listen address %q: %w", addr, err)
	}
	switch host {
	case "":
		host = "0.0.0.0"
	case "localhost":
		host = "127.0.0.1"
	}
	ta, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("cubetest: listen address %q: %w", addr, err)
	}
	return ta.AddrPort(), nil
}

func sockaddr(ap netip.AddrPort) (int, unix.Sockaddr) {
	a := ap.Addr().Unmap()
	if a.Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
}
