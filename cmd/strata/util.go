package main

import (
	"fmt"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine"
)

func realPath(p string) (string, error) { return filepath.EvalSymlinks(p) }

func unixSignalName(s syscall.Signal) string { return unix.SignalName(s) }

func shellQuote(argv []string) string { return engine.ShellQuote(argv) }

// count is "1 thing" or "N things", for what a person reads.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
