package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratahq/strata/engine/boundary"
)

// boundaryOf is the effective boundary of a session of the local World w
// (config [boundary], the World's level and pass_env, the session's request)
// for a command whose caller's environment is env. Nil at the tree level,
// which keeps today's view of the host.
func (e *Engine) boundaryOf(w *World, o ExecOptions, env []string) (*boundary.Boundary, error) {
	iso := o.Isolation
	if iso == "" {
		iso = w.Isolation
	}
	if iso == IsolationTree {
		return nil, nil
	}
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	r := boundary.Request{Level: string(iso), PassEnv: append(append([]string{}, w.PassEnv...), o.PassEnv...)}
	if o.NoNetwork {
		r.Network = string(boundary.NetworkNone)
	}
	hd := e.Paths.Home(w.Name)
	b, err := boundary.Compute(e.Config.effectiveBoundary(), boundary.World{
		Name: w.Name, Source: w.Source, StateRoot: e.Paths.Root, Home: home,
		HomeUpper: filepath.Join(hd, "upper"), HomeWork: filepath.Join(hd, "work"),
		Agent: w.Labels["agent"],
	}, env, r)
	if err != nil {
		var ke *boundary.KeyError
		if errors.As(err, &ke) {
			return nil, e.Config.Problem(ke.Key, ke.Err)
		}
		return nil, fmt.Errorf("boundary: %w", err)
	}
	return b, nil
}

// Boundary is the effective boundary of a new session of World name with
// options o (what `strata show` and the TUI describe); nil for a World whose
// sessions do not run on this host's file system, or at the tree level with
// no description wanted. At tree it describes tree.
func (e *Engine) Boundary(name string, o ExecOptions) (*boundary.Boundary, error) {
	w, err := e.World(name)
	if err != nil {
		return nil, err
	}
	if !e.runtimeFor(w).hostView() {
		return nil, nil
	}
	env, _ := o.envAndCwd(w)
	b, err := e.boundaryOf(w, o, env)
	if err != nil || b != nil {
		return b, err
	}
	// tree: described as such.
	return boundary.Compute(nil, boundary.World{Name: w.Name, Source: w.Source, StateRoot: e.Paths.Root}, env, boundary.Request{Level: string(boundary.LevelTree)})
}
