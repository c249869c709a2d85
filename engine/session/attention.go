package session

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Attention says whether a session (or a World) needs the person.
type Attention string

const (
	AttentionWaiting Attention = "waiting" // a PTY session blocked reading its terminal, quiet for 2 s
	AttentionFailed  Attention = "failed"  // ended with a non-zero status or a signal, or did not start
	AttentionRunning Attention = "running"
	AttentionLost    Attention = "lost" // its init vanished without recording an end
	AttentionDone    Attention = "done" // exited 0
	AttentionIdle    Attention = "idle" // no sessions
)

// attentionOrder lists attentions most urgent first: a session waiting for input
// blocks an agent until someone answers; a failure wants a look; running work is
// worth watching; a lost session is stale bookkeeping; done and idle need nothing.
var attentionOrder = []Attention{
	AttentionWaiting, AttentionFailed, AttentionRunning, AttentionLost, AttentionDone, AttentionIdle,
}

// AttentionOf is a session's attention as its state implies it; a running
// session reports what its init last recorded (running or waiting).
func AttentionOf(m Meta) Attention {
	switch {
	case m.State.Ended() && m.State != Lost && m.KilledByStrata:
		// Stopped on purpose (K, kill, rollback --kill): not the World failing.
		return AttentionDone
	}
	switch m.State {
	case Exited:
		return AttentionDone
	case Failed, Killed:
		return AttentionFailed
	case Lost:
		return AttentionLost
	}
	if m.Attention == AttentionWaiting {
		return AttentionWaiting
	}
	return AttentionRunning
}

// WorldAttention is the most urgent attention among a World's sessions, in the
// order waiting > failed > running > lost > done > idle; idle when there are none.
func WorldAttention(sessions []Meta) Attention {
	best := len(attentionOrder) - 1
	for _, s := range sessions {
		if i := slices.Index(attentionOrder, AttentionOf(s)); i >= 0 && i < best {
			best = i
		}
	}
	return attentionOrder[best]
}

// Waiting-for-input detection, run by a PTY session's init (so pids are in the
// session's pid namespace and /proc is its own).
const (
	// QuietBeforeWaiting: a process blocked on the terminal but still printing is
	// working, not waiting.
	QuietBeforeWaiting = 2 * time.Second
	AttentionInterval  = 500 * time.Millisecond
)

// ReadSyscalls, PollSyscalls and EpollSyscalls are syscall numbers (per
// architecture) that block reading a terminal: a read on the pty's fd, a poll
// family call by a process whose stdin is the pty (readline and most line
// editors poll first), or an epoll wait whose set holds the pty (libuv: node,
// and so Gemini CLI and Codex's launcher).
var (
	ReadSyscalls = map[string][]int{
		"amd64": {0, 17, 19, 295}, // read, pread64, readv, preadv
		"arm64": {63, 65, 67, 69}, // read, readv, pread64, preadv
	}
	PollSyscalls = map[string][]int{
		"amd64": {7, 23, 270, 271}, // poll, select, pselect6, ppoll
		"arm64": {72, 73},          // pselect6, ppoll
	}
	EpollSyscalls = map[string][]int{
		"amd64": {232, 281, 441}, // epoll_wait, epoll_pwait, epoll_pwait2
		"arm64": {22, 441},       // epoll_pwait, epoll_pwait2
	}
)

// terminalReader reports whether a process of the foreground process group fg is
// blocked reading the terminal whose slave is ttyPath. procRoot is normally "/proc".
// Every thread counts, not only a process's first: a Go program reads its
// terminal on whichever thread the reading goroutine runs, while its main
// thread sleeps in a futex or waits in the runtime's netpoller.
func terminalReader(procRoot string, fg int, ttyPath string) bool {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := filepath.Join(procRoot, e.Name())
		st, err := ReadProcStatFile(filepath.Join(dir, "stat"))
		if err != nil || st.Pgrp != fg {
			continue
		}
		tasks, err := os.ReadDir(filepath.Join(dir, "task"))
		if err != nil {
			// No task list (a fake /proc): the process's first thread.
			if st.State == 'S' && blockedOnTerminal(dir, ttyPath) {
				return true
			}
			continue
		}
		for _, t := range tasks {
			tdir := filepath.Join(dir, "task", t.Name())
			if ts, err := ReadProcStatFile(filepath.Join(tdir, "stat")); err != nil || ts.State != 'S' {
				continue
			}
			if blockedOnTerminal(tdir, ttyPath) {
				return true
			}
		}
	}
	return false
}

// blockedOnTerminal says whether the thread (or process) at procDir sits in
// a syscall reading the terminal ttyPath.
func blockedOnTerminal(procDir, ttyPath string) bool {
	data, err := os.ReadFile(filepath.Join(procDir, "syscall"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data))
	if len(fields) < 2 {
		return false // "running" or "-1 ..." (not in a syscall)
	}
	nr, err := strconv.Atoi(fields[0])
	if err != nil {
		return false
	}
	isTTY := func(fd int64) bool {
		target, err := os.Readlink(filepath.Join(procDir, "fd", strconv.FormatInt(fd, 10)))
		return err == nil && target == ttyPath
	}
	arg0 := func() (int64, bool) {
		fd, err := strconv.ParseInt(strings.TrimPrefix(fields[1], "0x"), 16, 64)
		return fd, err == nil
	}
	switch {
	case slices.Contains(ReadSyscalls[runtime.GOARCH], nr):
		fd, ok := arg0()
		return ok && isTTY(fd)
	case slices.Contains(EpollSyscalls[runtime.GOARCH], nr):
		// The set is in the epoll fd's fdinfo ("tfd: N events: ..."): a
		// Go runtime's netpoller waits on its own set, without the
		// terminal, and is not reading it.
		epfd, ok := arg0()
		if !ok {
			return false
		}
		info, err := os.ReadFile(filepath.Join(procDir, "fdinfo", strconv.FormatInt(epfd, 10)))
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(info), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "tfd:" {
				if tfd, err := strconv.ParseInt(f[1], 10, 64); err == nil && isTTY(tfd) {
					return true
				}
			}
		}
		return false
	case slices.Contains(PollSyscalls[runtime.GOARCH], nr):
		return isTTY(0)
	}
	return false
}
