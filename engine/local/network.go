package local

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stratahq/strata/engine/boundary"
)

// EgressSocket is the egress proxy's socket in a World's egress dir.
const EgressSocket = "proxy.sock"

// withProxyEnv is env with the proxy variables pointing at the bridge on
// 127.0.0.1:port, replacing any the caller had (they name the host's
// proxies, unreachable from the World).
func withProxyEnv(env []string, port int) []string {
	add := boundary.ProxyEnv(port)
	drop := map[string]bool{}
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	out := make([]string, 0, len(env)+len(add))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// normalizeNetwork reconciles NoNetwork (the older field) with Network.
func (spec *SessionSpec) normalizeNetwork() error {
	n, err := boundary.ParseNetwork(string(spec.Network))
	if err != nil {
		return fmt.Errorf("network %w", err)
	}
	switch {
	case spec.NoNetwork && n == "":
		n = boundary.NetworkNone
	case spec.NoNetwork && n != boundary.NetworkNone:
		return fmt.Errorf("network %s contradicts no_network", n)
	case n == "":
		n = boundary.NetworkHost
	}
	spec.Network, spec.NoNetwork = n, n == boundary.NetworkNone
	if n == boundary.NetworkProxy && !filepath.IsAbs(spec.EgressDir) {
		return fmt.Errorf("network proxy: egress dir %q is not an absolute path", spec.EgressDir)
	}
	return nil
}

// ownNetns tells whether the session gets a network namespace of its own.
func (spec *SessionSpec) ownNetns() bool {
	switch {
	case spec.NoNetwork || spec.Network == boundary.NetworkNone || spec.Network == boundary.NetworkProxy:
		return true
	case spec.Network == "" && spec.Boundary != nil:
		// A spec started without the engine: the boundary's mode says.
		return spec.Boundary.Network != boundary.NetworkHost
	}
	return false
}
