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

// usageError is a mistake in how strata was called; exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// app is what every subcommand gets.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	ctx            context.Context
	eng            *engine.Engine
	lastFlags      *flag.FlagSet // the FlagSet the command built last (see flagSetOf)
	jsonErrors     bool          // --json: errors go to stderr as JSON alone, no usage text
}

type command struct {
	name    string
	args    string
	summary string
	run     func(a *app, args []string) error
	noEng   bool // does not open the engine
}

// commands lists the subcommands in help order; other files append theirs in init.
var commands = []command{
	{name: "new", args: "NAME [--source DIR] [--backend local|cube] [--mount-backend auto|kernel|fuse-overlayfs|unionfs-fuse] [--isolation tree|strict] [--label K=V]... [--json]", summary: "create a World over a source tree", run: cmdNew},
	{name: "ls", args: "[--all] [--json]", summary: "list the Worlds of the current source (or all)", run: cmdLs},
	{name: "show", args: "NAME [--json]", summary: "show one World", run: cmdShow},
	{name: "status", args: "NAME [--json] [--ignored]", summary: "list a World's changed paths", run: cmdStatus},
	{name: "rm", args: "NAME [--force] [--purge] [--kill] [--json]", summary: "remove a World (to the trash with --force)", run: cmdRm},
	{name: "trash", args: "[--json]", summary: "list removed Worlds kept for 7 days", run: cmdTrash},
	{name: "restore-world", args: "NAME|TRASH-ID [--as NAME]", summary: "bring a World back from the trash", run: cmdRestoreWorld},
	{name: "exec", args: "NAME [--tty] [--detach [--json]] [--env K=V]... [--cwd DIR] [--no-network] [--isolation tree|strict] [--snap] -- CMD ARGS...", summary: "run a command isolated in a World", run: cmdExec},
	{name: "shell", args: "NAME", summary: "open an interactive shell in a World", run: cmdShell},
	{name: "attach", args: "NAME [SESSION]", summary: "attach to a TTY session (detach: ctrl-])", run: cmdAttach},
	{name: "sessions", args: "NAME [--json]", summary: "list a World's sessions", run: cmdSessions},
	{name: "logs", args: "NAME [SESSION] [-f] [--raw] [--json]", summary: "print a session's output as text (newest command session unless SESSION)", run: cmdLogs},
	{name: "kill", args: "NAME SESSION [--signal SIG]", summary: "signal a session", run: cmdKill},
	{name: "doctor", args: "[--json]", summary: "check kernel, backends, state root and journals", run: cmdDoctor},
	{name: "events", args: "[-f] [--json] [--world NAME]", summary: "print (and follow) the activity log", run: cmdEvents},
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
	err := dispatch(a, args)
	if err == nil || strings.HasSuffix(err.Error(), flag.ErrHelp.Error()) {
		return 0 // --help printed the usage; asking for help is not an error
	}
	asJSON := a.jsonErrors
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			a.printError(stderr, ee.err, asJSON)
		}
		return ee.code
	}
	a.printError(stderr, err, asJSON)
	var ue *usageError
	var ce *engine.ConfigError
	if errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) || errors.As(err, &ce) {
		return 2
	}
	return 1
}

func dispatch(a *app, args []string) error {
	if len(args) == 0 {
		return runTUI(a, nil)
	}
	switch args[0] {
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" {
			return helpFor(a, args[1])
		}
		printHelp(a.stdout)
		return nil
	case "version", "--version":
		fmt.Fprintln(a.stdout, "strata", versionString())
		return nil
	case "__complete": // hidden: what the completion scripts ask
		return cmdComplete(a, args[1:])
	case "tui":
		if err := checkFlags(a, command{name: "tui", run: runTUI}, args[1:]); err != nil {
			return err
		}
		return runTUI(a, args[1:])
	}
	for _, c := range commands {
		if c.name == args[0] {
			// Help and flag mistakes are answered before the engine opens:
			// neither may create the state root or the log.
			if err := checkFlags(a, c, args[1:]); err != nil {
				return err
			}
			if !c.noEng {
				if err := a.open(); err != nil {
					return err
				}
			}
			return a.explainNoSpace(c.name, c.run(a, args[1:]))
		}
	}
	return usagef("unknown command %q (strata help lists them)", args[0])
}

// flagSetOf returns the FlagSet command c builds, by running it with
// --help against an app without an engine: every command builds and parses
// its flags before anything else, so it stops there. The table of commands
// stays the one declaration of the flags (help, docs test, completion).
func flagSetOf(ctx context.Context, c command) *flag.FlagSet {
	probe := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, ctx: ctx}
	_ = c.run(probe, []string{"--help"})
	return probe.lastFlags
}

// checkFlags parses args with c's flags without running c. It returns
// flag.ErrHelp (after printing c's usage) when they ask for help, a usage
// error when they are wrong, and nil otherwise: c then runs as usual.
func checkFlags(a *app, c command, args []string) error {
	fs := flagSetOf(a.ctx, c)
	if fs == nil {
		return nil
	}
	// Asked-for help goes to stdout (strata ls --help | less), a mistake's
	// usage to stderr.
	var out strings.Builder
	fs.SetOutput(&out)
	_, _, err := parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = io.WriteString(a.stdout, out.String())
		return err
	case err != nil:
		if !a.jsonErrors {
			_, _ = io.WriteString(a.stderr, out.String())
		}
		return usagef("%v", err)
	}
	return nil
}

// helpFor answers `strata help VERB` with VERB's usage, like VERB --help.
func helpFor(a *app, name string) error {
	if name == "tui" {
		return checkFlags(a, command{name: "tui", run: runTUI}, []string{"--help"})
	}
	for _, c := range commands {
		if c.name == name {
			return checkFlags(a, c, []string{"--help"})
		}
	}
	return usagef("help: unknown command %q (strata help lists them)", name)
}

// helpGroups orders `strata help` by what a person is doing; a command not
// listed here (a new one) still shows, under "More".
var helpGroups = []struct {
	title string
	names []string
}{
	{"Worlds", []string{"new", "ls", "show", "status", "rm", "trash", "restore-world"}},
	{"Sessions", []string{"exec", "shell", "attach", "sessions", "logs", "kill"}},
	{"Review and apply", []string{"diff", "apply", "history"}},
	{"Snapshots", []string{"snap", "timeline", "rollback", "fork", "restore", "snapdiff", "gc"}},
	{"Evidence", []string{"blame", "top", "compare", "events"}},
	{"CubeSandbox", []string{"up", "stop"}},
	{"Machine", []string{"doctor", "completion"}},
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "strata: run coding agents in parallel overlay Worlds over one source tree, review and apply their changes.")
	fmt.Fprintln(w, "\nUsage:\n  strata                 open the TUI on the Worlds of the current source (strata tui --all: every World)")
	byName := map[string]command{}
	for _, c := range commands {
		byName[c.name] = c
	}
	shown := map[string]bool{}
	for _, g := range helpGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, n := range g.names {
			if c, ok := byName[n]; ok {
				fmt.Fprintf(w, "  strata %-14s %s\n", c.name, c.summary)
				shown[n] = true
			}
		}
	}
	var more []command
	for _, c := range commands {
		if !shown[c.name] {
			more = append(more, c)
		}
	}
	if len(more) > 0 {
		fmt.Fprintln(w, "\nMore:")
		for _, c := range more {
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
	if err := checkUIConfig(cfg); err != nil {
		return err
	}
	logger := openLog()
	eng, err := engine.Open(a.ctx, engine.Options{Logger: logger, Config: cfg})
	if err != nil {
		return err
	}
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
	if _, err := keymap.Load(cfg.Keys); err != nil { // one key bound twice
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

// flags builds a FlagSet whose errors and help go to stderr.
func (a *app) flags(name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet("strata "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	if a.jsonErrors {
		fs.SetOutput(io.Discard) // the error alone, as JSON
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: strata %s %s\n", name, args)
		fs.PrintDefaults()
	}
	a.lastFlags = fs
	return fs
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

// want checks the number of positional arguments.
func want(fs *flag.FlagSet, pos []string, min, max int, what string) error {
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		fs.Usage()
		if len(pos) < min {
			return usagef("%s: missing %s", strings.TrimPrefix(fs.Name(), "strata "), what)
		}
		return usagef("%s: unexpected argument %q", strings.TrimPrefix(fs.Name(), "strata "), pos[max])
	}
	return nil
}

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
