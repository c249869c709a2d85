package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/egress/bridge"
)

// openEgress opens the World's egress dir for a proxied session, before the
// session's mounts hide the state root. The handle is the init's alone: it is
// close-on-exec and the init is not dumpable, so the command cannot reach it
// through /proc/1/fd.
func (in *sessionInit) openEgress(spec *SessionSpec) error {
	if spec.Network != boundary.NetworkProxy {
		return nil
	}
	fd, err := unix.Open(spec.EgressDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network proxy: open the World's egress dir: %w", err)
	}
	in.egress = os.NewFile(uintptr(fd), "egress")
	return nil
}

// setupNetwork gives the session's network namespace what its mode promises,
// after the mounts and before the command starts: nothing for host (the
// host's network); loopback up for none; for proxy, loopback up and the bridge
// on 127.0.0.1:PORT to the World's egress proxy, named in the command's
// HTTP(S)_PROXY/ALL_PROXY (and NO_PROXY for loopback). The bridge runs as
// long as the init, that is as long as the session.
func (in *sessionInit) setupNetwork(spec *SessionSpec) error {
	if !spec.ownNetns() {
		return nil
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	if spec.Network != boundary.NetworkProxy {
		return nil
	}
	if in.egress == nil {
		return fmt.Errorf("network proxy: no egress dir")
	}
	l, err := bridge.Listen(0)
	if err != nil {
		return fmt.Errorf("network proxy: %w", err)
	}
	// Dialed by path through the dir's handle: a proxy restarted after a
	// crash (a new socket at the same name) is reached too.
	sock := "/proc/self/fd/" + strconv.Itoa(int(in.egress.Fd())) + "/" + EgressSocket
	go func() {
		if err := bridge.Serve(context.Background(), l, sock); err != nil {
			fmt.Fprintf(os.Stderr, "egress bridge: %v\n", err)
		}
	}()
	in.proxyPort = l.Addr().(*net.TCPAddr).Port
	spec.Env = withProxyEnv(spec.Env, in.proxyPort)
	return nil
}
