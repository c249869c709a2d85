package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratahq/strata/engine"
)

func init() {
	commands = append(commands,
		command{name: "completion", args: "bash|zsh|fish", summary: "print a shell completion script (verbs, flags, Worlds, sessions, snapshots)", run: cmdCompletion, noEng: true},
	)
}

func cmdCompletion(a *app, args []string) error {
	fs := a.flags("completion", "bash|zsh|fish")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usagef("%v", err)
	}
	if err := want(fs, pos, 1, 1, "the shell (bash, zsh or fish)"); err != nil {
		return err
	}
	script, ok := completionScripts[pos[0]]
	if !ok {
		return usagef("completion: %q: want bash, zsh or fish", pos[0])
	}
	_, err = fmt.Fprint(a.stdout, script)
	return err
}

// The scripts ask `strata __complete WORD...` (the words after "strata", the
// last being the one completed, maybe empty) and offer its lines.
var completionScripts = map[string]string{
	"bash": `# strata completion for bash: source <(strata completion bash)
_strata() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local IFS=$'\n'
	COMPREPLY=($(strata __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
	if [[ ${#COMPREPLY[@]} -eq 0 && $cur != -* ]]; then
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o filenames -F _strata strata
`,
	"zsh": `#compdef strata
# strata completion for zsh: source <(strata completion zsh), or save as _strata in $fpath
_strata() {
	local -a items
	items=("${(@f)$(strata __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	items=(${items:#})
	if (( ${#items} )); then
		compadd -Q -a items
	else
		_files
	fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
	_strata "$@"
else
	compdef _strata strata
fi
`,
	"fish": `# strata completion for fish: strata completion fish | source
function __strata_complete
	set -l words (commandline -opc)
	set -e words[1]
	strata __complete $words (commandline -ct) 2>/dev/null
end
complete -c strata -f -a '(__strata_complete)'
`,
}

// cmdComplete answers the completion scripts: the candidates for the last
// of words, one a line. It never creates anything: a missing state root has
// no Worlds.
func cmdComplete(a *app, words []string) error {
	if len(words) == 0 {
		words = []string{""}
	}
	cur := words[len(words)-1]
	var out []string
	add := func(cands ...string) {
		for _, c := range cands {
			if strings.HasPrefix(c, cur) {
				out = append(out, c)
			}
		}
	}
	defer func() {
		for _, c := range out {
			fmt.Fprintln(a.stdout, c)
		}
	}()
	verbs := []string{"help", "version", "tui"}
	for _, c := range commands {
		verbs = append(verbs, c.name)
	}
	if len(words) == 1 {
		add(verbs...)
		return nil
	}
	verb := words[0]
	c, ok := commandNamed(verb)
	if !ok {
		return nil
	}
	fs := flagSetOf(a.ctx, c)
	if fs == nil {
		return nil
	}
	if strings.HasPrefix(cur, "-") {
		fs.VisitAll(func(f *flag.Flag) {
			if len(f.Name) == 1 {
				add("-" + f.Name)
			} else {
				add("--" + f.Name)
			}
		})
		return nil
	}
	// The operands so far, and whether the word before cur is a flag
	// waiting for its value.
	var ops []string
	valueOf := ""
	for _, w := range words[1 : len(words)-1] {
		if valueOf != "" {
			valueOf = ""
			continue
		}
		if w == "--" {
			break
		}
		if strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
			if f := fs.Lookup(strings.TrimLeft(w, "-")); f != nil && !isBoolFlag(f) {
				valueOf = f.Name
			}
			continue
		}
		ops = append(ops, w)
	}
	worlds := func() []string { return completeWorlds() }
	switch valueOf {
	case "world", "against-world", "as":
		add(worlds()...)
		return nil
	case "snap":
		if len(ops) > 0 {
			add(completeSnapshots(ops[0])...)
		}
		return nil
	case "isolation":
		add(engine.IsolationNames()...)
		return nil
	case "backend":
		add(engine.RuntimeNames()...)
		return nil
	case "mount-backend":
		add("auto", "kernel", "fuse-overlayfs", "unionfs-fuse")
		return nil
	case "against":
		add("base", "source")
		return nil
	case "":
	default:
		return nil
	}
	switch verb {
	case "help":
		if len(ops) == 0 {
			add(verbs...)
		}
	case "completion":
		if len(ops) == 0 {
			add("bash", "zsh", "fish")
		}
	case "ls", "trash", "doctor", "events", "history", "gc", "tui", "version":
	case "top", "compare":
		add(worlds()...)
	default:
		switch {
		case len(ops) == 0:
			add(worlds()...)
		case len(ops) == 1 && slices.Contains([]string{"logs", "attach", "kill"}, verb):
			add(completeSessions(ops[0])...)
		case len(ops) == 1 && slices.Contains([]string{"rollback", "restore", "snapdiff"}, verb),
			len(ops) == 2 && verb == "snapdiff":
			add(completeSnapshots(ops[0])...)
		}
	}
	return nil
}

func commandNamed(name string) (command, bool) {
	if name == "tui" {
		return command{name: "tui", run: runTUI}, true
	}
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// completeWorlds lists the World names of the state root by reading its
// directory: completing must not open (and so create or recover) it.
func completeWorlds() []string {
	root, err := engine.DefaultStateRoot()
	if err != nil {
		return nil
	}
	ents, _ := os.ReadDir(filepath.Join(root, "worlds"))
	var names []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

func completeSessions(world string) []string {
	root, err := engine.DefaultStateRoot()
	if err != nil || engine.ValidateName(world) != nil {
		return nil
	}
	ss, _ := engine.ListSessions(filepath.Join(root, "worlds", world))
	var ids []string
	for i := len(ss) - 1; i >= 0; i-- { // newest first
		ids = append(ids, ss[i].ID)
	}
	return ids
}

func completeSnapshots(world string) []string {
	root, err := engine.DefaultStateRoot()
	if err != nil || engine.ValidateName(world) != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(root, "worlds", world)); err != nil {
		return nil
	}
	eng := &engine.Engine{Paths: engine.Paths{Root: root}}
	tl, err := eng.Timeline(world)
	if err != nil {
		return nil
	}
	var ids []string
	for i := len(tl.Snapshots) - 1; i >= 0; i-- {
		ids = append(ids, tl.Snapshots[i].ID)
	}
	return ids
}
