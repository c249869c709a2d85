package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratahq/strata/engine"
)

func cmdCompletion(a *app, in *input) error {
	pos := in.pos
	script, ok := completionScripts[pos[0]]
	if !ok {
		return usagef("completion: %q: want bash, zsh or fish", pos[0])
	}
	_, err := fmt.Fprint(a.stdout, script)
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
// of words, one a line, from the command table (verbs, flags, flag values,
// and operands by their kind). It never creates anything: a missing state
// root has no Worlds.
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
	verbs := []string{"help", "version"}
	for _, c := range commands {
		verbs = append(verbs, c.name)
	}
	if len(words) == 1 {
		add(verbs...)
		return nil
	}
	verb := words[0]
	if verb == "help" {
		if len(words) == 2 {
			add(verbs...)
		}
		return nil
	}
	c, ok := commandNamed(verb)
	if !ok {
		return nil
	}
	// The operands so far, whether they passed a "--", and the flag waiting
	// for its value in cur, if any.
	var ops []string
	var valueOf *flagSpec
	dashed := false
	for _, w := range words[1 : len(words)-1] {
		if valueOf != nil {
			valueOf = nil
			continue
		}
		if w == "--" && !dashed {
			dashed = true
			continue
		}
		if !dashed && strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
			if f := c.flag(strings.TrimLeft(w, "-")); f != nil && f.typ != boolFlag {
				valueOf = f
			}
			continue
		}
		ops = append(ops, w)
	}
	if dashed && c.dashArgs != "" {
		return nil // a command line to run: the shell's own completion
	}
	if valueOf != nil {
		add(valueOf.values...)
		completeKind(add, valueOf.kind, ops)
		return nil
	}
	if strings.HasPrefix(cur, "-") && !dashed {
		for _, f := range c.flags {
			add(f.dashed())
		}
		return nil
	}
	if k, ok := c.argKindAt(len(ops)); ok {
		completeKind(add, k, ops)
	}
	return nil
}

// argKindAt is the kind of the operand at index i, if c takes one there.
func (c *command) argKindAt(i int) (argKind, bool) {
	for _, s := range c.args {
		if s.max < 0 || i < s.max {
			return s.kind, true
		}
		i -= s.max
	}
	return kindNone, false
}

// flag is c's flag of that name.
func (c *command) flag(name string) *flagSpec {
	for i := range c.flags {
		if c.flags[i].name == name {
			return &c.flags[i]
		}
	}
	return nil
}

// completeKind offers the names of kind k; ops[0] is the World a session or
// snapshot belongs to. Paths are left to the shell (an empty answer).
func completeKind(add func(...string), k argKind, ops []string) {
	switch k {
	case kindWorld:
		add(completeWorlds()...)
	case kindSession:
		if len(ops) > 0 {
			add(completeSessions(ops[0])...)
		}
	case kindSnapshot:
		if len(ops) > 0 {
			add(completeSnapshots(ops[0])...)
		}
	case kindShell:
		add("bash", "zsh", "fish")
	}
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
