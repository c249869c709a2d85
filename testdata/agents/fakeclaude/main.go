// Command fakeclaude behaves like Claude Code 2.x as far as strata can see it:
// it takes Claude's documented flags, reads hooks from every settings file
// Claude reads, calls them with the documented JSON on stdin at the documented
// moments, draws a small TUI on its terminal and waits for input there. It
// records everything it received in $FAKECLAUDE_RECORD (JSON lines) for tests.
//
// Prompts script it: "[bash: CMD]" asks permission for the Bash tool and, if
// allowed (y on the terminal), runs CMD; "[ask: Q]" asks a question
// (elicitation) and waits for an answer line; "[fail]" ends the turn with
// StopFailure. "/exit" (or end of input) ends the session.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

type hookCmd struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout"`
}

type hookGroup struct {
	Matcher string    `json:"matcher"`
	Hooks   []hookCmd `json:"hooks"`
}

type settings struct {
	Hooks map[string][]hookGroup `json:"hooks"`
}

type fake struct {
	print          bool
	sessionID      string
	permissionMode string
	cwd            string
	home           string
	transcript     string
	hooks          map[string][]hookGroup
	record         *os.File
	in             chan string
	idle           time.Duration
	hookMu         sync.Mutex // hooks run one at a time, also from the signal handler
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func main() {
	os.Exit(run(os.Args[1:]))
}

func fail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", a...)
	return 1
}

func run(args []string) int {
	f := &fake{permissionMode: "default", hooks: map[string][]hookGroup{}, idle: 60 * time.Second}
	if d, err := time.ParseDuration(os.Getenv("FAKECLAUDE_IDLE")); err == nil {
		f.idle = d
	}
	if p := os.Getenv("FAKECLAUDE_RECORD"); p != "" {
		rec, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fail("record: %v", err)
		}
		f.record = rec
		defer rec.Close()
	}
	f.log(map[string]any{"what": "argv", "argv": args})

	var settingsArg, resume, sessionID, prompt string
	var fork, cont bool
	value := func(i *int, name string) (string, bool) {
		a := args[*i]
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if *i+1 >= len(args) {
			return "", false
		}
		*i++
		return args[*i], true
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, _ := strings.Cut(a, "=")
		var ok bool
		switch name {
		case "-p", "--print":
			f.print = true
			continue
		case "--fork-session":
			fork = true
			continue
		case "-c", "--continue":
			cont = true
			continue
		case "--dangerously-skip-permissions":
			f.permissionMode = "bypassPermissions"
			continue
		case "--verbose", "--debug":
			continue
		case "--settings":
			settingsArg, ok = value(&i, name)
		case "-r", "--resume":
			resume, ok = value(&i, name)
		case "--session-id":
			sessionID, ok = value(&i, name)
		case "--permission-mode":
			f.permissionMode, ok = value(&i, name)
		case "--model", "--output-format", "--input-format", "--append-system-prompt", "--allowedTools", "--disallowedTools", "--add-dir":
			_, ok = value(&i, name)
		default:
			if strings.HasPrefix(a, "-") {
				return fail("unknown option '%s'", a)
			}
			if prompt != "" {
				return fail("too many arguments. Expected 1 argument but got %d.", 2)
			}
			prompt, ok = a, true
		}
		if !ok {
			return fail("option '%s <value>' argument missing", name)
		}
	}
	if !slices.Contains([]string{"default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"}, f.permissionMode) {
		return fail("option '--permission-mode <mode>' argument '%s' is invalid.", f.permissionMode)
	}
	if fork && resume == "" && !cont {
		return fail("--fork-session can only be used with --continue or --resume")
	}
	if sessionID != "" {
		if !uuidRE.MatchString(sessionID) {
			return fail("Invalid session ID. Must be a valid UUID.")
		}
		if (resume != "" || cont) && !fork {
			return fail("--session-id can only be used with --continue or --resume if --fork-session is also specified.")
		}
	}

	f.cwd, _ = os.Getwd()
	f.home = os.Getenv("HOME")
	if err := f.loadSettings(settingsArg); err != nil {
		return fail("%v", err)
	}
	projects := filepath.Join(f.home, ".claude", "projects", strings.ReplaceAll(f.cwd, "/", "-"))
	source := "startup"
	switch {
	case resume != "":
		if _, err := os.Stat(filepath.Join(projects, resume+".jsonl")); err != nil {
			return fail("No conversation found with session ID: %s", resume)
		}
		source = "resume"
		f.sessionID = resume
	case cont:
		source = "resume"
	}
	if fork || f.sessionID == "" {
		f.sessionID = sessionID
		if f.sessionID == "" {
			f.sessionID = newUUID()
		}
	}
	os.MkdirAll(projects, 0o755)
	f.transcript = filepath.Join(projects, f.sessionID+".jsonl")
	if fork {
		if data, err := os.ReadFile(filepath.Join(projects, resume+".jsonl")); err == nil {
			os.WriteFile(f.transcript, data, 0o644)
		}
	}
	f.log(map[string]any{"what": "session", "session_id": f.sessionID, "source": source, "fork": fork})

	f.hook("SessionStart", source, map[string]any{"source": source, "model": "fake-opus"})

	if f.print {
		if prompt == "" {
			data, _ := io.ReadAll(os.Stdin)
			prompt = strings.TrimSpace(string(data))
		}
		if prompt == "" {
			return fail("Input must be provided either through stdin or as a prompt argument when using --print")
		}
		reply := f.turn(prompt)
		fmt.Println(reply)
		f.hook("SessionEnd", "other", map[string]any{"reason": "other"})
		return 0
	}

	// A hang-up or TERM ends the session as Claude does: SessionEnd, then exit.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		f.log(map[string]any{"what": "signal", "text": sig.String()})
		f.hook("SessionEnd", "other", map[string]any{"reason": "other"})
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	f.in = make(chan string)
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			line, err := r.ReadString('\n')
			// A bracketed paste is one input however many lines it has, as
			// in Claude's prompt box; the Enter after it submits it.
			for err == nil && strings.Contains(line, "\x1b[200~") && !strings.Contains(line, "\x1b[201~") {
				var more string
				more, err = r.ReadString('\n')
				line += more
			}
			line = strings.NewReplacer("\x1b[200~", "", "\x1b[201~", "").Replace(line)
			if line != "" || err == nil {
				f.in <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				close(f.in)
				return
			}
		}
	}()
	f.draw("")
	if prompt != "" {
		f.draw(f.turn(prompt))
	}
	for {
		line, ok := f.readLine(true)
		if !ok {
			f.hook("SessionEnd", "other", map[string]any{"reason": "other"})
			return 0
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			f.hook("SessionEnd", "prompt_input_exit", map[string]any{"reason": "prompt_input_exit"})
			fmt.Print("\r\nBye!\r\n")
			return 0
		case "/clear":
			f.hook("SessionEnd", "clear", map[string]any{"reason": "clear"})
			f.hook("SessionStart", "clear", map[string]any{"source": "clear", "model": "fake-opus"})
			f.draw("")
			continue
		}
		f.draw(f.turn(line))
	}
}

// readLine waits for a line on the terminal; idle says to send Claude's
// idle_prompt notification when none comes for a while.
func (f *fake) readLine(idle bool) (string, bool) {
	var timer <-chan time.Time
	if idle {
		timer = time.After(f.idle)
	}
	for {
		select {
		case line, ok := <-f.in:
			if ok {
				f.log(map[string]any{"what": "input", "text": line})
			}
			return line, ok
		case <-timer:
			timer = nil
			f.hook("Notification", "idle_prompt", map[string]any{"message": "Claude is waiting for your input", "notification_type": "idle_prompt"})
		}
	}
}

var (
	bashRE  = regexp.MustCompile(`\[bash: ([^\]]*)\]`)
	askRE   = regexp.MustCompile(`\[ask: ([^\]]*)\]`)
	thinkRE = regexp.MustCompile(`\[think: ([^\]]*)\]`)
)

func (f *fake) turn(prompt string) string {
	f.log(map[string]any{"what": "prompt", "text": prompt})
	f.hook("UserPromptSubmit", "", map[string]any{"prompt": prompt, "prompt_id": newUUID()})
	f.transcriptLine("user", prompt, nil)
	reply := "ok: " + prompt
	for _, m := range askRE.FindAllStringSubmatch(prompt, -1) {
		fmt.Printf("\r\n? %s\r\n> ", m[1])
		f.hook("Notification", "elicitation_dialog", map[string]any{"message": m[1], "notification_type": "elicitation_dialog"})
		answer, _ := f.readLine(false)
		reply += " (answer: " + answer + ")"
	}
	for _, m := range bashRE.FindAllStringSubmatch(prompt, -1) {
		reply += " " + f.bash(m[1])
	}
	// [think: D]: the model takes D before the turn ends, sending no hook
	// meanwhile (as Claude between its last tool and Stop).
	for _, m := range thinkRE.FindAllStringSubmatch(prompt, -1) {
		if d, err := time.ParseDuration(m[1]); err == nil {
			time.Sleep(d)
		}
	}
	if strings.Contains(prompt, "[fail]") {
		f.hook("StopFailure", "rate_limit", map[string]any{"error": "rate_limit", "error_details": "429 fake"})
		return "API Error: rate limited"
	}
	f.transcriptLine("assistant", reply, map[string]any{"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 1})
	f.hook("Stop", "", map[string]any{"stop_hook_active": false})
	return reply
}

func (f *fake) bash(command string) string {
	id := "toolu_" + newUUID()[:8]
	input := map[string]any{"command": command, "description": "fake"}
	f.hook("PreToolUse", "Bash", map[string]any{"tool_name": "Bash", "tool_input": input, "tool_use_id": id})
	allowed := f.permissionMode == "bypassPermissions"
	if !allowed && !f.print {
		f.hook("PermissionRequest", "Bash", map[string]any{"tool_name": "Bash", "tool_input": input, "permission_suggestions": []any{}})
		f.hook("Notification", "permission_prompt", map[string]any{"message": "Claude needs your permission to use Bash", "notification_type": "permission_prompt"})
		fmt.Printf("\r\n╭ Bash command ──────────\r\n│ %s\r\n│ Do you want to proceed? (y/n)\r\n╰ ", command)
		answer, _ := f.readLine(false)
		allowed = strings.HasPrefix(strings.ToLower(strings.TrimSpace(answer)), "y")
		f.log(map[string]any{"what": "permission", "tool": "Bash", "command": command, "answer": answer})
	}
	if !allowed {
		return "(denied: " + command + ")"
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = f.cwd
	out, err := cmd.CombinedOutput()
	resp := map[string]any{"stdout": string(out), "stderr": "", "interrupted": false}
	if err != nil {
		f.hook("PostToolUseFailure", "Bash", map[string]any{"tool_name": "Bash", "tool_input": input, "tool_use_id": id, "error": err.Error()})
		return "(failed: " + command + ")"
	}
	f.hook("PostToolUse", "Bash", map[string]any{"tool_name": "Bash", "tool_input": input, "tool_response": resp, "tool_use_id": id})
	return "(ran: " + command + ")"
}

// loadSettings reads hooks from every place Claude Code reads settings: the
// user's, the project's, the project's local file and --settings (a file or a
// JSON string). Hooks from all of them run.
func (f *fake) loadSettings(flag string) error {
	type src struct{ name, path string }
	srcs := []src{
		{"user", filepath.Join(f.home, ".claude", "settings.json")},
		{"project", filepath.Join(f.cwd, ".claude", "settings.json")},
		{"local", filepath.Join(f.cwd, ".claude", "settings.local.json")},
	}
	var loaded []string
	add := func(name string, data []byte) error {
		var s settings
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("Invalid settings in %s: %v", name, err)
		}
		for ev, groups := range s.Hooks {
			f.hooks[ev] = append(f.hooks[ev], groups...)
		}
		loaded = append(loaded, name)
		return nil
	}
	for _, s := range srcs {
		if data, err := os.ReadFile(s.path); err == nil {
			if err := add(s.path, data); err != nil {
				return err
			}
		}
	}
	if flag != "" {
		data := []byte(flag)
		name := "--settings JSON"
		if !strings.HasPrefix(strings.TrimSpace(flag), "{") {
			var err error
			if data, err = os.ReadFile(flag); err != nil {
				return fmt.Errorf("Settings file not found: %s", flag)
			}
			name = flag
		}
		if err := add(name, data); err != nil {
			return err
		}
	}
	f.log(map[string]any{"what": "settings", "sources": loaded})
	return nil
}

// hook runs the hooks for event whose matcher matches target, with the base
// fields plus extra on stdin, one after another.
func (f *fake) hook(event, target string, extra map[string]any) {
	in := map[string]any{
		"session_id": f.sessionID, "transcript_path": f.transcript, "cwd": f.cwd,
		"hook_event_name": event,
	}
	if event != "SessionStart" && event != "SessionEnd" { // as Claude 2.1.197 sends them
		in["permission_mode"] = f.permissionMode
	}
	for k, v := range extra {
		in[k] = v
	}
	data, _ := json.Marshal(in)
	f.hookMu.Lock()
	defer f.hookMu.Unlock()
	for _, g := range f.hooks[event] {
		if !matches(g.Matcher, target) {
			continue
		}
		for _, h := range g.Hooks {
			if h.Type != "command" {
				continue
			}
			timeout := 60 * time.Second
			if h.Timeout > 0 {
				timeout = time.Duration(h.Timeout) * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			cmd := exec.CommandContext(ctx, "sh", "-c", h.Command)
			cmd.Dir = f.cwd
			cmd.Stdin = bytes.NewReader(data)
			cmd.Env = append(os.Environ(), "CLAUDE_PROJECT_DIR="+f.cwd)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			cancel()
			code := 0
			if err != nil {
				code = -1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			}
			f.log(map[string]any{"what": "hook", "event": event, "matcher": g.Matcher, "command": h.Command, "input": in, "exit": code, "stdout": stdout.String(), "stderr": stderr.String()})
		}
	}
}

// matches is Claude's matcher rule: empty or "*" matches all; otherwise a
// regular expression over the tool name (or notification type, or source).
func matches(matcher, target string) bool {
	if matcher == "" || matcher == "*" {
		return true
	}
	re, err := regexp.Compile("^(?:" + matcher + ")$")
	return err == nil && re.MatchString(target)
}

func (f *fake) transcriptLine(role, text string, usage map[string]any) {
	msg := map[string]any{"role": role, "content": text}
	if usage != nil {
		msg["usage"] = usage
	}
	line, _ := json.Marshal(map[string]any{"type": role, "sessionId": f.sessionID, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "message": msg})
	tf, err := os.OpenFile(f.transcript, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	tf.Write(append(line, '\n'))
	tf.Close()
}

func (f *fake) draw(reply string) {
	fmt.Print("\x1b[2J\x1b[H")
	fmt.Printf("╭─ fakeclaude ─ %s ─ %s ─╮\r\n", f.sessionID, f.permissionMode)
	if reply != "" {
		fmt.Printf("● %s\r\n", reply)
	}
	fmt.Print("> ")
}

func (f *fake) log(m map[string]any) {
	if f.record == nil {
		return
	}
	m["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	line, _ := json.Marshal(m)
	f.record.Write(append(line, '\n'))
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
