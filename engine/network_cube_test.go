package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/stratahq/strata/cube/cubetest"
	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/cuberun"
)

// The same [boundary] config means the same on Cube: none and proxy turn
// internet access off in the create request the fake receives; proxy lets
// out the allow-list's addresses (names resolved at create time); host
// leaves the template's default. Wildcards and unresolvable names are not
// sent (they cannot be enforced by address).
func TestCubeNetworkPolicyInCreateRequest(t *testing.T) {
	ce := newCubeEnv(t, cubetest.Options{})
	old := cuberun.CubeResolve
	t.Cleanup(func() { cuberun.CubeResolve = old })
	cuberun.CubeResolve = func(_ context.Context, host string) ([]net.IPAddr, error) {
		if host == "registry.example" {
			return []net.IPAddr{{IP: net.ParseIP("192.0.2.7")}, {IP: net.ParseIP("2001:db8::7")}}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	ce.e.Config.Boundary = boundary.Config{Worlds: map[string]boundary.Policy{
		"p": {Network: "proxy", Allow: []string{"10.1.2.3", "registry.example:8443", "*.wild.example", "nores.example"}},
		"n": {Network: "none"},
		"h": {Network: "host"},
	}}
	type body struct {
		Internet *bool `json:"allow_internet_access"`
		Network  *struct {
			Public   *bool    `json:"allowPublicTraffic"`
			AllowOut []string `json:"allowOut"`
		} `json:"network"`
	}
	created := func(name string) body {
		ce.srv.ResetRequests()
		ce.create(name, CreateOptions{})
		reqs := requestsMatching(ce.srv, "POST /sandboxes")
		if len(reqs) != 1 {
			t.Fatalf("%s: %d create requests", name, len(reqs))
		}
		var b body
		if err := json.Unmarshal(reqs[0].Body, &b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	off := func(p *bool) bool { return p != nil && !*p }

	p := created("p")
	if !off(p.Internet) || p.Network == nil || !off(p.Network.Public) {
		t.Fatalf("proxy: internet %v network %+v, want both off", p.Internet, p.Network)
	}
	if want := []string{"10.1.2.3/32", "192.0.2.7/32", "2001:db8::7/128"}; !slices.Equal(p.Network.AllowOut, want) {
		t.Errorf("proxy: allowOut %v, want %v", p.Network.AllowOut, want)
	}
	n := created("n")
	if !off(n.Internet) || n.Network == nil || !off(n.Network.Public) || len(n.Network.AllowOut) != 0 {
		t.Errorf("none: internet %v network %+v, want off and nothing allowed", n.Internet, n.Network)
	}
	if h := created("h"); h.Internet != nil || h.Network != nil {
		t.Errorf("host: internet %v network %+v, want the template's default (nothing sent)", h.Internet, h.Network)
	}
}
