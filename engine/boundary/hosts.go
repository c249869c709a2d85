package boundary

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// DefaultAllow is the egress allow-list every World starts from: the agent
// APIs and the package registries the toolchains in a World fetch from.
var DefaultAllow = []string{
	// Agent APIs.
	"api.anthropic.com",
	"api.openai.com",
	"generativelanguage.googleapis.com",
	"api.mistral.ai",
	// Go: the module proxy and checksum database, and go get straight from GitHub.
	"proxy.golang.org",
	"sum.golang.org",
	"github.com",
	"codeload.github.com",
	// npm, PyPI, crates.io.
	"registry.npmjs.org",
	"pypi.org",
	"files.pythonhosted.org",
	"crates.io",
	"static.crates.io",
	"index.crates.io",
	// Debian packages.
	"deb.debian.org",
}

// HostPattern is one allow-list entry: an exact host ("pypi.org"), or a
// wildcard over a domain's subdomains ("*.githubusercontent.com", which does
// not match the bare domain), optionally limited to one port
// ("registry.local:8443"). Without a port, any port is allowed.
type HostPattern struct {
	Host     string // lower case; for a wildcard, the suffix without "*."
	Wildcard bool
	Port     int // 0: any port
}

// ParseHostPattern reads an allow-list entry. IPv6 literals take brackets
// when a port follows ("[::1]:8080").
func ParseHostPattern(s string) (HostPattern, error) {
	var p HostPattern
	host := strings.TrimSpace(s)
	if host == "" {
		return p, fmt.Errorf("empty host")
	}
	if strings.Contains(host, "://") || strings.ContainsAny(host, "/?#@ ") {
		return p, fmt.Errorf("%q: want a host name, *.domain or host:port, not a URL", s)
	}
	if h, port, err := net.SplitHostPort(host); err == nil {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return p, fmt.Errorf("%q: port %q: want 1-65535", s, port)
		}
		host, p.Port = h, n
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.Count(host, ":") == 1 {
		return p, fmt.Errorf("%q: %w", s, err)
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.Wildcard, host = true, rest
	}
	if host == "" || strings.Contains(host, "*") {
		return p, fmt.Errorf("%q: a wildcard is allowed only as a leading \"*.\" (\"*.example.com\")", s)
	}
	if net.ParseIP(host) == nil {
		for _, label := range strings.Split(host, ".") {
			if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
				return p, fmt.Errorf("%q: not a host name", s)
			}
		}
	} else if p.Wildcard {
		return p, fmt.Errorf("%q: a wildcard takes a domain, not an address", s)
	}
	p.Host = host
	return p, nil
}

// Match tells whether host:port is allowed by p. host is compared without
// case and without a trailing dot.
func (p HostPattern) Match(host string, port int) bool {
	if p.Port != 0 && p.Port != port {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if p.Wildcard {
		return strings.HasSuffix(host, "."+p.Host)
	}
	return host == p.Host
}

func (p HostPattern) String() string {
	h := p.Host
	if p.Wildcard {
		h = "*." + h
	}
	if p.Port == 0 {
		return h
	}
	return net.JoinHostPort(h, strconv.Itoa(p.Port))
}

// Allowlist is a World's egress allow-list.
type Allowlist []HostPattern

// ParseAllowlist reads allow-list entries, naming the first bad one.
func ParseAllowlist(entries []string) (Allowlist, error) {
	out := make(Allowlist, 0, len(entries))
	for _, e := range entries {
		p, err := ParseHostPattern(e)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Allows tells whether some entry allows host:port.
func (a Allowlist) Allows(host string, port int) bool {
	for _, p := range a {
		if p.Match(host, port) {
			return true
		}
	}
	return false
}

// Strings gives the entries back as written in config.
func (a Allowlist) Strings() []string {
	out := make([]string, len(a))
	for i, p := range a {
		out[i] = p.String()
	}
	return out
}
