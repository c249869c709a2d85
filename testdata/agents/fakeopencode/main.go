// Command fakeopencode behaves like opencode's TUI (1.x) as far as strata can
// see it: `opencode [project]` with its documented flags (--prompt,
// -s/--session ID, -c/--continue, --fork, -m/--model, --agent, --port,
// --hostname, --auto); sessions named ses_..., kept under
// $XDG_DATA_HOME/opencode (else ~/.local/share/opencode); no hooks, so strata
// knows it only from its terminal. It draws on the alternate screen, prints
// its answer a piece at a time (the model streaming) and then blocks reading
// the terminal. Everything it received goes to $FAKEOPENCODE_RECORD.
//
// Prompts script it: "[slow: D]" streams for D; "/exit", "/quit" or "/q"
// (or end of input) ends it.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/stratahq/strata/testdata/agents/fakekit"
)

type fake struct {
	session string
	store   string
	rec     *fakekit.Recorder
}

func main() { os.Exit(run(os.Args[1:])) }

func fail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	return 1
}

func run(args []string) int {
	f := &fake{}
	rec, err := fakekit.OpenRecord("FAKEOPENCODE_RECORD")
	if err != nil {
		return fail("record: %v", err)
	}
	defer rec.Close()
	f.rec = rec
	f.rec.Log(map[string]any{"what": "argv", "argv": args})
	var prompt, session, project string
	var cont, fork bool
	for opts := fakekit.NewArgs(args); opts.Next(); {
		a, name := opts.Arg, opts.Name
		ok := true
		switch name {
		case "-c", "--continue":
			cont = true
		case "--fork":
			fork = true
		case "--auto", "--print-logs", "--mdns":
		case "--prompt":
			prompt, ok = opts.Value()
		case "-s", "--session":
			session, ok = opts.Value()
		case "-m", "--model", "--agent", "--port", "--hostname", "--log-level":
			_, ok = opts.Value()
		default:
			if strings.HasPrefix(a, "-") {
				return fail("Unknown argument: %s", strings.TrimLeft(name, "-"))
			}
			if project != "" {
				return fail("Unknown argument: %s", a)
			}
			project = a
		}
		if !ok {
			return fail("Not enough arguments following: %s", strings.TrimLeft(name, "-"))
		}
	}
	if fork && session == "" && !cont {
		return fail("--fork requires --continue or --session")
	}
	if project != "" {
		if err := os.Chdir(project); err != nil {
			return fail("Failed to change directory to %s", project)
		}
	}
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(os.Getenv("HOME"), ".local", "share")
	}
	f.store = filepath.Join(data, "opencode", "storage", "session")
	os.MkdirAll(f.store, 0o755)
	switch {
	case session != "":
		if _, err := os.Stat(filepath.Join(f.store, session+".json")); err != nil {
			return fail("Session not found: %s", session)
		}
		f.session = session
	case cont:
		ents, _ := os.ReadDir(f.store)
		if len(ents) > 0 {
			f.session = strings.TrimSuffix(ents[len(ents)-1].Name(), ".json")
		}
	}
	if f.session == "" || fork {
		var b [13]byte
		rand.Read(b[:])
		f.session = "ses_" + hex.EncodeToString(b[:])
	}
	os.WriteFile(filepath.Join(f.store, f.session+".json"), []byte(`{"id":"`+f.session+`"}`), 0o644)
	f.rec.Log(map[string]any{"what": "session", "session_id": f.session})

	fmt.Print("\x1b[?1049h\x1b[2J\x1b[H")
	defer fmt.Print("\x1b[?1049l")
	f.draw("")
	if prompt != "" {
		f.turn(prompt)
	}
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := fakekit.ReadInput(in)
		line = strings.TrimSpace(line)
		if err != nil && line == "" {
			return 0
		}
		f.rec.Log(map[string]any{"what": "input", "text": line})
		switch line {
		case "":
			continue
		case "/exit", "/quit", "/q":
			return 0
		}
		f.turn(line)
	}
}

var slowRE = regexp.MustCompile(`\[slow: ([^\]]*)\]`)

// turn streams the answer for a while, a piece every 100ms.
func (f *fake) turn(prompt string) {
	f.rec.Log(map[string]any{"what": "prompt", "text": prompt})
	d := 500 * time.Millisecond
	if m := slowRE.FindStringSubmatch(prompt); m != nil {
		if v, err := time.ParseDuration(m[1]); err == nil {
			d = v
		}
	}
	fmt.Printf("\x1b[3;1H┃ %s\r\n", prompt)
	for end := time.Now().Add(d); time.Now().Before(end); {
		fmt.Print("▌")
		time.Sleep(100 * time.Millisecond)
	}
	f.draw("ok: " + prompt)
	f.rec.Log(map[string]any{"what": "answered", "text": prompt})
}

func (f *fake) draw(reply string) {
	fmt.Print("\x1b[2J\x1b[H")
	fmt.Printf("opencode (fake) · %s\r\n", f.session)
	if reply != "" {
		fmt.Printf("\x1b[5;1H%s\r\n", reply)
	}
	fmt.Print("\x1b[20;1H┃ > ")
}
