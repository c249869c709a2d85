// Command fakeaider behaves like aider (0.8x) as far as strata can see it:
// its documented flags (--notifications, --notifications-command CMD,
// --message, --yes-always, --model, --config, ...), the same settings from
// .aider.conf.yml (home, then the working directory; a later one wins) and
// from AIDER_NOTIFICATIONS / AIDER_NOTIFICATIONS_COMMAND; no conversation
// ids and no resume. It waits for its first prompt on the terminal ("> "),
// asks y/n confirmations there ("Create new file? (Y)es/(N)o [Yes]: ") and
// runs the notifications command through the shell, with no input, the way
// aider's ring_bell does: at the first time it waits for the person after
// the LLM answered, be that a confirmation or the next prompt, and only
// once per answer. Everything it received goes to $FAKEAIDER_RECORD.
//
// Prompts script it: "[create: FILE TEXT]" asks to create FILE and writes
// TEXT to it if allowed; "[run: CMD]" offers to run CMD. "/exit" or "/quit"
// (or end of input) ends it.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/stratahq/strata/testdata/agents/fakekit"
)

type fake struct {
	notifications bool
	notifyCmd     string
	yes           bool
	cwd           string
	rec           *fakekit.Recorder
	in            *bufio.Reader
	bell          bool // bell_on_next_input
}

func main() { os.Exit(run(os.Args[1:])) }

func fail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "aider: error: "+format+"\n", a...)
	return 2 // configargparse's usage error status
}

func run(args []string) int {
	f := &fake{}
	rec, err := fakekit.OpenRecord("FAKEAIDER_RECORD")
	if err != nil {
		return fail("record: %v", err)
	}
	defer rec.Close()
	f.rec = rec
	f.rec.Log(map[string]any{"what": "argv", "argv": args})
	f.cwd, _ = os.Getwd()

	// Lowest first: config files, then the environment, then the flags.
	var configFlag string
	for i, a := range args {
		if (a == "-c" || a == "--config") && i+1 < len(args) {
			configFlag = args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--config="); ok {
			configFlag = v
		}
	}
	confs := []string{filepath.Join(os.Getenv("HOME"), ".aider.conf.yml"), filepath.Join(f.cwd, ".aider.conf.yml")}
	if configFlag != "" {
		confs = []string{configFlag}
	}
	var loaded []string
	for _, p := range confs {
		data, err := os.ReadFile(p)
		if err != nil {
			if configFlag != "" {
				return fail("File not found: %s", p)
			}
			continue
		}
		loaded = append(loaded, p)
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.HasPrefix(strings.TrimSpace(k), "#") {
				continue
			}
			f.set(strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`))
		}
	}
	if v, ok := os.LookupEnv("AIDER_NOTIFICATIONS"); ok {
		f.set("notifications", v)
	}
	if v, ok := os.LookupEnv("AIDER_NOTIFICATIONS_COMMAND"); ok {
		f.set("notifications-command", v)
	}
	var message string
	var files []string
	for opts := fakekit.NewArgs(args); opts.Next(); {
		a, name := opts.Arg, opts.Name
		ok := true
		switch name {
		case "--notifications":
			f.notifications = true
		case "--no-notifications":
			f.notifications = false
		case "--yes-always":
			f.yes = true
		case "--no-git", "--no-auto-commits", "--no-pretty", "--no-stream", "--no-check-update", "--no-show-model-warnings",
			"--no-gitignore", "--restore-chat-history", "--dark-mode", "--light-mode", "--subtree-only", "--no-fancy-input", "--vim", "--architect":
		case "--notifications-command":
			f.notifyCmd, ok = opts.Value()
		case "-m", "--message":
			message, ok = opts.Value()
		case "-c", "--config", "--model", "--weak-model", "--editor-model", "--edit-format", "--read", "--file", "--env-file", "--chat-history-file", "--input-history-file", "--api-key", "--set-env":
			_, ok = opts.Value()
		default:
			if strings.HasPrefix(a, "-") {
				return fail("unrecognized arguments: %s", a)
			}
			files = append(files, a)
		}
		if !ok {
			return fail("argument %s: expected one argument", name)
		}
	}
	f.rec.Log(map[string]any{"what": "config", "sources": loaded, "notifications": f.notifications, "notifications_command": f.notifyCmd, "files": files})

	f.in = bufio.NewReader(os.Stdin)
	fmt.Print("Aider v0.86.1 (fake)\r\nMain model: fake-sonnet with diff edit format\r\nGit repo: none\r\nRepo-map: disabled\r\n")
	if message != "" {
		f.turn(message)
		return 0
	}
	fakekit.OnHangup(f.rec, nil)
	for {
		line, ok := f.getInput("> ")
		if !ok {
			return 0
		}
		switch line = strings.TrimSpace(line); line {
		case "":
			continue
		case "/exit", "/quit":
			return 0
		}
		f.turn(line)
	}
}

func (f *fake) set(k, v string) {
	switch k {
	case "notifications":
		f.notifications = strings.EqualFold(v, "true") || v == "1"
	case "notifications-command":
		f.notifyCmd = v
	case "yes-always":
		f.yes = strings.EqualFold(v, "true")
	}
}

// getInput is aider's get_input: a rule, the bell, then the prompt.
func (f *fake) getInput(prompt string) (string, bool) {
	fmt.Print("\r\n────────────────────────────────────────\r\n")
	f.ringBell()
	fmt.Print(prompt)
	line, err := fakekit.ReadInput(f.in)
	if err != nil && line == "" {
		return "", false
	}
	line = strings.TrimRight(line, "\r\n")
	f.rec.Log(map[string]any{"what": "input", "text": line})
	return line, true
}

// confirmAsk is aider's confirm_ask: the bell, the subject, the question.
func (f *fake) confirmAsk(question, subject string) bool {
	f.ringBell()
	fmt.Printf("\r\n%s\r\n", subject)
	q := question + " (Y)es/(N)o [Yes]: "
	if f.yes {
		fmt.Printf("%sy\r\n", q)
		return true
	}
	for {
		fmt.Print(q)
		line, err := fakekit.ReadInput(f.in)
		res := strings.ToLower(strings.TrimSpace(line))
		f.rec.Log(map[string]any{"what": "confirm", "question": question, "subject": subject, "answer": res})
		if err != nil || res == "" {
			return true
		}
		if strings.HasPrefix("yes", res) {
			return true
		}
		if strings.HasPrefix("no", res) {
			return false
		}
		fmt.Print("Please answer with one of: yes, no\r\n")
	}
}

// ringBell is aider's ring_bell: the notifications command once after the
// LLM has answered, at the next time input is wanted.
func (f *fake) ringBell() {
	if !f.bell || !f.notifications {
		return
	}
	f.bell = false
	if f.notifyCmd == "" {
		fmt.Print("\a")
		return
	}
	cmd := exec.Command("sh", "-c", f.notifyCmd)
	cmd.Dir = f.cwd
	out, err := cmd.CombinedOutput()
	f.rec.Log(map[string]any{"what": "notify", "command": f.notifyCmd, "exit": fakekit.ExitCode(err), "output": string(out)})
}

var (
	createRE = regexp.MustCompile(`\[create: (\S+) ([^\]]*)\]`)
	runRE    = regexp.MustCompile(`\[run: ([^\]]*)\]`)
)

func (f *fake) turn(prompt string) {
	f.rec.Log(map[string]any{"what": "prompt", "text": prompt})
	f.bell = true // the LLM starts
	time.Sleep(50 * time.Millisecond)
	fmt.Printf("\r\nok: %s\r\nTokens: 1.2k sent, 80 received.\r\n", prompt)
	for _, m := range createRE.FindAllStringSubmatch(prompt, -1) {
		if f.confirmAsk("Create new file?", m[1]) {
			os.WriteFile(filepath.Join(f.cwd, m[1]), []byte(m[2]+"\n"), 0o644)
			fmt.Printf("Applied edit to %s\r\n", m[1])
		} else {
			fmt.Printf("Skipping edits to %s\r\n", m[1])
		}
	}
	for _, m := range runRE.FindAllStringSubmatch(prompt, -1) {
		if f.confirmAsk("Run shell command?", m[1]) {
			cmd := exec.Command("sh", "-c", m[1])
			cmd.Dir = f.cwd
			out, _ := cmd.CombinedOutput()
			fmt.Printf("Running %s\r\n%s", m[1], strings.ReplaceAll(string(out), "\n", "\r\n"))
		}
	}
}
