package cuberun

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/engine/boundary"
)

// The egress policy of a cube World. The MicroVM is the boundary, and Cube
// enforces egress itself (CubeVS, from the create request), so the same
// [boundary] config maps onto the create request:
//
//   - none: allow_internet_access false and network.allowPublicTraffic false;
//   - host: nothing (the template's default: internet);
//   - proxy: both false, and network.allowOut the CIDRs of the allow-list,
//     resolved when the sandbox is created: each exact host name becomes a
//     /32 (/128) per address it resolves to then, an address entry is its
//     own /32.
//
// What cannot be mapped (Cube filters by address, not by name): a wildcard
// entry ("*.githubusercontent.com": subdomains cannot be enumerated) and a
// name that does not resolve at create time are left out and logged; ports
// are not kept (an entry "host:8443" allows every port of host's
// addresses); a host whose addresses change later (a CDN) is reached at its
// create-time addresses only; `strata allow` takes effect for sandboxes
// created afterwards, not for a running one; there are no egress.denied
// events (Cube does not report refusals).

// CubeResolve resolves a host for the create request (a test stub replaces it).
var CubeResolve = net.DefaultResolver.LookupIPAddr

// cubeNetwork sets req's egress policy from World w's network mode and
// allow-list (see above).
func (e *Runtime) cubeNetwork(w *World, req *cube.CreateRequest) {
	n, err := e.h.SessionNetwork(w, e.cubeLevel(w), ExecOptions{})
	if err != nil || n == boundary.NetworkHost {
		return
	}
	off := false
	req.AllowInternetAccess = &off
	req.Network = &cube.Network{AllowPublicTraffic: &off}
	if n != boundary.NetworkProxy {
		return
	}
	list, err := e.h.EgressAllowlist(w.Name)
	if err != nil {
		// A World being created has no world.toml yet: config alone.
		list, _ = boundary.ParseAllowlist(append(append(append([]string{}, boundary.DefaultAllow...), e.cfg().Boundary.Allow...), e.cfg().Boundary.Worlds[w.Name].Allow...))
	}
	cidrs, unmapped := resolveCIDRs(list)
	if len(unmapped) > 0 {
		e.Log.Warn("cube egress: allow-list entries Cube cannot enforce by address", "world", w.Name, "entries", unmapped)
	}
	req.Network.AllowOut = cidrs
}

// cubeLevel is the isolation level whose network default a cube World takes.
func (e *Runtime) cubeLevel(w *World) Isolation {
	if w.Isolation != "" {
		return w.Isolation
	}
	return e.cfg().Isolation
}

// resolveCIDRs maps allow-list entries to CIDRs (sorted, unique) and names
// the entries it cannot map.
func resolveCIDRs(list boundary.Allowlist) (cidrs, unmapped []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	add := func(ip net.IP) {
		bits := 32
		if ip.To4() == nil {
			bits = 128
		}
		c := (&net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}).String()
		mu.Lock()
		cidrs = append(cidrs, c)
		mu.Unlock()
	}
	for _, p := range list {
		if p.Wildcard {
			mu.Lock() // resolvers started for earlier entries append too
			unmapped = append(unmapped, p.String())
			mu.Unlock()
			continue
		}
		if ip := net.ParseIP(p.Host); ip != nil {
			add(ip)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs, err := CubeResolve(ctx, p.Host)
			if err != nil || len(addrs) == 0 {
				mu.Lock()
				unmapped = append(unmapped, p.String())
				mu.Unlock()
				return
			}
			for _, a := range addrs {
				add(a.IP)
			}
		}()
	}
	wg.Wait()
	slices.Sort(cidrs)
	slices.Sort(unmapped)
	return slices.Compact(cidrs), slices.Compact(unmapped)
}
