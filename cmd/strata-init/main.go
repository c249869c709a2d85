// As strata: a session's init is idle for as long as its command runs, and
// the runtime would otherwise re-read the cgroup CPU quota every second.
//
//go:debug updatemaxprocs=0

// Command strata-init is a session's init: what `strata __session-init` is,
// in a binary that links the init alone, so that each `strata exec` starts
// a process about half the size of strata. strata starts it when it lies
// beside the strata binary (make build, make release and the release
// archives put it there), and re-executes itself otherwise (go install
// installs strata alone); a strata-init of another build hands the session
// back to strata. It is started by strata only.
package main

import (
	"os"

	"github.com/stratahq/strata/engine/local"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == local.ResidentInitArg {
		os.Exit(local.ResidentInitMain(os.Args[2:]))
	}
	os.Exit(local.SessionInitMain(os.Args[1:]))
}
