package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// buildTool builds a testdata/agents program once per test binary.
var (
	buildMu  sync.Mutex
	builtBin = map[string]string{}
	buildDir string
)

func buildTool(t *testing.T, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := builtBin[name]; ok {
		return p
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "strata-agents-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	out := filepath.Join(buildDir, name)
	cmd := exec.Command("go", "build", "-o", out, "./testdata/agents/"+name)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, b)
	}
	builtBin[name] = out
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// terminal is a program running on a PTY, its output collected.
type terminal struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan error
	eof    chan struct{} // the output reader saw the terminal close
}

func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	// Non-blocking, so the runtime poller owns it and Close wakes a pending
	// Read (and really hangs the terminal up).
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no /dev/ptmx: %v", err)
	}
	m := os.NewFile(uintptr(mfd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

func startOnPTY(t *testing.T, dir string, env []string, argv ...string) *terminal {
	t.Helper()
	m, s := openPTY(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	term := &terminal{t: t, master: m, cmd: cmd, done: make(chan error, 1), eof: make(chan struct{})}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				close(term.eof)
				return
			}
		}
	}()
	go func() { term.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		m.Close()
	})
	return term
}

func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

func (term *terminal) typeLine(s string) {
	if _, err := term.master.Write([]byte(s + "\r")); err != nil {
		term.t.Fatal(err)
	}
}

func (term *terminal) wait() int {
	select {
	case err := <-term.done:
		select { // the last output, still in the terminal
		case <-term.eof:
		case <-time.After(2 * time.Second):
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			term.t.Fatal(err)
		}
		return 0
	case <-time.After(20 * time.Second):
		term.t.Fatalf("program did not exit; screen:\n%s", term.screen())
		return -1
	}
}

// watcher feeds a hook channel into a Tracker, as a session supervisor will.
type watcher struct {
	t      *testing.T
	r      *Reader
	tr     *Tracker
	events []Event
	ended  []Turn
	// patience is how long until waits (default 20 s; real agents start slowly
	// on a loaded machine).
	patience time.Duration
}

func (w *watcher) poll() {
	evs, err := w.r.Read()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, e := range evs {
		w.events = append(w.events, e)
		if turn := w.tr.Apply(e); turn != nil {
			w.ended = append(w.ended, *turn)
		}
	}
}

func (w *watcher) until(term *terminal, what string, ok func(Status) bool) Status {
	w.t.Helper()
	patience := w.patience
	if patience == 0 {
		patience = 20 * time.Second
	}
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		w.poll()
		if st := w.tr.Status(); ok(st) {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.t.Fatalf("never %s; status %+v; screen:\n%s", what, w.tr.Status(), term.screen())
	return Status{}
}

type record struct {
	What      string         `json:"what"`
	Text      string         `json:"text"`
	Event     string         `json:"event"`
	Exit      int            `json:"exit"`
	Stderr    string         `json:"stderr"`
	Input     map[string]any `json:"input"`
	Sources   []string       `json:"sources"`
	SessionID string         `json:"session_id"`
	Source    string         `json:"source"`
}

func readRecord(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

type fakeWorld struct {
	home, src, chanDir, record string
	setup                      HookSetup
	preset                     Preset
	installed                  Installed
}

// newFakeWorld lays out what a session gives an agent: a home, a source tree
// (with the project's own Claude settings, which must keep working), a hook
// channel and a private config dir with strata's hooks.
func newFakeWorld(t *testing.T) *fakeWorld {
	root := t.TempDir()
	w := &fakeWorld{
		home: filepath.Join(root, "home"), src: filepath.Join(root, "src"),
		chanDir: filepath.Join(root, "events"), record: filepath.Join(root, "record.jsonl"),
	}
	for _, d := range []string{w.home + "/.claude", w.src + "/.claude", w.chanDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(w.home, ".claude/settings.json"), []byte(`{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"echo user >> `+root+`/user-hook"}]}]}}`), 0o644)
	os.WriteFile(filepath.Join(w.src, ".claude/settings.local.json"), []byte(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"echo local >> `+root+`/local-hook"}]}]}}`), 0o644)
	w.preset = Builtins()["claude"]
	cfg := filepath.Join(root, "config")
	w.setup = HookSetup{Strata: buildTool(t, "strata-hook"), HookDir: w.chanDir, ConfigDir: cfg, ConfigDirInWorld: cfg}
	var err error
	if w.installed, err = Install(w.preset, w.setup); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *fakeWorld) start(t *testing.T, l Launch) *terminal {
	l.Extra = append(slices.Clone(w.installed.Args), l.Extra...)
	inv, err := w.preset.Argv(l)
	if err != nil {
		t.Fatal(err)
	}
	inv.Argv[0] = buildTool(t, "fakeclaude")
	env := append([]string{"HOME=" + w.home, "PATH=" + os.Getenv("PATH"), "FAKECLAUDE_RECORD=" + w.record, "FAKECLAUDE_IDLE=300ms", "TERM=xterm"}, w.installed.Env...)
	return startOnPTY(t, w.src, env, inv.Argv...)
}

func TestFakeClaudeEndToEnd(t *testing.T) {
	w := newFakeWorld(t)
	sid := "0b7e6a4c-1d2e-4f30-8a1b-2c3d4e5f6a7b"
	term := w.start(t, Launch{Prompt: "clean up [bash: echo hi > out.txt]", SessionID: sid})
	wt := &watcher{t: t, r: NewReader(w.chanDir), tr: NewTracker(w.preset.Status, time.Now())}

	st := wt.until(term, "needs permission", func(s Status) bool { return s.State == StatePermission })
	if st.Reason != "allow Bash: echo hi > out.txt?" || st.SessionID != sid || st.Turn != 1 {
		t.Fatalf("permission status %+v", st)
	}
	if _, err := os.Stat(filepath.Join(w.src, "out.txt")); err == nil {
		t.Fatal("the tool ran before permission")
	}
	term.typeLine("y")
	wt.until(term, "turn 1 done", func(s Status) bool { return s.State == StateWaiting && s.Reason == "turn 1 done" })
	if data, _ := os.ReadFile(filepath.Join(w.src, "out.txt")); string(data) != "hi\n" {
		t.Errorf("out.txt = %q", data)
	}
	// Idle for longer than FAKECLAUDE_IDLE: idle_prompt arrives, the wait is not reset.
	since := wt.tr.Status().Since
	deadline := time.Now().Add(5 * time.Second)
	for !slices.ContainsFunc(wt.events, func(e Event) bool { return e.Notification == "idle_prompt" }) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		wt.poll()
	}
	if st := wt.tr.Status(); st.State != StateWaiting || !st.Since.Equal(since) {
		t.Errorf("after idle_prompt: %+v (since was %v)", st, since)
	}

	term.typeLine("now the docs [ask: which file?]")
	wt.until(term, "asking", func(s Status) bool { return s.State == StateQuestion })
	term.typeLine("README")
	wt.until(term, "turn 2 done", func(s Status) bool { return s.Reason == "turn 2 done" })
	term.typeLine("/exit")
	wt.until(term, "exited", func(s Status) bool { return s.State == StateExited })
	if code := term.wait(); code != 0 {
		t.Fatalf("exit %d; screen:\n%s", code, term.screen())
	}
	wt.tr.Exit(0, "", false, time.Now())
	if st := wt.tr.Status(); st.State != StateExited || st.Reason != "prompt_input_exit" {
		t.Errorf("final %+v", st)
	}

	// Turns for per-turn snapshots, each with its prompt and conversation.
	if len(wt.ended) != 2 || wt.ended[0].Prompt != "clean up [bash: echo hi > out.txt]" || wt.ended[1].Prompt != "now the docs [ask: which file?]" || wt.ended[0].SessionID != sid {
		t.Fatalf("ended turns %+v", wt.ended)
	}
	var kinds []string
	for _, e := range wt.events {
		if e.Kind != "Notification" || e.Notification != "idle_prompt" {
			kinds = append(kinds, e.Kind)
		}
		if e.SessionID != sid {
			t.Errorf("%s event with session %q", e.Kind, e.SessionID)
		}
	}
	wantKinds := []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "Notification", "PostToolUse", "Stop", "UserPromptSubmit", "Notification", "Stop", "SessionEnd"}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("events %q\nwant   %q", kinds, wantKinds)
	}
	// What the fake saw: the prompts, every strata hook succeeded, and the
	// user's and the project's own hooks still ran (strata added, never replaced).
	var prompts []string
	for _, r := range readRecord(t, w.record) {
		switch r.What {
		case "prompt":
			prompts = append(prompts, r.Text)
		case "hook":
			if r.Exit != 0 {
				t.Errorf("hook %s exited %d: %s", r.Event, r.Exit, r.Stderr)
			}
		case "settings":
			if len(r.Sources) != 3 {
				t.Errorf("settings read from %q", r.Sources)
			}
		}
	}
	if len(prompts) != 2 {
		t.Errorf("prompts %q", prompts)
	}
	root := filepath.Dir(w.home)
	for _, f := range []string{"user-hook", "local-hook"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the agent's own %s did not run: %v", f, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(w.home, ".claude/settings.json")); strings.Contains(string(data), "__hook") {
		t.Error("strata's hooks leaked into the user's settings")
	}

	// Rollback resumes the matching conversation; a fork continues it as a new one.
	term = w.start(t, Launch{Resume: sid, Prompt: "continue"})
	wt2 := &watcher{t: t, r: NewReader(w.chanDir), tr: NewTracker(w.preset.Status, time.Now())}
	wt2.until(term, "resumed turn done", func(s Status) bool { return s.Reason == "turn 1 done" })
	if wt2.events[0].Kind != "SessionStart" || wt2.events[0].Source != "resume" || wt2.tr.Status().SessionID != sid {
		t.Errorf("resume: first event %+v, session %q", wt2.events[0], wt2.tr.Status().SessionID)
	}
	term.typeLine("/exit")
	term.wait()
	wt2.poll() // a channel is one session's: take this one's SessionEnd off it
	if st := wt2.tr.Status(); st.State != StateExited {
		t.Errorf("resumed session after /exit: %+v", st)
	}

	fork := "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
	term = w.start(t, Launch{Resume: sid, Fork: true, SessionID: fork, Prompt: "other way"})
	wt3 := &watcher{t: t, r: NewReader(w.chanDir), tr: NewTracker(w.preset.Status, time.Now())}
	wt3.until(term, "forked turn done", func(s Status) bool { return s.Reason == "turn 1 done" })
	if wt3.tr.Status().SessionID != fork {
		t.Errorf("fork session %q, want %q", wt3.tr.Status().SessionID, fork)
	}
	term.typeLine("/exit")
	term.wait()

	// Resuming a conversation that does not exist fails as Claude does.
	term = w.start(t, Launch{Resume: "00000000-0000-4000-8000-000000000000"})
	if code := term.wait(); code == 0 || !strings.Contains(term.screen(), "No conversation found") {
		t.Errorf("resume of a missing conversation: exit %d, screen %q", code, term.screen())
	}
}

func TestFakeClaudeDeniedAndFlags(t *testing.T) {
	w := newFakeWorld(t)
	term := w.start(t, Launch{Prompt: "[bash: touch nope]"})
	wt := &watcher{t: t, r: NewReader(w.chanDir), tr: NewTracker(w.preset.Status, time.Now())}
	wt.until(term, "needs permission", func(s Status) bool { return s.State == StatePermission })
	term.typeLine("n")
	wt.until(term, "turn done", func(s Status) bool { return s.State == StateWaiting && s.Turn == 1 })
	if _, err := os.Stat(filepath.Join(w.src, "nope")); err == nil {
		t.Error("denied tool ran")
	}
	if slices.ContainsFunc(wt.events, func(e Event) bool { return e.Kind == "PostToolUse" }) {
		t.Error("PostToolUse after a denial")
	}
	term.master.Close() // the terminal goes away: SessionEnd, exit
	term.wait()
	wt.poll()
	if st := wt.tr.Status(); st.State != StateExited || st.Reason != "other" {
		t.Errorf("after hangup: %+v", st)
	}

	// The fake rejects what Claude rejects.
	for _, args := range [][]string{
		{"--fork-session"},
		{"--session-id", "not-a-uuid"},
		{"--resume", "x", "--session-id", "0b7e6a4c-1d2e-4f30-8a1b-2c3d4e5f6a7b"},
		{"--permission-mode", "yolo"},
		{"--bogus"},
	} {
		out, err := exec.Command(buildTool(t, "fakeclaude"), args...).CombinedOutput()
		if err == nil || !strings.HasPrefix(string(out), "error: ") {
			t.Errorf("%q: %v %q", args, err, out)
		}
	}
}
