package main

import "errors"

// runTUI opens the workstation TUI (replaced by the tui package's entry).
func runTUI(a *app, args []string) error {
	return errors.New("the TUI is not built yet; strata help lists the CLI")
}
