// Command fakegemini behaves like Gemini CLI (0.2x-0.6x) as far as strata can
// see it: its documented flags (-i/--prompt-interactive, -p/--prompt,
// -r/--resume, --approval-mode, -y/--yolo, ...); settings, and so hooks, from
// every place Gemini reads them (the system file, $GEMINI_CLI_HOME/.gemini (else
// ~/.gemini)/settings.json, and the project's .gemini/settings.json when the
// folder is trusted); hooks only with hooksConfig.enabled and only in a
// trusted folder (trustedFolders.json), as Gemini 0.61 does. Hooks get the
// documented JSON on stdin (session_id, transcript_path, cwd,
// hook_event_name, timestamp, plus each event's fields) at the documented
// moments: SessionStart, BeforeAgent, Notification (ToolPermission, when a
// tool needs confirmation), BeforeTool, AfterTool, AfterAgent, SessionEnd.
// Conversations are saved as $HOME/.gemini/tmp/<project hash>/chats/
// session-<id>.json and resumed with --resume ID|latest. It draws a line of
// TUI on its terminal and waits for input there, and records everything it
// received in $FAKEGEMINI_RECORD (JSON lines) for tests.
//
// Prompts script it like fakeclaude: "[bash: CMD]" asks to run CMD with
// run_shell_command (y/1/2 allow, anything else declines); "/quit" or end of
// input ends the session.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stratahq/strata/testdata/agents/fakekit"
)

type settingsFile struct {
	HooksConfig *struct {
		Enabled *bool `json:"enabled"`
	} `json:"hooksConfig"`
	Hooks map[string]json.RawMessage `json:"hooks"`
}

type message struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"` // user | gemini
	Content   string `json:"content"`
}

type chat struct {
	SessionID   string    `json:"sessionId"`
	ProjectHash string    `json:"projectHash"`
	StartTime   string    `json:"startTime"`
	LastUpdated string    `json:"lastUpdated"`
	Messages    []message `json:"messages"`
}

type fake struct {
	cwd, home    string
	approvalMode string
	sessionID    string
	chatPath     string
	chat         chat
	hooksOn      bool
	hooks        *fakekit.Hooks
	rec          *fakekit.Recorder
	in           <-chan string
}

func main() { os.Exit(run(os.Args[1:])) }

func fail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	return 1 // yargs' usage errors exit 1
}

func run(args []string) int {
	f := &fake{approvalMode: "default"}
	rec, err := fakekit.OpenRecord("FAKEGEMINI_RECORD")
	if err != nil {
		return fail("record: %v", err)
	}
	defer rec.Close()
	f.rec = rec
	f.rec.Log(map[string]any{"what": "argv", "argv": args})

	var interactive, nonInteractive, resume, query string
	var yolo bool
	for opts := fakekit.NewArgs(args); opts.Next(); {
		a, name := opts.Arg, opts.Name
		ok := true
		switch name {
		case "-y", "--yolo":
			yolo = true
		case "-d", "--debug", "-s", "--sandbox", "--screen-reader", "--list-sessions", "--list-extensions":
		case "-i", "--prompt-interactive":
			interactive, ok = opts.Value()
		case "-p", "--prompt":
			nonInteractive, ok = opts.Value()
		case "-r", "--resume":
			resume, ok = opts.Value()
		case "--approval-mode":
			f.approvalMode, ok = opts.Value()
			if ok && !slices.Contains([]string{"default", "auto_edit", "yolo", "plan"}, f.approvalMode) {
				return fail("Invalid values:\n  Argument: approval-mode, Given: %q, Choices: \"default\", \"auto_edit\", \"yolo\", \"plan\"", f.approvalMode)
			}
		case "-m", "--model", "-e", "--extensions", "--include-directories", "-o", "--output-format", "--allowed-tools", "--allowed-mcp-server-names":
			_, ok = opts.Value()
		default:
			if strings.HasPrefix(a, "-") {
				return fail("Unknown argument: %s", strings.TrimLeft(name, "-"))
			}
			if query != "" {
				query += " "
			}
			query += a
		}
		if !ok {
			return fail("Not enough arguments following: %s", strings.TrimLeft(name, "-"))
		}
	}
	if yolo {
		if f.approvalMode != "default" {
			return fail("Cannot use both --yolo (-y) and --approval-mode together. Use --approval-mode=yolo instead.")
		}
		f.approvalMode = "yolo"
	}
	if interactive != "" && nonInteractive != "" {
		return fail("Cannot use both --prompt (-p) and --prompt-interactive (-i) together")
	}
	if query != "" && interactive == "" && nonInteractive == "" {
		interactive = query // a positional query starts an interactive session
	}

	f.cwd, _ = os.Getwd()
	f.home = os.Getenv("GEMINI_CLI_HOME")
	if f.home == "" {
		f.home = os.Getenv("HOME")
	}
	f.hooks = &fakekit.Hooks{
		Groups:      map[string][]fakekit.HookGroup{},
		Match:       matches,
		TimeoutUnit: time.Millisecond,
		Dir:         f.cwd,
		Env:         []string{"GEMINI_PROJECT_DIR=" + f.cwd, "CLAUDE_PROJECT_DIR=" + f.cwd},
		Rec:         f.rec,
	}
	if err := f.loadSettings(); err != nil {
		return fail("%v", err)
	}
	sum := sha256.Sum256([]byte(f.cwd))
	chats := filepath.Join(f.home, ".gemini", "tmp", hex.EncodeToString(sum[:]), "chats")
	source := "startup"
	if resume != "" {
		path, err := findChat(chats, resume)
		if err != nil {
			return fail("Error resuming session: %v", err)
		}
		data, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(data, &f.chat)
		}
		if err != nil {
			return fail("Error resuming session: %v", err)
		}
		f.sessionID, f.chatPath, source = f.chat.SessionID, path, "resume"
	} else {
		f.sessionID = fakekit.UUID(4)
		now := time.Now().UTC()
		f.chat = chat{SessionID: f.sessionID, ProjectHash: hex.EncodeToString(sum[:]), StartTime: now.Format(time.RFC3339Nano)}
		f.chatPath = filepath.Join(chats, "session-"+now.Format("2006-01-02T15-04")+"-"+f.sessionID[:8]+".json")
	}
	os.MkdirAll(chats, 0o755)
	f.rec.Log(map[string]any{"what": "session", "session_id": f.sessionID, "source": source, "chat": f.chatPath, "messages": len(f.chat.Messages)})
	f.hook("SessionStart", source, map[string]any{"source": source})

	if nonInteractive != "" {
		fmt.Println(f.turn(nonInteractive))
		f.hook("SessionEnd", "exit", map[string]any{"reason": "exit"})
		return 0
	}
	fakekit.OnHangup(f.rec, func() { f.hook("SessionEnd", "exit", map[string]any{"reason": "exit"}) })
	f.in = fakekit.Lines(os.Stdin)
	f.draw("")
	if interactive != "" {
		f.draw(f.turn(interactive))
	}
	for {
		line, ok := f.readLine()
		if !ok {
			f.hook("SessionEnd", "exit", map[string]any{"reason": "exit"})
			return 0
		}
		switch line = strings.TrimSpace(line); line {
		case "":
			continue
		case "/quit", "/exit":
			f.hook("SessionEnd", "prompt_input_exit", map[string]any{"reason": "prompt_input_exit"})
			fmt.Print("\r\nAgent powering down. Goodbye!\r\n")
			return 0
		}
		f.draw(f.turn(line))
	}
}

// findChat finds the saved session id (a full id, or "latest") in dir.
func findChat(dir, id string) (string, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "session-*.json"))
	type found struct {
		path    string
		updated string
	}
	var all []found
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var c chat
		if json.Unmarshal(data, &c) != nil {
			continue
		}
		if c.SessionID == id {
			return p, nil
		}
		all = append(all, found{p, c.LastUpdated})
	}
	if id == "latest" && len(all) > 0 {
		sort.Slice(all, func(i, j int) bool { return all[i].updated > all[j].updated })
		return all[0].path, nil
	}
	return "", fmt.Errorf("Invalid session identifier %q. Use --list-sessions to see available sessions.", id)
}

func (f *fake) readLine() (string, bool) {
	line, ok := <-f.in
	if ok {
		f.rec.Log(map[string]any{"what": "input", "text": line})
	}
	return line, ok
}

var bashRE = regexp.MustCompile(`\[bash: ([^\]]*)\]`)

func (f *fake) turn(prompt string) string {
	f.rec.Log(map[string]any{"what": "prompt", "text": prompt})
	f.hook("BeforeAgent", "", map[string]any{"prompt": prompt})
	f.save("user", prompt)
	reply := "ok: " + prompt
	for _, m := range bashRE.FindAllStringSubmatch(prompt, -1) {
		reply += " " + f.shell(m[1])
	}
	f.save("gemini", reply)
	f.hook("AfterAgent", "", map[string]any{"prompt": prompt, "prompt_response": reply, "stop_hook_active": false})
	return reply
}

// shell is run_shell_command: confirmation first (with the ToolPermission
// notification) unless yolo, then BeforeTool, the command, AfterTool.
func (f *fake) shell(command string) string {
	const tool = "run_shell_command"
	input := map[string]any{"command": command, "description": "fake", "dir_path": f.cwd}
	root, _, _ := strings.Cut(strings.TrimSpace(command), " ")
	if f.approvalMode != "yolo" {
		details := map[string]any{"type": "exec", "title": "Confirm Shell Command", "command": command, "rootCommand": root}
		f.hook("Notification", "ToolPermission", map[string]any{"notification_type": "ToolPermission", "message": "Tool Confirm Shell Command requires execution", "details": details})
		fmt.Printf("\r\n╭ Shell %s\r\n│ Allow execution of: '%s'?\r\n│ ● 1. Allow once (y)  2. Allow always  3. No, suggest changes (n)\r\n╰ ", command, root)
		answer, _ := f.readLine()
		answer = strings.ToLower(strings.TrimSpace(answer))
		f.rec.Log(map[string]any{"what": "permission", "tool": tool, "command": command, "answer": answer})
		if !slices.Contains([]string{"y", "yes", "1", "2"}, answer) {
			return "(cancelled: " + command + ")"
		}
	}
	f.hook("BeforeTool", tool, map[string]any{"tool_name": tool, "tool_input": input})
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = f.cwd
	out, err := cmd.CombinedOutput()
	resp := map[string]any{"llmContent": string(out), "returnDisplay": string(out)}
	if err != nil {
		resp["error"] = err.Error()
	}
	f.hook("AfterTool", tool, map[string]any{"tool_name": tool, "tool_input": input, "tool_response": resp})
	if err != nil {
		return "(failed: " + command + ")"
	}
	return "(ran: " + command + ")"
}

// loadSettings merges hooks from the system settings, the user's and (in a
// trusted folder) the project's; hooks run only with hooksConfig.enabled and
// only in a trusted folder.
func (f *fake) loadSettings() error {
	system := os.Getenv("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
	if system == "" {
		system = "/etc/gemini-cli/settings.json"
	}
	trusted := f.trusted()
	paths := []string{system, filepath.Join(f.home, ".gemini", "settings.json")}
	if trusted {
		paths = append(paths, filepath.Join(f.cwd, ".gemini", "settings.json"))
	}
	var loaded []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var s settingsFile
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("Error in %s: %v\nPlease fix the configuration file and try again.", p, err)
		}
		if s.HooksConfig != nil && s.HooksConfig.Enabled != nil {
			f.hooksOn = *s.HooksConfig.Enabled
		}
		for ev, raw := range s.Hooks {
			var groups []fakekit.HookGroup
			if json.Unmarshal(raw, &groups) != nil {
				continue // e.g. the old "enabled": true inside hooks
			}
			f.hooks.Groups[ev] = append(f.hooks.Groups[ev], groups...)
		}
		loaded = append(loaded, p)
	}
	if !trusted {
		f.hooksOn = false
	}
	f.rec.Log(map[string]any{"what": "settings", "sources": loaded, "trusted": trusted, "hooks_enabled": f.hooksOn})
	return nil
}

// trusted reads ~/.gemini/trustedFolders.json: the folder or a parent marked
// TRUST_FOLDER, or a child of one marked TRUST_PARENT.
func (f *fake) trusted() bool {
	data, err := os.ReadFile(filepath.Join(f.home, ".gemini", "trustedFolders.json"))
	if err != nil {
		return false
	}
	var rules map[string]string
	if json.Unmarshal(data, &rules) != nil {
		return false
	}
	under := func(dir, path string) bool {
		return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
	}
	for path, rule := range rules {
		switch rule {
		case "TRUST_FOLDER":
			if under(path, f.cwd) {
				return true
			}
		case "TRUST_PARENT":
			if under(filepath.Dir(path), f.cwd) {
				return true
			}
		}
	}
	return false
}

func (f *fake) hook(event, target string, extra map[string]any) {
	if !f.hooksOn {
		return
	}
	in := map[string]any{
		"session_id": f.sessionID, "transcript_path": f.chatPath, "cwd": f.cwd,
		"hook_event_name": event, "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
	}
	for k, v := range extra {
		in[k] = v
	}
	f.hooks.Run(event, target, in)
}

// matches is Gemini's rule: empty or "*" matches all; a regular expression
// over the tool name for tool events, an exact string for lifecycle events.
func matches(event, matcher, target string) bool {
	if matcher == "" || matcher == "*" {
		return true
	}
	if event != "BeforeTool" && event != "AfterTool" {
		return matcher == target
	}
	re, err := regexp.Compile(matcher)
	return err == nil && re.MatchString(target)
}

func (f *fake) save(typ, content string) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	f.chat.Messages = append(f.chat.Messages, message{ID: fakekit.UUID(4), Timestamp: now, Type: typ, Content: content})
	f.chat.LastUpdated = now
	data, _ := json.MarshalIndent(f.chat, "", "  ")
	tmp := f.chatPath + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		os.Rename(tmp, f.chatPath)
	}
}

func (f *fake) draw(reply string) {
	fmt.Print("\x1b[2J\x1b[H")
	fmt.Printf("✦ fakegemini · session %s · %s\r\n", f.sessionID, f.approvalMode)
	if reply != "" {
		fmt.Printf("✦ %s\r\n", reply)
	}
	fmt.Print("> Type your message or @path/to/file\r\n> ")
}
