package engine

import (
	"fmt"

	"github.com/stratahq/strata/overlay"
)

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

// buildStateMode is w's choice, else the configured default, else keep.
func (e *Engine) buildStateMode(w *World) BuildStateMode {
	if m := BuildStateMode(w.BuildState); m != "" && m.Validate() == nil {
		return m
	}
	if e.Config.BuildState != "" {
		return e.Config.BuildState
	}
	return BuildKeep
}

// buildStateRules matches build state: config.toml's ignore and build
// patterns. .git/, though status hides it, is not build state: a World's
// git history is rolled back with its sources. nil when there are none.
func (e *Engine) buildStateRules() (*overlay.Ignore, error) {
	pats := append(append([]string(nil), e.Config.Ignore...), e.Config.Build...)
	if len(pats) == 0 {
		return nil, nil
	}
	ign, err := overlay.NewIgnore(pats...)
	if err != nil {
		return nil, fmt.Errorf("build state patterns (ignore, build) in %s: %w", e.Config.Path(), err)
	}
	return ign, nil
}
