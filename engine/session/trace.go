package session

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Exec latency tracing. STRATA_TRACE=1 makes a strata process write one
// line per phase of its work to stderr, and a session started from it
// write its init's phases to the session's init.log:
//
//	strata-trace pid=123 t=1764600000.123456 +1.234ms exec: session dir
//
// t is wall-clock time (lines of the CLI, the session init and the egress
// proxy line up), +ms the time since the process's first trace point. It
// costs nothing when off: one bool test per phase.
var (
	traceOn  = os.Getenv("STRATA_TRACE") != ""
	traceMu  sync.Mutex
	traceOut io.Writer = os.Stderr
	traceT0            = time.Now()
)

// Tracing reports whether STRATA_TRACE phase tracing is on.
func Tracing() bool { return traceOn }

// Trace records that phase has just ended (STRATA_TRACE=1); a no-op otherwise.
func Trace(phase string) {
	if !traceOn {
		return
	}
	now := time.Now()
	traceMu.Lock()
	defer traceMu.Unlock()
	fmt.Fprintf(traceOut, "strata-trace pid=%d t=%d.%06d +%.3fms %s\n", os.Getpid(),
		now.Unix(), now.Nanosecond()/1000, float64(now.Sub(traceT0).Microseconds())/1000, phase)
}

// EnableInitTrace turns tracing on in a session's init whose caller traced
// (its environment is empty: the spec says so); lines go to init.log.
func EnableInitTrace(on bool) {
	if on {
		traceOn = true
		Trace("init: spec read")
	}
}
