package engine

import (
	"fmt"

	"github.com/stratahq/strata/overlay"
)

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
