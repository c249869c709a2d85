package session

import (
	"os"
	"os/signal"
	"syscall"
)

// CatchIgnoredJobSignals makes a process that started with SIGINT or SIGHUP
// ignored (a backgrounded `make test &`, nohup) catch it instead, so that
// what it starts inherits neither as ignored. Test harnesses call it: a
// `strata exec` with either ignored gives its session an init of its own
// (engine/local/procattrs_linux.go), and their tests want the resident
// init's. A signal it catches is dropped, as it was ignored before.
func CatchIgnoredJobSignals() {
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGHUP} {
		if signal.Ignored(sig) {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
}
