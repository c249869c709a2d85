package main

import (
	"github.com/stratahq/strata/tui"
)

// runTUI opens the workstation: `strata` and `strata tui [--all] [--source DIR]`.
func runTUI(a *app, in *input) error {
	all := in.Bool("all")
	source := in.String("source")
	if err := a.open(); err != nil {
		return err
	}
	return tui.Run(a.ctx, a.eng, tui.Options{AllWorlds: *all, Source: *source})
}
