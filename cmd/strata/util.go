package main

import (
	"path/filepath"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine"
)

func isValidUTF8(s string) bool { return utf8.ValidString(s) }

func realPath(p string) (string, error) { return filepath.EvalSymlinks(p) }

func unixSignalName(s syscall.Signal) string { return unix.SignalName(s) }

func shellQuote(argv []string) string { return engine.ShellQuote(argv) }
