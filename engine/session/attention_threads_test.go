package session

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// termReaderHelperEnv makes the test binary a program on a terminal whose
// main thread does one thing while another reads (see TestTerminalReaderThreads).
const termReaderHelperEnv = "STRATA_TEST_TERMREADER"

func init() {
	mode := os.Getenv(termReaderHelperEnv)
	if mode == "" {
		return
	}
	// In init the main goroutine runs on the process's first thread: locked
	// there, the reading goroutine below runs on another thread.
	runtime.LockOSThread()
	os.Exit(termReaderHelper(mode))
}

func termReaderHelper(mode string) int {
	switch mode {
	case "read-elsewhere":
		// A Go agent reading its terminal in a goroutine while its main
		// thread sleeps (fakeclaude, fakecodex).
		go func() {
			b := make([]byte, 64)
			_, _ = os.Stdin.Read(b)
			os.Exit(0)
		}()
		for {
			_ = unix.Nanosleep(&unix.Timespec{Sec: 1}, nil)
		}
	case "epoll-other", "epoll-tty":
		// A runtime's poller waiting on a set without the terminal (Go's
		// netpoller while the program waits on a child), or with it (libuv).
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return 1
		}
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return 1
		}
		fd := p[0]
		if mode == "epoll-tty" {
			fd = 0
		}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return 1
		}
		ev := make([]unix.EpollEvent, 1)
		for {
			if n, _ := unix.EpollWait(epfd, ev, -1); n > 0 {
				return 0
			}
		}
	}
	return 2
}

// The PTY heuristic looks at every thread of the foreground process group,
// and at what an epoll wait waits on: a Go program reading its terminal on a
// thread other than its first is waiting for input (the first thread alone
// said running, at random: the agent e2e flows' flakes); a program whose
// poller waits on other fds, with the terminal as its stdin, is not.
func TestTerminalReaderThreads(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want bool
	}{
		{"read-elsewhere", true},
		{"epoll-other", false},
		{"epoll-tty", true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			master, slave, slavePath, err := OpenPTY(WinSize{Rows: 24, Cols: 80})
			if err != nil {
				t.Skipf("no pty here: %v", err)
			}
			defer master.Close()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), termReaderHelperEnv+"="+tc.mode)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			// Past its start-up the helper stays in one state: sample it for a
			// while, and require the answer to hold.
			deadline := time.Now().Add(3 * time.Second)
			seen := map[bool]int{}
			time.Sleep(300 * time.Millisecond)
			for time.Now().Before(deadline) {
				var fg int
				_ = fileIoctl(master, func(fd int) (err error) {
					fg, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
					return err
				})
				seen[terminalReader("/proc", fg, slavePath)]++
				time.Sleep(50 * time.Millisecond)
			}
			if seen[!tc.want] > 0 {
				t.Fatalf("terminalReader said %v %d times and %v %d times, want always %v", !tc.want, seen[!tc.want], tc.want, seen[tc.want], tc.want)
			}
		})
	}
}
