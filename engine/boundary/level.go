package boundary

import "fmt"

// Level is how much of the host a session's command can reach.
type Level string

const (
	// LevelTree protects only the source path and strata's state: the rest of
	// the host stays writable, credentials readable, the network the host's.
	// Today's behaviour, kept as an explicit opt-in.
	LevelTree Level = "tree"
	// LevelSandbox is the default: the host is read-only but for the World's
	// view of the source, private temporary dirs, a per-World layer over the
	// home and declared shared caches; credentials are hidden, the
	// environment is scrubbed and egress goes through the allow-list proxy.
	LevelSandbox Level = "sandbox"
	// LevelStrict is LevelSandbox with the home read-only too and no network
	// unless asked for.
	LevelStrict Level = "strict"
)

// DefaultLevel is the level of a World that names none.
const DefaultLevel = LevelSandbox

// Levels lists the levels, loosest first.
var Levels = []Level{LevelTree, LevelSandbox, LevelStrict}

// ParseLevel reads a level's name; "" is the default level.
func ParseLevel(s string) (Level, error) {
	switch Level(s) {
	case "":
		return DefaultLevel, nil
	case LevelTree, LevelSandbox, LevelStrict:
		return Level(s), nil
	}
	return "", fmt.Errorf("%q: want sandbox (the default), strict or tree", s)
}

// Network is how a World reaches the network.
type Network string

const (
	// NetworkNone leaves the World only its own loopback.
	NetworkNone Network = "none"
	// NetworkProxy gives the World its own network namespace whose only way
	// out is strata's egress proxy, which allows the hosts on the allow-list.
	NetworkProxy Network = "proxy"
	// NetworkHost shares the host's network, unix sockets in the abstract
	// namespace included.
	NetworkHost Network = "host"
)

// ParseNetwork reads a network mode's name; "" means the level's default.
func ParseNetwork(s string) (Network, error) {
	switch Network(s) {
	case "", NetworkNone, NetworkProxy, NetworkHost:
		return Network(s), nil
	}
	return "", fmt.Errorf("%q: want proxy (the default), none or host", s)
}

// defaultNetwork is a level's network when neither config nor session names one.
func (l Level) defaultNetwork() Network {
	switch l {
	case LevelTree:
		return NetworkHost
	case LevelStrict:
		return NetworkNone
	}
	return NetworkProxy
}
