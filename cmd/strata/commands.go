package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/overlay"
)

// The command table: every command is declared once, here (name, group,
// flags with their help and value names, positional arguments with their
// kind for completion, help text, examples). Parsing, `--` handling, usage
// errors, `VERB --help`, `strata help`, the completions and the reference
// section of docs/cli.md are all generated from it.
//
// Parsing uses the standard library's flag package behind this small table,
// not cobra/pflag: the CLI's documented and tested semantics are Go flag's
// (`-n 3`, `--n=3`, `-json` and `--json` all work; single-dash long flags),
// and a switch would change every flag's parsing and the help format for no
// gain a table of ~35 commands needs.

// argKind says what a positional argument names, for completion.
type argKind string

const (
	kindNone     argKind = ""
	kindWorld    argKind = "world"
	kindSession  argKind = "session"
	kindSnapshot argKind = "snapshot"
	kindPath     argKind = "path"
	kindShell    argKind = "shell"
	kindCommand  argKind = "command"
)

// argSpec is one positional argument: required (min 1, max 1), optional
// (0, 1) or repeated (min, -1).
type argSpec struct {
	name     string
	kind     argKind
	min, max int
}

func one(name string, k argKind) argSpec  { return argSpec{name, k, 1, 1} }
func opt(name string, k argKind) argSpec  { return argSpec{name, k, 0, 1} }
func many(name string, k argKind) argSpec { return argSpec{name, k, 0, -1} }
func some(name string, k argKind) argSpec { return argSpec{name, k, 1, -1} }

func (s argSpec) usage() string {
	switch {
	case s.min == 1 && s.max == 1:
		return s.name
	case s.min == 0 && s.max == 1:
		return "[" + s.name + "]"
	case s.min == 0:
		return "[" + s.name + "...]"
	}
	return s.name + "..."
}

type flagType int

const (
	boolFlag flagType = iota
	stringFlag
	intFlag
	durationFlag
	listFlag // repeatable string
)

// flagSpec is one flag. value names its argument in the usage (--source
// DIR); values, when set, is the only values allowed (checked before the
// command runs, and offered by completion); kind completes its value.
type flagSpec struct {
	name, value, help string
	typ               flagType
	def               any
	values            []string
	kind              argKind
}

func boolF(name, help string) flagSpec { return flagSpec{name: name, help: help, typ: boolFlag} }
func jsonF(help string) flagSpec       { return boolF("json", help) }
func strF(name, value, def, help string) flagSpec {
	return flagSpec{name: name, value: value, help: help, typ: stringFlag, def: def}
}

func intF(name, value string, def int, help string) flagSpec {
	return flagSpec{name: name, value: value, help: help, typ: intFlag, def: def}
}

func durF(name, value string, def time.Duration, help string) flagSpec {
	return flagSpec{name: name, value: value, help: help, typ: durationFlag, def: def}
}

func listF(name, value, help string) flagSpec {
	return flagSpec{name: name, value: value, help: help, typ: listFlag}
}

func (f flagSpec) oneOf(values ...string) flagSpec { f.values = values; return f }
func (f flagSpec) completes(k argKind) flagSpec    { f.kind = k; return f }

func (f flagSpec) dashed() string {
	if len(f.name) == 1 {
		return "-" + f.name
	}
	return "--" + f.name
}

func (f flagSpec) usage() string {
	s := f.dashed()
	switch {
	case len(f.values) > 0:
		s += " " + strings.Join(f.values, "|")
	case f.value != "":
		s += " " + f.value
	}
	s = "[" + s + "]"
	if f.typ == listFlag {
		s += "..."
	}
	return s
}

type command struct {
	name, group, summary string
	args                 []argSpec
	// dashArgs, when set, names the command line the operands after "--"
	// are (exec, fork): they reach run as in.rest, and args counts only
	// the operands before it. Otherwise every operand, those after "--"
	// included, counts against args: none is ever dropped.
	dashArgs     string
	dashOptional bool // the command line after "--" may be left out (fork)
	flags        []flagSpec
	help         string   // more than the summary, for VERB --help and the docs
	examples     []string // command lines (without "strata ")
	run          func(a *app, in *input) error
	noEng        bool // does not open the engine
	ownArity     bool // run checks the operands itself (exec's fan-out and no-"--" forms)
}

// commands lists the commands in help order within their group.
var commands []command

func init() {
	commands = commandTable()
}

// Groups of `strata help`, in order.
var groupOrder = []string{"Worlds", "Sessions", "Review and apply", "Snapshots", "Evidence", "CubeSandbox", "Machine"}

func commandTable() []command {
	isolation := strF("isolation", "", "", "session isolation: sandbox (default: the host read-only but the World, temp dirs and a private home layer; credentials hidden, environment scrubbed), strict (sandbox with the home read-only, no network) or tree (protects only the source)").oneOf(engine.IsolationNames()...)
	agentF := strF("agent", "PRESET", "", "start this agent preset (claude, codex, gemini, aider, opencode, shell or one of [agents.NAME])")
	promptF := strF("prompt", "TEXT", "", "the agent's first prompt")
	promptFileF := strF("prompt-file", "F", "", "read the first prompt from a file")
	network := strF("network", "", "", "network: none (loopback only), proxy (the World's egress proxy allows the hosts on its allow-list) or host (the host's network); default: config, else the level's (tree host, strict none, sandbox proxy)").oneOf(engine.NetworkNames()...)
	treeF := strF("tree", "NAME", "", "only this tree of a World with several (new --mount; main is the source)")
	passEnv := listF("pass-env", "NAME", "pass the variable NAME although the boundary's environment scrub drops it (repeatable)")
	return []command{
		{
			name: "tui", group: "Machine", summary: "open the TUI (what strata alone does)",
			flags: []flagSpec{
				boolF("all", "show every World, not only those over the current source"),
				strF("source", "DIR", "", "show the Worlds over this source tree (default: the current directory)").completes(kindPath),
			},
			run: runTUI, noEng: true,
		},
		{
			name: "new", group: "Worlds", summary: "create a World over a source tree",
			args: []argSpec{one("NAME", kindNone)},
			flags: []flagSpec{
				strF("source", "DIR", "", "source tree (default: the current directory)").completes(kindPath),
				strF("backend", "", "", "runtime (default from config.toml, else local)").oneOf(engine.RuntimeNames()...),
				strF("mount-backend", "", "", "overlay backend").oneOf(string(overlay.BackendAuto), string(overlay.BackendKernel), string(overlay.BackendFuseOverlayfs), string(overlay.BackendUnionfs)),
				isolation,
				network,
				listF("label", "K=V", "label the World (repeatable)"),
				listF("mount", "[NAME=]DIR[:MODE]", "another tree the World sees at its own absolute path (repeatable): MODE overlay (default: changes kept in the World, reviewed and applied per tree), readonly, or shared (read-write straight to DIR, never in status or apply); NAME defaults to DIR's base name").completes(kindPath),
				passEnv,
				strF("template", "T", "", "cube: template id (or pick one with --cpu/--memory/--disk)"),
				intF("cpu", "MILLI", 0, "cube: CPU in millicores; with --memory and --disk, picks the smallest configured template that fits"),
				intF("memory", "MB", 0, "cube: memory in MB (see --cpu)"),
				intF("disk", "MB", 0, "cube: disk in MB (see --cpu)"),
				strF("build-state", "", "", "what rollback does with build outputs (ignore/build patterns): keep them and give rolled-back sources the current time, or discard them (default from config.toml, else keep)").oneOf(string(engine.BuildKeep), string(engine.BuildDiscard)),
				jsonF("print the World as JSON"),
				agentF, promptF, promptFileF,
			},
			dashArgs: "CMD ARGS...", dashOptional: true,
			help:     "Names: [a-z0-9][a-z0-9._-]{0,62}. Refused: a taken name, a state root inside the source.\n--mount trees must be existing directories, none inside another (or the source), not /, the home, strata's state or a credential path; names are unique, like World names, and main is the source's.\nWith --agent (or -- CMD), starts it in the new World on a terminal, detached; --agent a,b makes one World per preset (NAME-a, NAME-b).",
			examples: []string{"new fix-login", "new try2 --source ~/src/app --isolation strict", "new big --backend cube --cpu 2000 --memory 4096 --disk 10240", "new fix --agent claude --prompt 'fix the login test'", "new race --agent claude,codex --prompt-file task.md", "new ue --source /src/engine --mount game=/src/game --mount tools=/src/tools:readonly --mount ddc=/var/cache/ddc:shared"},
			run:      cmdNew,
		},
		{
			name: "ls", group: "Worlds", summary: "list the Worlds of the current source (or all)",
			flags: []flagSpec{boolF("all", "list the Worlds of every source"), jsonF("print JSON")},
			run:   cmdLs,
		},
		{
			name: "show", group: "Worlds", summary: "show one World",
			args: []argSpec{one("NAME", kindWorld)}, flags: []flagSpec{jsonF("print JSON")}, run: cmdShow,
		},
		{
			name: "status", group: "Worlds", summary: "list a World's changed paths",
			args:  []argSpec{one("NAME", kindWorld), many("PATH", kindPath)},
			flags: []flagSpec{jsonF("print JSON"), boolF("ignored", "also list paths matched by ignore rules (.git/ and config ignore)"), treeF},
			help:  "A World with several trees (new --mount) lists each overlay tree's changes, the source's first; a path of another tree is written NAME:path, and --json gives each change its \"tree\". PATHs (as for diff: NAME:path, absolute, or relative to the current directory, . included) list only the changes at or under them; from inside a tree, . is that tree.",
			run:   cmdStatus,
		},
		{
			name: "rm", group: "Worlds", summary: "remove a World (to the trash with --force)",
			args: []argSpec{one("NAME", kindWorld)},
			flags: []flagSpec{
				boolF("force", "remove even with unsaved work: the World goes to the trash for 7 days"),
				boolF("purge", "delete the World for good (no trash)"),
				boolF("kill", "kill running sessions first"),
				jsonF("print JSON"),
			},
			run: cmdRm,
		},
		{
			name: "trash", group: "Worlds", summary: "list removed Worlds kept for 7 days",
			flags: []flagSpec{jsonF("print JSON")}, run: cmdTrash,
		},
		{
			name: "restore-world", group: "Worlds", summary: "bring a World back from the trash",
			args:  []argSpec{one("NAME|TRASH-ID", kindNone)},
			flags: []flagSpec{strF("as", "NAME", "", "restore under another name").completes(kindWorld)},
			run:   cmdRestoreWorld,
		},
		{
			name: "exec", group: "Sessions", summary: "run a command isolated in a World",
			args: []argSpec{one("NAME", kindWorld)}, dashArgs: "CMD ARGS...", ownArity: true,
			flags: []flagSpec{
				boolF("tty", "run the command on a terminal (attach to it later with strata attach)"),
				boolF("detach", "print the session id and return; the command keeps running"),
				listF("env", "K=V", "set an environment variable (repeatable)"),
				strF("cwd", "DIR", "", "working directory in the World (default: the current directory when it lies in the source or the World, else the source root)"),
				boolF("no-network", "run without network (a private network namespace with only lo); the same as --network none"),
				isolation,
				network,
				passEnv,
				boolF("snap", "take a snapshot before running (undo with strata rollback)"),
				strF("worlds", "A,B,C", "", "run in several Worlds at once (fan-out; no NAME)"),
				boolF("all", "run in every World of the current source at once (fan-out; no NAME)"),
				jsonF("with --detach: print the session as JSON (refused without --detach)"),
			},
			help:     "The command's status is exec's: 128+N for signal N, 127 not found, 126 not executable, 255 a session lost.",
			examples: []string{"exec w -- make test", "exec w --detach --json -- ./agent.sh", "exec --worlds a,b -- go test ./..."},
			run:      cmdExec,
		},
		{
			name: "allow", group: "Sessions", summary: "allow a host through a World's egress proxy, live",
			args:  []argSpec{one("NAME", kindWorld), some("HOST", kindNone)},
			flags: []flagSpec{jsonF("print JSON")},
			help: "HOST is a host name, *.domain (its subdomains) or host:port (without a port: any). It is kept with the World " +
				"(on top of the defaults and config.toml's [boundary] allow lists) and a running proxy takes it at once: " +
				"the World's next request to it goes through, no session restarts. A denied host is an egress.denied event (strata events).",
			examples: []string{"allow w registry.example.com", "allow w '*.githubusercontent.com' api.example.com:8443"},
			run:      cmdAllow,
		},
		{
			name: "shell", group: "Sessions", summary: "open an interactive shell in a World",
			args: []argSpec{one("NAME", kindWorld)}, run: cmdShell,
		},
		{
			name: "attach", group: "Sessions", summary: "attach to a TTY session (detach: ctrl-])",
			args: []argSpec{one("NAME", kindWorld), opt("SESSION", kindSession)}, run: cmdAttach,
		},
		{
			name: "sessions", group: "Sessions", summary: "list a World's sessions",
			args: []argSpec{one("NAME", kindWorld)}, flags: []flagSpec{jsonF("print JSON")}, run: cmdSessions,
		},
		{
			name: "logs", group: "Sessions", summary: "print a session's output as text (newest command session unless SESSION)",
			args: []argSpec{one("NAME", kindWorld), opt("SESSION", kindSession)},
			flags: []flagSpec{
				boolF("f", "follow the output until the session ends"),
				boolF("raw", "the output as recorded, terminal escape sequences and carriage returns included"),
				jsonF("print records as JSON lines {time, stream, data} (a resize: {time, stream, rows, cols})"),
			},
			run: cmdLogs,
		},
		{
			name: "kill", group: "Sessions", summary: "stop a session: TERM, then KILL after kill_grace (5s); or send one signal",
			args: []argSpec{one("NAME", kindWorld), opt("SESSION", kindSession)},
			flags: []flagSpec{
				strF("signal", "SIG", "", "send just this signal (name or number) and return"),
				boolF("force", "KILL at once"),
			},
			help: "SESSION defaults to the World's agent session. A session stopped this way is reported exited (killed by strata), not failed.",
			run:  cmdKill,
		},
		{
			name: "run", group: "Sessions", summary: "start an agent (or a command) on a terminal in a World, detached",
			args: []argSpec{one("NAME", kindWorld)}, dashArgs: "CMD ARGS...", dashOptional: true,
			flags:    []flagSpec{agentF, promptF, promptFileF, boolF("mute", "an idle session does not count as needing you"), jsonF("print the session as JSON")},
			examples: []string{"run w --agent claude --prompt 'add tests'", "run w -- bash"},
			run:      cmdRun,
		},
		{
			name: "wait", group: "Sessions", summary: "wait until a World's agent needs input, is done with its turn, or exits",
			args: []argSpec{one("NAME", kindWorld)},
			flags: []flagSpec{
				strF("for", "", "needs-input", "the state to wait for").oneOf("needs-input", "done", "exit"),
				durF("timeout", "D", 0, "give up after D with exit status 3 (0: wait for ever)"),
				jsonF("print the agent's status as JSON"),
			},
			run: cmdWait,
		},
		{
			name: "send", group: "Sessions", summary: "type text to a World's agent (queued while it works, unless --now)",
			args:  []argSpec{one("NAME", kindWorld), some("TEXT", kindNone)},
			flags: []flagSpec{boolF("now", "send at once, even while the agent works on a turn")},
			run:   cmdSend,
		},
		{
			name: "mute", group: "Sessions", summary: "stop (or with --off, resume) counting a World's idle session as needing you",
			args: []argSpec{one("NAME", kindWorld)}, flags: []flagSpec{boolF("off", "unmute")}, run: cmdMute,
		},
		{
			name: "diff", group: "Review and apply", summary: "show a World's changes as a unified diff (git apply accepts it)",
			args: []argSpec{one("NAME", kindWorld), many("PATH", kindPath)},
			flags: []flagSpec{
				boolF("stat", "summary: changed lines per path"),
				jsonF("print JSON"),
				strF("against", "", "base", "base (what the World started from) or source (the source now)").oneOf("base", "source"),
				strF("against-world", "W", "", "diff against another World's version").completes(kindWorld),
				intF("U", "N", 3, "context lines"),
				boolF("binary", "diff binary and huge files as text anyway"),
				treeF,
			},
			help:     "PATH is relative to the source, or NAME:PATH in another tree of the World (new --mount); a tree's paths are written NAME:path in the patch headers.",
			examples: []string{"diff w", "diff w --stat", "diff w --json src/x.go", "diff ue game:Source/Game.cpp"},
			run:      cmdDiff,
		},
		{
			name: "apply", group: "Review and apply", summary: "publish picked paths and hunks to the source atomically",
			args: []argSpec{one("NAME", kindWorld), many("PATH", kindPath)},
			flags: []flagSpec{
				listF("hunks", "PATH=1,3,5-7", "only these hunks of PATH (numbers as strata diff shows them); repeatable"),
				listF("expect-base", "PATH=HASH", "refuse PATH unless its base is still the one diffed (base_hash of strata diff --json); repeatable"),
				listF("expect-world", "PATH=HASH", "refuse PATH unless the World's file is still the one diffed (world_hash of strata diff --json); repeatable"),
				boolF("dry-run", "decide everything and report, write nothing"),
				jsonF("print JSON"),
				boolF("drop-applied", "afterwards remove applied paths from the World so it reads them from the source"),
				strF("to-branch", "B", "", "commit the picks on a new git branch; the working tree and index are not touched"),
				strF("m", "MSG", "", "commit message for --to-branch"),
				boolF("allow-setuid", "publish setuid/setgid bits the World set (stripped by default, with a warning)"),
				treeF,
			},
			help:     "In a World with several trees (new --mount), PATH is NAME:PATH in another tree; each tree is its own atomic publication. Every tree is checked first (conflicts, stale picks, writers) and nothing is written unless all pass; a tree whose source changes after that check is refused alone, the trees before it staying published (error code partial_apply).",
			examples: []string{"apply w", "apply w src/x.go --hunks src/x.go=2", "apply w --to-branch agent-fix -m 'fix login'", "apply w -- -y", "apply ue game:Source/Game.cpp", "apply ue --tree game"},
			run:      cmdApply,
		},
		{
			name: "review", group: "Review and apply", summary: "comment on a World's diff and send the comments to its agent as one prompt",
			args: []argSpec{one("NAME", kindWorld), opt("ACTION", kindNone), many("OPERAND", kindNone)},
			flags: []flagSpec{
				jsonF("print JSON"),
				boolF("rounds", "list the rounds already sent (with --json: each round's prompt and comments)"),
				boolF("old", "add: the lines are the base's (lines the World removed), not the World's"),
				boolF("now", "send: type the prompt at once, even while the agent is working (default: queued until its turn ends)"),
			},
			help: "Without ACTION, lists the open round's comments, marking stale those whose code changed since they were written. " +
				"ACTION is add PATH:LINE[-LINE] TEXT..., rm N, or send (one prompt, numbered by round, with each comment's path:line and the quoted code).",
			examples: []string{"review w", "review w add src/x.go:12-14 use a constant here", "review w rm 2", "review w send", "review w --rounds --json"},
			run:      cmdReview,
		},
		{
			name: "history", group: "Review and apply", summary: "list publications to sources",
			flags: []flagSpec{jsonF("print JSON"), strF("world", "NAME", "", "only this World's publications").completes(kindWorld)},
			run:   cmdHistory,
		},
		{
			name: "snap", group: "Snapshots", summary: "snapshot a World (its processes paused for the capture)",
			args:  []argSpec{one("NAME", kindWorld)},
			flags: []flagSpec{strF("m", "MSG", "", "message"), jsonF("print JSON")},
			run:   cmdSnap,
		},
		{
			name: "timeline", group: "Snapshots", summary: "show a World's snapshots as a tree",
			args: []argSpec{one("NAME", kindWorld)}, flags: []flagSpec{jsonF("print JSON")}, run: cmdTimeline,
		},
		{
			name: "rollback", group: "Snapshots", summary: "restore a World to a snapshot (the current state is snapshotted first)",
			args:  []argSpec{one("NAME", kindWorld), one("SNAP", kindSnapshot)},
			flags: []flagSpec{boolF("kill", "kill running sessions instead of refusing"), jsonF("print JSON"), boolF("no-resume", "do not restart the agent of a turn snapshot")},
			help:  "Rolling back to an agent's turn snapshot restarts the agent resuming that turn's conversation.",
			run:   cmdRollback,
		},
		{
			name: "fork", group: "Snapshots", summary: "create N Worlds from a snapshot (or the live state)",
			args: []argSpec{one("NAME", kindWorld)}, dashArgs: "CMD ARGS...", dashOptional: true,
			flags: []flagSpec{
				strF("snap", "SNAP", "", "snapshot to fork from (default: the live state, via an implicit snapshot)").completes(kindSnapshot),
				intF("n", "N", 1, "number of Worlds"),
				strF("prefix", "P", "", "name prefix (default: NAME); Worlds are PREFIX-1..N"),
				jsonF("print JSON"),
				agentF,
				listF("prompt", "TEXT", "start the agent in each fork with this prompt; one, or one per World (repeatable)"),
			},
			help:     "With -- CMD ARGS..., runs the command in every new World at once (as exec --worlds).",
			examples: []string{"fork w -n 3", "fork w -n 2 -- make test", "fork w --snap TURN-SNAP -n 2 --prompt 'try A' --prompt 'try B'"},
			run:      cmdFork,
		},
		{
			name: "restore", group: "Snapshots", summary: "bring single paths back from a snapshot",
			args: []argSpec{one("NAME", kindWorld), one("SNAP", kindSnapshot), some("PATH", kindPath)},
			run:  cmdRestore,
		},
		{
			name: "snapdiff", group: "Snapshots", summary: "paths that differ between two snapshots, or a snapshot and now",
			args:  []argSpec{one("NAME", kindWorld), one("A", kindSnapshot), opt("B", kindSnapshot)},
			flags: []flagSpec{jsonF("print JSON")},
			run:   cmdSnapDiff,
		},
		{
			name: "gc", group: "Snapshots", summary: "drop objects and manifests no World's snapshots reference; --verify lists damaged objects",
			flags: []flagSpec{jsonF("print JSON"), boolF("verify", "first rehash every object a snapshot needs and list the damaged ones (exit 1 if any)")},
			run:   cmdGC,
		},
		{
			name: "blame", group: "Evidence", summary: "which sessions wrote a path of a World, and when",
			args: []argSpec{one("NAME", kindWorld), one("PATH", kindPath)}, flags: []flagSpec{jsonF("print JSON")}, run: cmdBlame,
		},
		{
			name: "top", group: "Evidence", summary: "CPU, memory, processes and upper size per World, live",
			args: []argSpec{many("NAME", kindWorld)},
			flags: []flagSpec{
				jsonF("print one sample as JSON (CPU use measured over --interval)"),
				durF("interval", "D", time.Second, "time between samples"),
				intF("count", "N", 0, "stop after N refreshes (0: until interrupted)"),
			},
			run: cmdTop,
		},
		{
			name: "compare", group: "Evidence", summary: "line up several Worlds' changes: who changed what, which versions agree",
			args: []argSpec{one("A", kindWorld), some("B", kindWorld)}, flags: []flagSpec{jsonF("print JSON")}, run: cmdCompare,
		},
		{
			name: "events", group: "Evidence", summary: "print (and follow) the activity log",
			flags: []flagSpec{boolF("f", "follow: print new events as they happen"), jsonF("print JSON lines"), strF("world", "NAME", "", "only this World's events").completes(kindWorld)},
			run:   cmdEvents,
		},
		{
			name: "up", group: "CubeSandbox", summary: "bring a cube World up: create its planned sandbox, or resume a stopped one",
			args: []argSpec{one("NAME", kindWorld)}, flags: []flagSpec{jsonF("print the World as JSON")}, run: cmdUp,
		},
		{
			name: "stop", group: "CubeSandbox", summary: "pause a cube World's sandbox (strata up resumes it)",
			args:  []argSpec{one("NAME", kindWorld)},
			flags: []flagSpec{boolF("kill", "kill running sessions first"), jsonF("print the World as JSON")},
			run:   cmdStop,
		},
		{
			name: "doctor", group: "Machine", summary: "check kernel, backends, state root and journals",
			flags: []flagSpec{
				jsonF("print JSON"),
				boolF("repair", "resolve unfinished publications: complete the intact ones, discard the rest (removing only the files they staged)"),
				boolF("dry-run", "with --repair: say what it would do, change nothing"),
			},
			run: cmdDoctor,
		},
		{
			name: "completion", group: "Machine", summary: "print a shell completion script (verbs, flags, Worlds, sessions, snapshots)",
			args:     []argSpec{one("SHELL", kindShell)},
			help:     "SHELL is bash, zsh or fish.",
			examples: []string{"completion bash > ~/.local/share/bash-completion/completions/strata", "completion fish | source"},
			run:      cmdCompletion, noEng: true,
		},
	}
}

// commandNamed finds a command of the table.
func commandNamed(name string) (*command, bool) {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i], true
		}
	}
	return nil, false
}

// usageLine is "strata NAME ARGS [FLAGS]", generated.
func (c *command) usageLine() string {
	parts := []string{"strata", c.name}
	for _, s := range c.args {
		parts = append(parts, s.usage())
	}
	for _, f := range c.flags {
		parts = append(parts, f.usage())
	}
	switch {
	case c.dashArgs != "" && c.dashOptional:
		parts = append(parts, "[-- "+c.dashArgs+"]")
	case c.dashArgs != "":
		parts = append(parts, "-- "+c.dashArgs)
	}
	return strings.Join(parts, " ")
}

// writeUsage prints c's usage: the line, the summary, help, flags, examples.
func (c *command) writeUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s.\n", c.usageLine(), upperFirst(c.summary))
	if c.help != "" {
		fmt.Fprintf(w, "%s\n", c.help)
	}
	if len(c.flags) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		for _, f := range c.flags {
			head := f.dashed()
			if f.typ != boolFlag {
				v := f.value
				if len(f.values) > 0 {
					v = strings.Join(f.values, "|")
				}
				head += " " + v
			}
			help := f.help
			if d := f.defaultText(); d != "" {
				help += " (default " + d + ")"
			}
			if len(head) > 24 {
				fmt.Fprintf(w, "  %s\n  %-24s %s\n", head, "", help)
				continue
			}
			fmt.Fprintf(w, "  %-24s %s\n", head, help)
		}
	}
	if len(c.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  strata %s\n", e)
		}
	}
}

func (f flagSpec) defaultText() string {
	switch d := f.def.(type) {
	case string:
		return d
	case int:
		if d != 0 {
			return fmt.Sprint(d)
		}
	case time.Duration:
		return d.String()
	}
	return ""
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// input is a parsed command line: flag values by name, the operands (pos)
// and the command line after "--" for commands with dashArgs (rest).
type input struct {
	cmd       *command
	fs        *flag.FlagSet
	pos, rest []string
	vals      map[string]any
}

func (in *input) val(name string) any {
	v, ok := in.vals[name]
	if !ok {
		panic(fmt.Sprintf("strata %s: no flag --%s in the command table", in.cmd.name, name))
	}
	return v
}

func (in *input) Bool(name string) *bool              { return in.val(name).(*bool) }
func (in *input) String(name string) *string          { return in.val(name).(*string) }
func (in *input) Int(name string) *int                { return in.val(name).(*int) }
func (in *input) Duration(name string) *time.Duration { return in.val(name).(*time.Duration) }
func (in *input) List(name string) []string           { return *in.val(name).(*multiFlag) }

// flagSet builds c's flags on a fresh FlagSet writing its errors to out.
func (c *command) flagSet(out io.Writer) *input {
	fs := flag.NewFlagSet("strata "+c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {} // parseArgs prints c's generated usage itself
	in := &input{cmd: c, fs: fs, vals: map[string]any{}}
	for _, f := range c.flags {
		switch f.typ {
		case boolFlag:
			in.vals[f.name] = fs.Bool(f.name, false, f.help)
		case stringFlag:
			def, _ := f.def.(string)
			in.vals[f.name] = fs.String(f.name, def, f.help)
		case intFlag:
			def, _ := f.def.(int)
			in.vals[f.name] = fs.Int(f.name, def, f.help)
		case durationFlag:
			def, _ := f.def.(time.Duration)
			in.vals[f.name] = fs.Duration(f.name, def, f.help)
		case listFlag:
			l := &multiFlag{}
			fs.Var(l, f.name, f.help)
			in.vals[f.name] = l
		}
	}
	return in
}

// flagSetOf is c's FlagSet, for the docs test and completion.
func flagSetOf(c *command) *flag.FlagSet { return c.flagSet(io.Discard).fs }

// errHelp wraps flag.ErrHelp: the usage was printed on stdout, exit 0.
var errHelp = fmt.Errorf("strata: %w", flag.ErrHelp)

// parseArgs parses args against c's table entry: flags anywhere among the
// operands up to "--", allowed values, and the operand count. It prints
// c's usage on stdout and returns an error wrapping flag.ErrHelp for -h or
// --help, and prints the usage on stderr (not with --json) and returns a
// usage error for a mistake. It has no side effect beyond that output.
func (a *app) parseArgs(c *command, args []string) (*input, error) {
	in := c.flagSet(io.Discard)
	pos, rest, err := parse(in.fs, args)
	mistake := func(err error) (*input, error) {
		if !a.jsonErrors {
			c.writeUsage(a.stderr)
		}
		return nil, err
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.writeUsage(a.stdout)
		return nil, errHelp
	case err != nil:
		return mistake(&usageError{msg: c.name + ": " + err.Error(), err: err})
	}
	for _, f := range c.flags {
		if len(f.values) == 0 {
			continue
		}
		if err := oneOf(c.name, f.name, *in.String(f.name), f.values...); err != nil {
			return mistake(err)
		}
	}
	in.pos, in.rest = pos, nil
	if c.dashArgs != "" {
		in.pos, in.rest = operands(pos, rest), rest
	}
	if !c.ownArity {
		if err := c.checkArity(in.pos); err != nil {
			return mistake(err)
		}
	}
	return in, nil
}

// arity is how many operands c takes: at least min, at most max (-1: any).
func (c *command) arity() (min, max int) {
	for _, s := range c.args {
		min += s.min
		if s.max < 0 || max < 0 {
			max = -1
		} else {
			max += s.max
		}
	}
	return min, max
}

// checkArity checks the number of operands against c.args.
func (c *command) checkArity(pos []string) error {
	min, max := c.arity()
	if len(pos) < min {
		// Name the first required arguments not given.
		var missing []string
		n := len(pos)
		for _, s := range c.args {
			if s.min == 0 {
				continue
			}
			if n > 0 {
				n--
				continue
			}
			missing = append(missing, strings.TrimSuffix(s.usage(), "..."))
		}
		return usagef("%s: missing %s", c.name, strings.Join(missing, " "))
	}
	if max >= 0 && len(pos) > max {
		return usagef("%s: unexpected argument %q", c.name, pos[max])
	}
	return nil
}

// usageOf is a usage error for in's command after its usage is printed:
// for checks a command makes itself (fork -n 0).
func (a *app) usageOf(in *input, err error) error {
	if !a.jsonErrors {
		in.cmd.writeUsage(a.stderr)
	}
	return err
}

// call runs another command of the table with args, as if typed (shell runs
// exec).
func (a *app) call(name string, args []string) error {
	c, _ := commandNamed(name)
	in, err := a.parseArgs(c, args)
	if err != nil {
		return err
	}
	return c.run(a, in)
}

// groupedCommands lists the table's commands by group, in help order.
func groupedCommands() (groups []string, byGroup map[string][]*command) {
	byGroup = map[string][]*command{}
	for i := range commands {
		c := &commands[i]
		byGroup[c.group] = append(byGroup[c.group], c)
	}
	groups = slices.Clone(groupOrder)
	for g := range byGroup {
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	return groups, byGroup
}

// cliReference is the "## Command reference" section of docs/cli.md,
// generated from the table (TestCLIReferenceUpToDate keeps it so).
func cliReference() string {
	var b strings.Builder
	b.WriteString("\nGenerated from the command table in `cmd/strata/commands.go`\n" +
		"(`go test ./cmd/strata -run TestCLIReferenceUpToDate -update-docs` rewrites this section; the test\n" +
		"fails when it is out of date). `strata help COMMAND` and `strata COMMAND --help` print the same.\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	groups, byGroup := groupedCommands()
	for _, g := range groups {
		if len(byGroup[g]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n", g)
		for _, c := range byGroup[g] {
			fmt.Fprintf(&b, "\n#### strata %s\n\n`%s`\n\n%s.", c.name, c.usageLine(), upperFirst(c.summary))
			if c.help != "" {
				b.WriteString(" " + c.help)
			}
			b.WriteString("\n")
			if len(c.args) > 0 {
				var as []string
				for _, s := range c.args {
					if s.kind != kindNone {
						as = append(as, fmt.Sprintf("`%s` (%s)", s.name, s.kind))
					}
				}
				if len(as) > 0 {
					fmt.Fprintf(&b, "\nOperands: %s.\n", strings.Join(as, ", "))
				}
			}
			if len(c.flags) > 0 {
				b.WriteString("\n| flag | meaning |\n|---|---|\n")
				for _, f := range c.flags {
					head := f.dashed()
					if f.typ != boolFlag {
						v := f.value
						if len(f.values) > 0 {
							v = strings.Join(f.values, "|")
						}
						head += " " + v
					}
					help := f.help
					if d := f.defaultText(); d != "" {
						help += " (default " + d + ")"
					}
					if f.typ == listFlag && !strings.Contains(help, "repeatable") {
						help += "; repeatable"
					}
					fmt.Fprintf(&b, "| `%s` | %s |\n", cell(head), cell(help))
				}
			}
			if len(c.examples) > 0 {
				b.WriteString("\nExamples:\n\n```sh\n")
				for _, e := range c.examples {
					fmt.Fprintf(&b, "strata %s\n", e)
				}
				b.WriteString("```\n")
			}
		}
	}
	return b.String()
}
