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
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/testdata/agents/fakekit"
)

type settings struct {
	Hooks map[string][]fakekit.HookGroup `json:"hooks"`
}

type fake struct {
	print          bool
	sessionID      string
	permissionMode string
	cwd            string
	home           string
	transcript     string
	hooks          *fakekit.Hooks
	rec            *fakekit.Recorder
	in             <-chan string
	idle           time.Duration
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
	f := &fake{permissionMode: "default", idle: 60 * time.Second}
	if d, err := time.ParseDuration(os.Getenv("FAKECLAUDE_IDLE")); err == nil {
		f.idle = d
	}
	rec, err := fakekit.OpenRecord("FAKECLAUDE_RECORD")
	if err != nil {
		return fail("record: %v", err)
	}
	defer rec.Close()
	f.rec = rec
	f.rec.Log(map[string]any{"what": "argv", "argv": args})

	var settingsArg, resume, sessionID, prompt string
	var fork, cont bool
	for opts := fakekit.NewArgs(args); opts.Next(); {
		a, name := opts.Arg, opts.Name
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
			settingsArg, ok = opts.Value()
		case "-r", "--resume":
			resume, ok = opts.Value()
		case "--session-id":
			sessionID, ok = opts.Value()
		case "--permission-mode":
			f.permissionMode, ok = opts.Value()
		case "--model", "--output-format", "--input-format", "--append-system-prompt", "--allowedTools", "--disallowedTools", "--add-dir":
			_, ok = opts.Value()
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
	f.hooks = &fakekit.Hooks{
		Groups:      map[string][]fakekit.HookGroup{},
		Match:       matches,
		TimeoutUnit: time.Second,
		Dir:         f.cwd,
		Env:         []string{"CLAUDE_PROJECT_DIR=" + f.cwd},
		Rec:         f.rec,
	}
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
			f.sessionID = fakekit.UUID(4)
		}
	}
	os.MkdirAll(projects, 0o755)
	f.transcript = filepath.Join(projects, f.sessionID+".jsonl")
	if fork {
		if data, err := os.ReadFile(filepath.Join(projects, resume+".jsonl")); err == nil {
			os.WriteFile(f.transcript, data, 0o644)
		}
	}
	f.rec.Log(map[string]any{"what": "session", "session_id": f.sessionID, "source": source, "fork": fork})

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
	fakekit.OnHangup(f.rec, func() { f.hook("SessionEnd", "other", map[string]any{"reason": "other"}) })
	// A bracketed paste is one input however many lines it has, as in
	// Claude's prompt box; the Enter after it submits it.
	f.in = fakekit.Lines(os.Stdin)
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
				f.rec.Log(map[string]any{"what": "input", "text": line})
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
	f.rec.Log(map[string]any{"what": "prompt", "text": prompt})
	f.hook("UserPromptSubmit", "", map[string]any{"prompt": prompt, "prompt_id": fakekit.UUID(4)})
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
	id := "toolu_" + fakekit.UUID(4)[:8]
	input := map[string]any{"command": command, "description": "fake"}
	f.hook("PreToolUse", "Bash", map[string]any{"tool_name": "Bash", "tool_input": input, "tool_use_id": id})
	allowed := f.permissionMode == "bypassPermissions"
	if !allowed && !f.print {
		f.hook("PermissionRequest", "Bash", map[string]any{"tool_name": "Bash", "tool_input": input, "permission_suggestions": []any{}})
		f.hook("Notification", "permission_prompt", map[string]any{"message": "Claude needs your permission to use Bash", "notification_type": "permission_prompt"})
		fmt.Printf("\r\n╭ Bash command ──────────\r\n│ %s\r\n│ Do you want to proceed? (y/n)\r\n╰ ", command)
		answer, _ := f.readLine(false)
		allowed = strings.HasPrefix(strings.ToLower(strings.TrimSpace(answer)), "y")
		f.rec.Log(map[string]any{"what": "permission", "tool": "Bash", "command": command, "answer": answer})
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
			f.hooks.Groups[ev] = append(f.hooks.Groups[ev], groups...)
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
	f.rec.Log(map[string]any{"what": "settings", "sources": loaded})
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
	f.hooks.Run(event, target, in)
}

// matches is Claude's matcher rule: empty or "*" matches all; otherwise a
// regular expression over the tool name (or notification type, or source).
func matches(_, matcher, target string) bool {
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
