package engine

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/session"
)

// testCallerEnv makes the test binary act as a short-lived strata process that
// starts a session and then waits to be killed (see TestSessionSurvivesCaller).
const testCallerEnv = "STRATA_TEST_SESSION_CALLER"

// testCallerWaitEnv makes the caller wait for the session's end instead, and print
// its meta (see TestSessionRootless).
const testCallerWaitEnv = "STRATA_TEST_SESSION_WAIT"

func TestMain(m *testing.M) {
	// The tests re-execute their own binary as the session init.
	if len(os.Args) > 1 && os.Args[1] == SessionInitArg {
		os.Exit(SessionInitMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == ResidentInitArg {
		os.Exit(ResidentInitMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == EgressArg {
		os.Exit(EgressMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == testMQOpenArg {
		os.Exit(testMQOpen(os.Args[2:]))
	}
	if spec := os.Getenv(testCallerEnv); spec != "" {
		os.Exit(runTestCaller(spec))
	}
	flag.Parse()
	raiseParallel()
	// The proxies of the tests' Worlds idle out quickly (the crash-and-idle
	// test waits for it); startEgress hands them this value.
	egressIdle = 2 * time.Second
	// Resident inits outlive a test by their idle time; a test that did
	// not retire its Worlds' leaves them to this.
	os.Setenv("STRATA_RESIDENT_IDLE", "3s")
	session.CatchIgnoredJobSignals() // run backgrounded, the tests still get resident inits
	os.Exit(m.Run())
}

// raiseParallel lets at least 4 of the tests marked parallel (cube Worlds on
// the fake cluster, snapshot and apply round trips, each on its own state
// root) run at once unless -parallel is given: they wait on sessions, child
// processes and the fake's HTTP calls for much of their time, so GOMAXPROCS,
// go test's default, leaves a 2-core machine half idle. Tests that measure
// CPU, memory or time, or set package state, stay serial.
func raiseParallel() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && runtime.GOMAXPROCS(0) < 4 {
		_ = flag.Set("test.parallel", "4") // the flag exists: testing registered it
	}
}

func runTestCaller(specJSON string) int {
	var spec SessionSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	meta, err := StartSession(context.Background(), spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv(testCallerWaitEnv) != "" {
		if meta, err = WaitSession(context.Background(), spec.Dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(meta)
	if os.Getenv(testCallerWaitEnv) == "" {
		time.Sleep(time.Hour)
	}
	return 0
}

// testMQOpenArg runs the test binary as `mq_open NAME O_CREAT|O_EXCL` (in a
// World: the resident init test's message queue): it prints "created" or
// the error.
const testMQOpenArg = "__test-mq-open"

func testMQOpen(args []string) int {
	if len(args) != 1 {
		return 2
	}
	name, err := unix.BytePtrFromString(args[0])
	if err != nil {
		return 2
	}
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o600, 0, 0, 0)
	if errno != 0 {
		fmt.Println(errno)
		return 1
	}
	unix.Close(int(fd))
	fmt.Println("created")
	return 0
}
