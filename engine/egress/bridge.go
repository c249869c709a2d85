package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// Bridge runs inside a World's network namespace, where only loopback exists:
// it accepts TCP connections on l (127.0.0.1:PORT, what HTTPS_PROXY names) and
// carries each to the proxy's unix socket at socketPath (bound into the
// World's mount namespace). It returns when ctx is done, closing l and every
// connection it carries.
func Bridge(ctx context.Context, l net.Listener, socketPath string) error {
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
			splice(c, c, up)
		}()
	}
}

// ListenBridge listens on 127.0.0.1:port (0: any free port) for Bridge.
func ListenBridge(port int) (net.Listener, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("egress bridge: %w (is loopback up in the World's network namespace?)", err)
	}
	return l, nil
}
