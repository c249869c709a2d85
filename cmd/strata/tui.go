package main

import (
	"github.com/stratahq/strata/tui"
)

// runTUI opens the workstation: `strata` and `strata tui [--all] [--source DIR]`.
func runTUI(a *app, args []string) error {
	fs := a.flags("tui", "[--all] [--source DIR]")
	all := fs.Bool("all", false, "show every World, not only those over the current source")
	source := fs.String("source", "", "show the Worlds over this source tree (default: the current directory)")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usagef("%v", err)
	}
	if err := want(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	if err := a.open(); err != nil {
		return err
	}
	return tui.Run(a.ctx, a.eng, tui.Options{AllWorlds: *all, Source: *source})
}
