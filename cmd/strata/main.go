// The runtime would otherwise re-read the cgroup CPU quota every second to
// adjust GOMAXPROCS, waking an idle TUI for nothing; a strata process is
// short-lived or idle, and GOMAXPROCS is still set from the quota at start.
//
//go:debug updatemaxprocs=0

// Command strata runs many coding agents in parallel on one source tree,
// each in its own overlay World, and lets a person review and adopt their
// changes. With no arguments it opens the TUI; `strata help` lists the CLI.
package main

import (
	"os"

	"github.com/stratahq/strata/engine"
)

func main() {
	engine.Trace("main")
	if len(os.Args) > 1 && os.Args[1] == engine.SessionInitArg {
		os.Exit(engine.SessionInitMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == engine.ResidentInitArg {
		os.Exit(engine.ResidentInitMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == engine.EgressArg {
		os.Exit(engine.EgressMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == engine.CubeSessionArg {
		os.Exit(engine.CubeSessionMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "__hook" {
		os.Exit(hookMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == engine.AgentSuperviseArg {
		os.Exit(engine.AgentSuperviseMain(os.Args[2:]))
	}
	code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	engine.Trace("exit")
	os.Exit(code)
}
