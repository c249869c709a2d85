package main

import (
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine"
)

func realPath(p string) (string, error) { return filepath.EvalSymlinks(p) }

func unixSignalName(s syscall.Signal) string { return unix.SignalName(s) }

func shellQuote(argv []string) string { return engine.ShellQuote(argv) }
