// Command strata-hook stands in for `strata __hook` in tests until cmd/strata
// grows the subcommand: it calls agent.RunHook exactly as the CLI will.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/stratahq/strata/engine/agent"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 || args[0] != "__hook" {
		fmt.Fprintln(os.Stderr, "usage: strata __hook AGENT EVENT")
		os.Exit(1)
	}
	if err := agent.RunHook(args[1:], os.Stdin, os.Getenv, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1) // never 2: that would make Claude block the action
	}
}
