package runtime

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/world"
	"github.com/stratahq/strata/overlay"
)

// CreateOptions are the parameters of `strata new`.
type CreateOptions struct {
	Name         string
	Source       string // "" = current directory
	Backend      world.Runtime
	MountBackend overlay.Backend // "" or auto = probe cheaply
	Isolation    world.Isolation // "" = the configured default
	Labels       map[string]string
	// PassEnv names variables every session gets although the boundary
	// would drop them.
	PassEnv  []string
	Template string // cube: template id ("" = from config)
	// FromCubeSnapshot creates a cube World's sandbox from this Cube
	// snapshot id (fork).
	FromCubeSnapshot string
	// CPU (millicores), MemoryMB and DiskMB pick the smallest configured
	// cube template that fits, when Template is empty.
	CPU      int
	MemoryMB int
	DiskMB   int
	// Progress, when set, gets a line for each step of a long preparation
	// (a cube template built for the World's size).
	Progress func(line string)
	// Network is the World's network mode; "" = config, then the level's.
	Network boundary.Network
	// BuildState is what rollback does with the World's build state: keep,
	// discard, or "" for config.toml's build_state.
	BuildState BuildStateMode
	// Trees are the World's extra trees (`new --mount`), as parsed
	// (world.ParseMount); Create canonicalises and checks them.
	Trees []world.Tree
}

// ExecOptions are the parameters of `strata exec`.
type ExecOptions struct {
	Argv      []string
	Env       []string // full environment for the command; nil = this process's
	Cwd       string   // inside the World; "" = the source root
	TTY       bool
	NoNetwork bool
	Isolation world.Isolation // "" = the World's
	Snapshot  bool            // take a snapshot first (auto_snapshot)
	// ID is the new session's id; "" = NewSessionID(). Binds are added to
	// the session's (agents: the hook channel, the strata binary).
	ID    string
	Binds []Bind
	// Network is the session's network mode (none, proxy, host); "" is the
	// World's (config, then the level's default). See engine/network.go.
	Network boundary.Network
	// PassEnv names variables passed although the boundary would drop them.
	PassEnv []string
}

// EnvAndCwd resolves the command's environment (default: this process's)
// and working directory (default: the source root; relative to it).
func (o ExecOptions) EnvAndCwd(w *world.World) ([]string, string) {
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	cwd := o.Cwd
	if cwd == "" {
		cwd = w.Source
	} else if !filepath.IsAbs(cwd) {
		cwd = filepath.Join(w.Source, cwd)
	}
	return env, cwd
}

// Bind mounts Source (a host path) at Target inside the session.
type Bind struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// BuildStateMode is what a rollback does with a World's build state (the
// paths config.toml's ignore and build patterns match, which snapshots
// leave out): see docs/design.md, "Build state".
type BuildStateMode string

const (
	// BuildKeep keeps the build state as the World has it and gives every
	// source file the rollback changes the current time, so an incremental
	// build rebuilds what depends on it. The default.
	BuildKeep BuildStateMode = "keep"
	// BuildDiscard drops the World's build state: after a rollback only what
	// the source tree itself holds at those paths is seen, and the next
	// build starts from there.
	BuildDiscard BuildStateMode = "discard"
)

// Validate accepts "", keep and discard.
func (m BuildStateMode) Validate() error {
	switch m {
	case "", BuildKeep, BuildDiscard:
		return nil
	}
	return fmt.Errorf("%q: want keep or discard", string(m))
}
