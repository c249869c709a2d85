// Command fakecodex behaves like the Codex CLI (0.171) as far as strata can
// see it: `codex [OPTIONS] [PROMPT]`, `codex resume [ID] [PROMPT]`, `codex fork
// [ID] [PROMPT]`; it reads `notify` from $CODEX_HOME/config.toml (else
// ~/.codex/config.toml) and runs it at the end of every turn with the
// agent-turn-complete JSON as the last argument, as Codex does. It asks for
// approval on its terminal before running a command unless
// --ask-for-approval never (or the bypass flag), and records what it received
// in $FAKECODEX_RECORD. Prompts script it like fakeclaude: "[bash: CMD]".
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/stratahq/strata/testdata/agents/fakekit"
)

type fake struct {
	threadID string
	approval string
	cwd      string
	sessions string
	notify   []string
	rec      *fakekit.Recorder
	in       *bufio.Reader
	turn     int
}

func main() { os.Exit(run(os.Args[1:])) }

func fail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", a...)
	return 2 // clap's usage error status
}

func run(args []string) int {
	f := &fake{approval: "on-request"}
	rec, err := fakekit.OpenRecord("FAKECODEX_RECORD")
	if err != nil {
		return fail("record: %v", err)
	}
	defer rec.Close()
	f.rec = rec
	f.rec.Log(map[string]any{"what": "argv", "argv": args})
	sub := ""
	if len(args) > 0 && (args[0] == "resume" || args[0] == "fork") {
		sub, args = args[0], args[1:]
	}
	var positional []string
	var last bool
	f.cwd, _ = os.Getwd()
	for opts := fakekit.NewArgs(args); opts.Next(); {
		a := opts.Arg
		var ok bool
		switch a {
		case "--last":
			last = true
			continue
		case "--full-auto":
			f.approval = "on-request"
			continue
		case "--dangerously-bypass-approvals-and-sandbox", "--yolo":
			f.approval = "never"
			continue
		case "-a", "--ask-for-approval":
			f.approval, ok = opts.Following()
			if ok && !slices.Contains([]string{"untrusted", "on-failure", "on-request", "never"}, f.approval) {
				return fail("invalid value '%s' for '--ask-for-approval <APPROVAL_POLICY>'", f.approval)
			}
		case "-C", "--cd":
			var dir string
			if dir, ok = opts.Following(); ok {
				f.cwd = dir
			}
		case "-m", "--model", "-s", "--sandbox", "-c", "--config", "-p", "--profile", "-i", "--image":
			_, ok = opts.Following()
		default:
			if strings.HasPrefix(a, "-") {
				return fail("unexpected argument '%s' found", a)
			}
			positional, ok = append(positional, a), true
		}
		if !ok {
			return fail("a value is required for '%s <VALUE>' but none was supplied", a)
		}
	}
	home := os.Getenv("CODEX_HOME")
	if home == "" {
		home = filepath.Join(os.Getenv("HOME"), ".codex")
	}
	var cfg struct {
		Notify []string `toml:"notify"`
	}
	if _, err := toml.DecodeFile(filepath.Join(home, "config.toml"), &cfg); err != nil && !os.IsNotExist(err) {
		return fail("Error loading config.toml: %v", err)
	}
	f.notify = cfg.Notify
	f.sessions = filepath.Join(home, "sessions")
	os.MkdirAll(f.sessions, 0o755)
	f.rec.Log(map[string]any{"what": "config", "codex_home": home, "notify": f.notify})

	prompt := ""
	switch sub {
	case "resume", "fork":
		if len(positional) == 0 && !last {
			return fail("a session id or --last is required")
		}
		var id string
		if len(positional) > 0 {
			id, positional = positional[0], positional[1:]
		}
		if _, err := os.Stat(filepath.Join(f.sessions, id+".jsonl")); err != nil {
			fmt.Fprintf(os.Stderr, "No saved session found with ID %s. Run `codex` without arguments to start a new session.\n", id)
			return 1
		}
		f.threadID = id
		if sub == "fork" {
			f.threadID = newUUID()
			data, _ := os.ReadFile(filepath.Join(f.sessions, id+".jsonl"))
			os.WriteFile(filepath.Join(f.sessions, f.threadID+".jsonl"), data, 0o644)
		}
	default:
		f.threadID = newUUID()
	}
	if len(positional) > 1 {
		return fail("unexpected argument '%s' found", positional[1])
	}
	if len(positional) == 1 {
		prompt = positional[0]
	}
	f.rec.Log(map[string]any{"what": "session", "session_id": f.threadID, "source": sub})

	f.in = bufio.NewReader(os.Stdin)
	f.draw("")
	if prompt != "" {
		f.draw(f.doTurn(prompt))
	}
	for {
		line, err := f.in.ReadString('\n')
		line = strings.TrimSpace(line)
		if err != nil && line == "" {
			return 0
		}
		f.rec.Log(map[string]any{"what": "input", "text": line})
		switch line {
		case "":
			continue
		case "/quit", "/exit":
			return 0
		}
		f.draw(f.doTurn(line))
	}
}

var bashRE = regexp.MustCompile(`\[bash: ([^\]]*)\]`)

func (f *fake) doTurn(prompt string) string {
	f.turn++
	f.rec.Log(map[string]any{"what": "prompt", "text": prompt})
	reply := "ok: " + prompt
	for _, m := range bashRE.FindAllStringSubmatch(prompt, -1) {
		allowed := f.approval == "never"
		if !allowed {
			fmt.Printf("\r\nAllow command?\r\n  $ %s\r\n  y) Yes  n) No  ", m[1])
			answer, _ := f.in.ReadString('\n')
			allowed = strings.HasPrefix(strings.TrimSpace(answer), "y")
			f.rec.Log(map[string]any{"what": "approval", "command": m[1], "answer": strings.TrimSpace(answer)})
		}
		if allowed {
			cmd := exec.Command("sh", "-c", m[1])
			cmd.Dir = f.cwd
			cmd.Run()
			reply += " (ran: " + m[1] + ")"
		} else {
			reply += " (declined: " + m[1] + ")"
		}
	}
	line, _ := json.Marshal(map[string]any{"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "prompt": prompt, "reply": reply})
	if sf, err := os.OpenFile(filepath.Join(f.sessions, f.threadID+".jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
		sf.Write(append(line, '\n'))
		sf.Close()
	}
	f.notifyTurn(prompt, reply)
	return reply
}

func (f *fake) notifyTurn(prompt, reply string) {
	if len(f.notify) == 0 {
		return
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "agent-turn-complete", "thread-id": f.threadID, "turn-id": fmt.Sprintf("turn-%d", f.turn),
		"cwd": f.cwd, "client": "codex-tui", "input-messages": []string{prompt}, "last-assistant-message": reply,
	})
	cmd := exec.Command(f.notify[0], append(slices.Clone(f.notify[1:]), string(payload))...)
	out, err := cmd.CombinedOutput()
	f.rec.Log(map[string]any{"what": "hook", "event": "agent-turn-complete", "argv": f.notify, "exit": fakekit.ExitCode(err), "stderr": string(out)})
}

func (f *fake) draw(reply string) {
	fmt.Print("\x1b[2J\x1b[H")
	fmt.Printf(">_ fakecodex (thread %s, approval %s)\r\n", f.threadID, f.approval)
	if reply != "" {
		fmt.Printf("• %s\r\n", reply)
	}
	fmt.Print("› ")
}

// newUUID is a thread id: v7-shaped, as Codex's.
func newUUID() string { return fakekit.UUID(7) }
