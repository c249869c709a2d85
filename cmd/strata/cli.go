package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/themes"
)

// exitError carries a specific exit status up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// usageError is a mistake in how strata was called; exit status 2. err,
// when set, is the error it came from (a flag package error), kept for
// errors.Is/As.
type usageError struct {
	msg string
	err error
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	return &usageError{msg: err.Error(), err: errors.Unwrap(err)}
}

// app is what every subcommand gets.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	ctx            context.Context
	eng            *engine.Engine
	jsonErrors     bool // --json: errors go to stderr as JSON alone, no usage text
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, ctx: ctx}
	if path := os.Getenv("STRATA_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	a.jsonErrors = len(args) > 0 && wantsJSON(args[1:])
	return a.exit(dispatch(a, args))
}

func dispatch(a *app, args []string) error {
	if len(args) == 0 {
		return a.call("tui", nil)
	}
	switch args[0] {
	case "help", "-h", "--help":
		if args[0] == "help" && len(args) > 1 {
			return helpFor(a, args[1:])
		}
		printHelp(a.stdout)
		return nil
	case "version", "--version":
		fmt.Fprintln(a.stdout, "strata", versionString())
		return nil
	case "__complete": // hidden: what the completion scripts ask
		return cmdComplete(a, args[1:])
	}
	c, ok := commandNamed(args[0])
	if !ok {
		return usagef("unknown command %q (strata help lists them)", args[0])
	}
	// Help and flag mistakes are answered before the engine opens: neither
	// may create the state root or the log.
	in, err := a.parseArgs(c, args[1:])
	if err != nil {
		return err
	}
	if !c.noEng {
		if err := a.open(); err != nil {
			return err
		}
	}
	return a.explainNoSpace(c.name, c.run(a, in))
}

// helpFor answers `strata help VERB` with VERB's usage, like VERB --help.
func helpFor(a *app, args []string) error {
	if len(args) > 1 {
		return usagef("help: unexpected argument %q (strata help [COMMAND])", args[1])
	}
	c, ok := commandNamed(args[0])
	if !ok {
		return usagef("help: unknown command %q (strata help lists them)", args[0])
	}
	c.writeUsage(a.stdout)
	return nil
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "strata: run coding agents in parallel overlay Worlds over one source tree, review and apply their changes.")
	fmt.Fprintln(w, "\nUsage:\n  strata                 open the TUI on the Worlds of the current source (strata tui --all: every World)")
	groups, byGroup := groupedCommands()
	for _, g := range groups {
		if len(byGroup[g]) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, c := range byGroup[g] {
			fmt.Fprintf(w, "  strata %-14s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nRun strata COMMAND --help for a command's flags; every command takes --json (docs/cli.md).")
	fmt.Fprintln(w, "State: $STRATA_HOME (default ~/.local/share/strata). Config: ~/.config/strata/config.toml.")
}

func (a *app) open() error {
	if a.eng != nil {
		return nil
	}
	// The whole config, the TUI's part included, is checked before anything
	// is created: every command refuses a config the TUI would refuse.
	cfg, err := engine.LoadConfig(engine.DefaultConfigPath())
	if err != nil {
		return err
	}
	engine.Trace("cli: config loaded")
	if err := checkUIConfig(cfg); err != nil {
		return err
	}
	engine.Trace("cli: ui config checked")
	logger := openLog()
	eng, err := engine.Open(a.ctx, engine.Options{Logger: logger, Config: cfg})
	if err != nil {
		return err
	}
	engine.Trace("cli: engine open")
	a.eng = eng
	return nil
}

// openLog logs to $XDG_STATE_HOME/strata/strata.log; never to the terminal.
func openLog() *slog.Logger {
	path := engine.DefaultLogPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return slog.New(slog.DiscardHandler)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelInfo
	if os.Getenv("STRATA_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: level})).With("pid", os.Getpid())
}

// checkUIConfig checks config.toml's [keys], theme and [colors] with the
// functions the TUI builds its keymap and styles with, one entry at a time
// so the error names the entry's line.
func checkUIConfig(cfg *engine.Config) error {
	problem := func(key string, err error) error {
		return &engine.ConfigError{Path: cfg.Path(), Line: engine.ConfigLine(cfg.Path(), key), Err: err}
	}
	for _, n := range slices.Sorted(maps.Keys(cfg.Keys)) {
		if _, err := keymap.Load(map[string][]string{n: cfg.Keys[n]}); err != nil {
			return problem("keys."+n, err)
		}
	}
	if _, err := keymap.Load(cfg.KeyMap()); err != nil { // one key bound twice
		return problem("keys", err)
	}
	if _, err := themes.Resolve(themes.Options{Theme: cfg.Theme}); err != nil {
		return problem("theme", err)
	}
	for _, role := range slices.Sorted(maps.Keys(cfg.Colors)) {
		if _, err := themes.Resolve(themes.Options{Theme: cfg.Theme, Colors: map[string]string{role: cfg.Colors[role]}}); err != nil {
			return problem("colors."+role, err)
		}
	}
	return nil
}

// parse parses flags anywhere among the operands, the way git does, up to a
// "--": every argument after it is an operand however it looks ("-y" is a
// file's name there, not a flag). pos holds every operand, those after "--"
// included, so a command that takes paths gets them all and a command that
// takes fewer refuses the extra ones (want) instead of dropping them. rest is
// the tail of pos that came after "--", for the commands whose operands there
// are a command line to run (exec, fork); they cut it off pos with operands.
func parse(fs *flag.FlagSet, args []string) (pos, rest []string, err error) {
	var after []string
	for i, s := range args {
		if s == "--" {
			after = args[i+1:]
			args = args[:i]
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	pos = append(pos, after...)
	return pos, pos[len(pos)-len(after):], nil
}

// operands is pos without the command line that followed "--" (see parse).
func operands(pos, rest []string) []string { n := len(pos) - len(rest); return pos[:n:n] }

func (a *app) printJSON(v any) error {
	enc := jsonEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONLine prints v as one line of JSON (for streams of records),
// unescaped like printJSON.
func (a *app) printJSONLine(v any) error { return jsonEncoder(a.stdout).Encode(v) }

// jsonEncoder writes JSON as strata prints it: commands and paths hold >
// and &, printed as they are, not as \u003e (this is for terminals and
// scripts, not HTML).
func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// oneOf refuses a flag value outside its allowed set ("" means the flag was
// not given and is always allowed) as a usage error, before anything runs.
func oneOf(cmd, flagName, value string, allowed ...string) error {
	if value == "" || slices.Contains(allowed, value) {
		return nil
	}
	return usagef("%s: --%s %q: want %s", cmd, flagName, value, strings.Join(allowed, " or "))
}

// multiFlag collects repeated flags.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func parseKV(list []string, what string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want KEY=VALUE", what, kv)
		}
		out[k] = v
	}
	return out, nil
}
