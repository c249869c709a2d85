// Package bridge is the half of a World's egress that runs inside its network
// namespace, in the session's init: it carries 127.0.0.1:PORT to the egress
// proxy's unix socket. It is apart from package egress (the proxy, run by
// strata) so that the init, started by every exec, links net alone and not
// net/http and crypto/tls.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Serve runs inside a World's network namespace, where only loopback exists:
// it accepts TCP connections on l (127.0.0.1:PORT, what HTTPS_PROXY names) and
// carries each to the proxy's unix socket at socketPath (bound into the
// World's mount namespace). It returns when ctx is done, closing l and every
// connection it carries.
func Serve(ctx context.Context, l net.Listener, socketPath string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("egress bridge: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			up, err := d.DialContext(ctx, "unix", socketPath)
			if err != nil {
				c.Close()
				return
			}
			stop := context.AfterFunc(ctx, func() { c.Close(); up.Close() })
			defer stop()
			Splice(c, c, up)
		}()
	}
}

// Listen listens on 127.0.0.1:port (0: any free port) for Bridge.
func Listen(port int) (net.Listener, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("egress bridge: %w (is loopback up in the World's network namespace?)", err)
	}
	return l, nil
}

// Splice copies both ways until both sides are done, then closes both. r is
// what to read from down (it may hold bytes already buffered).
func Splice(down net.Conn, r io.Reader, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, r) // a copy ends when either side closes
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(down, up)
		closeWrite(down)
	}()
	wg.Wait()
	up.Close()
	down.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}
