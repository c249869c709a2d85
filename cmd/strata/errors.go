package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"syscall"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/overlay/mount"
	"github.com/stratahq/strata/overlay/publish"
)

// exit maps the error a command returned to strata's exit status, after
// printing it (as text, or as JSON with --json): 0 for none and for asked-for
// help (flag.ErrHelp, usage already on stdout), the status an exitError
// carries (exec passes its command's through), 2 for a usage or config
// mistake, 1 for anything else. This and errorCodes are the one place errors
// become statuses and codes.
func (a *app) exit(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			a.printError(a.stderr, ee.err, a.jsonErrors)
		}
		return ee.code
	}
	a.printError(a.stderr, err, a.jsonErrors)
	switch errorCode(err) {
	case "usage", "config":
		return 2
	}
	return 1
}

// errorCodes map the errors a script may want to tell apart to the stable
// codes of `--json` errors (docs/cli.md); the first match wins. Anything
// else is "error".
var errorCodes = []struct {
	code  string
	match func(error) bool
}{
	{"usage", func(err error) bool {
		var ue *usageError
		return errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) || errors.Is(err, engine.ErrNoTree)
	}},
	{"config", func(err error) bool { var ce *engine.ConfigError; return errors.As(err, &ce) }},
	{"stale_pick", is(engine.ErrStalePick)},
	{"conflict", is(engine.ErrConflict)},
	{"partial_apply", is(engine.ErrPartialApply)},
	{"not_found", is(engine.ErrWorldNotFound, engine.ErrSnapshotNotFound, engine.ErrNoSession)},
	{"exists", is(engine.ErrWorldExists)},
	{"invalid_name", is(engine.ErrInvalidName)},
	{"sessions_running", is(engine.ErrSessionsRunning)},
	{"unsaved_work", is(engine.ErrUnsavedWork)},
	{"source_missing", is(engine.ErrSourceMissing)},
	{"world_broken", is(engine.ErrWorldBroken)},
	{"world_writing", is(engine.ErrWorldWriting)},
	{"session_not_running", is(engine.ErrSessionNotRunning)},
	{"start_failed", is(engine.ErrStartFailed)},
	{"no_space", is(syscall.ENOSPC, syscall.EDQUOT)},
	{"no_backend", is(mount.ErrNoBackend)},
	{"cube_not_configured", is(engine.ErrCubeNotConfigured)},
	{"unfinished_publication", is(publish.ErrIncomplete)},
	{"corrupt", is(engine.ErrCorruptTranscript)},
}

func is(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

// errorCode is err's stable code for `--json` errors.
func errorCode(err error) string {
	for _, c := range errorCodes {
		if c.match(err) {
			return c.code
		}
	}
	return "error"
}

// wantsJSON reports whether the command line asks for JSON (--json before
// any "--"), so that its errors are JSON too.
func wantsJSON(args []string) bool {
	for _, s := range args {
		if s == "--" {
			return false
		}
		switch strings.TrimLeft(s, "-") {
		case "json", "json=true", "json=1":
			if strings.HasPrefix(s, "-") {
				return true
			}
		}
	}
	return false
}

// printError writes err to stderr: "strata: message", or with --json
// {"error": {"code": ..., "message": ...}} on one line.
func (a *app) printError(w io.Writer, err error, asJSON bool) {
	if !asJSON {
		_, _ = io.WriteString(w, "strata: "+err.Error()+"\n")
		return
	}
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	enc := jsonEncoder(w)
	_ = enc.Encode(struct {
		Error body `json:"error"`
	}{body{errorCode(err), err.Error()}})
}

// marked is an error that reads as its message and is target for
// errors.Is, so its --json code is target's without changing the text.
type marked struct {
	msg    string
	target error
}

func (m *marked) Error() string { return m.msg }
func (m *marked) Unwrap() error { return m.target }

// notRunning is msg as an engine.ErrSessionNotRunning.
func notRunning(msg string) error { return &marked{msg, engine.ErrSessionNotRunning} }
