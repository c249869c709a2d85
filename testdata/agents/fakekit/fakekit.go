// Package fakekit is what the fake agents in testdata/agents share, so that
// each fake holds only what makes it that agent (its flags, its settings
// files, its screens, its hooks' fields): the record a test reads
// (Recorder), the terminal's input (ReadInput, Lines), option parsing
// (Args), hook commands run through the shell (Hooks, ExitCode), the
// hang-up handler (OnHangup) and ids (UUID).
package fakekit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Recorder appends what a fake received to the file named by an environment
// variable, one JSON object a line, each stamped with its time. Without the
// variable it records nothing.
type Recorder struct {
	f *os.File
}

// OpenRecord opens the record named by $env (none when it is unset).
func OpenRecord(env string) (*Recorder, error) {
	p := os.Getenv(env)
	if p == "" {
		return &Recorder{}, nil
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f}, nil
}

// Log records m, with m["time"] set to now.
func (r *Recorder) Log(m map[string]any) {
	if r.f == nil {
		return
	}
	m["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	line, _ := json.Marshal(m)
	_, _ = r.f.Write(append(line, '\n'))
}

// Close closes the record.
func (r *Recorder) Close() {
	if r.f != nil {
		r.f.Close()
	}
}

// ReadInput reads one input from the terminal: a line, or a bracketed paste
// however many lines it has (the Enter after it submits it), as a terminal
// UI takes a pasted prompt. The paste markers are dropped.
func ReadInput(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	for err == nil && strings.Contains(line, "\x1b[200~") && !strings.Contains(line, "\x1b[201~") {
		var more string
		more, err = r.ReadString('\n')
		line += more
	}
	return strings.NewReplacer("\x1b[200~", "", "\x1b[201~", "").Replace(line), err
}

// Lines reads inputs (ReadInput) from r in the background, each without its
// line end; the channel closes at the end of input.
func Lines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		br := bufio.NewReader(r)
		for {
			line, err := ReadInput(br)
			if line != "" || err == nil {
				ch <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				close(ch)
				return
			}
		}
	}()
	return ch
}

// Args walks a command line: Next moves to each argument in turn, setting
// Arg (the whole argument) and Name (what stands before an "=" in it).
type Args struct {
	list  []string
	i     int
	Arg   string
	Name  string
	value string
	inArg bool
}

// NewArgs walks list.
func NewArgs(list []string) *Args { return &Args{list: list, i: -1} }

// Next moves to the next argument; false when there is none.
func (a *Args) Next() bool {
	a.i++
	if a.i >= len(a.list) {
		return false
	}
	a.Arg = a.list[a.i]
	a.Name, a.value, a.inArg = strings.Cut(a.Arg, "=")
	return true
}

// Value is the current option's value: after its "=", else the next
// argument (which it takes); false when there is neither.
func (a *Args) Value() (string, bool) {
	if a.inArg {
		return a.value, true
	}
	return a.Following()
}

// Following takes the next argument as the current option's value, "=" or
// not (clap's way for options that take their value apart); false when
// there is none.
func (a *Args) Following() (string, bool) {
	if a.i+1 >= len(a.list) {
		return "", false
	}
	a.i++
	return a.list[a.i], true
}

// HookCmd is one hook command as agents' settings files declare it.
type HookCmd struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Name    string `json:"name"`
	Timeout int    `json:"timeout"`
}

// HookGroup is a matcher and the commands it runs.
type HookGroup struct {
	Matcher string    `json:"matcher"`
	Hooks   []HookCmd `json:"hooks"`
}

// Hooks runs an agent's hook commands: each matching command through the
// shell in Dir, the event's JSON on stdin, one at a time (also from a
// signal handler), every run recorded.
type Hooks struct {
	Groups      map[string][]HookGroup // by event
	Match       func(event, matcher, target string) bool
	TimeoutUnit time.Duration // what a HookCmd's Timeout counts; 60 s without one
	Dir         string
	Env         []string // added to the fake's environment
	Rec         *Recorder
	mu          sync.Mutex
}

// Run runs the hooks for event whose matcher matches target, with in (the
// event's JSON) on stdin, one after another.
func (h *Hooks) Run(event, target string, in map[string]any) {
	data, _ := json.Marshal(in)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.Groups[event] {
		if !h.Match(event, g.Matcher, target) {
			continue
		}
		for _, c := range g.Hooks {
			if c.Type != "command" {
				continue
			}
			timeout := 60 * time.Second
			if c.Timeout > 0 {
				timeout = time.Duration(c.Timeout) * h.TimeoutUnit
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			cmd := exec.CommandContext(ctx, "sh", "-c", c.Command)
			cmd.Dir = h.Dir
			cmd.Stdin = bytes.NewReader(data)
			cmd.Env = append(os.Environ(), h.Env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			cancel()
			h.Rec.Log(map[string]any{"what": "hook", "event": event, "matcher": g.Matcher, "command": c.Command, "input": in, "exit": ExitCode(err), "stdout": stdout.String(), "stderr": stderr.String()})
		}
	}
}

// ExitCode is the exit status a command's run error says: 0 for none, -1
// when it did not start or was killed.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode()
	}
	return -1
}

// OnHangup ends the fake as the agent does on a hang-up or TERM: it records
// the signal, calls end (if any), and exits 128+signal.
func OnHangup(rec *Recorder, end func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		rec.Log(map[string]any{"what": "signal", "text": sig.String()})
		if end != nil {
			end()
		}
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
}

// UUID is a random UUID shaped as the given version (4; Codex's thread ids
// are 7-shaped).
func UUID(version byte) string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | version<<4
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
