// Command strata runs many coding agents in parallel on one source tree,
// each in its own overlay World, and lets a person review and adopt their
// changes. With no arguments it opens the TUI; `strata help` lists the CLI.
package main

import (
	"os"

	"github.com/stratahq/strata/engine"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == engine.SessionInitArg {
		os.Exit(engine.SessionInitMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == engine.CubeSessionArg {
		os.Exit(engine.CubeSessionMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
