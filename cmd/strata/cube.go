package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stratahq/strata/engine"
)

func init() {
	commands = append(commands,
		command{name: "up", args: "NAME [--json]", summary: "bring a cube World up: create its planned sandbox, or resume a stopped one", run: cmdUp},
		command{name: "stop", args: "NAME [--kill] [--json]", summary: "pause a cube World's sandbox (strata up resumes it)", run: cmdStop},
	)
	for i := range commands {
		if commands[i].name == "new" {
			next := commands[i].run
			commands[i].args += " [--template T | --cpu MILLI --memory MB --disk MB]"
			commands[i].run = func(a *app, args []string) error { return newWithResources(a, args, next) }
		}
	}
}

// newWithResources gives `strata new` the cube resource flags: --cpu,
// --memory and --disk pick the smallest configured template that fits, before
// anything is created or sent (a request no template fits fails, naming the
// closest ones), and the choice reaches `new` as --template.
func newWithResources(a *app, args []string, next func(*app, []string) error) error {
	var res engine.CubeResources
	var rest []string
	explicit := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		var dst *int
		switch {
		case !strings.HasPrefix(arg, "-"):
		case name == "cpu":
			dst = &res.CPU
		case name == "memory":
			dst = &res.MemoryMB
		case name == "disk":
			dst = &res.DiskMB
		case name == "template":
			explicit = true
		}
		if dst == nil {
			rest = append(rest, arg)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return usagef("new: --%s needs a value", name)
			}
			i++
			value = args[i]
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return usagef("new: --%s %q: want a whole number", name, value)
		}
		*dst = n
	}
	if res == (engine.CubeResources{}) {
		return next(a, rest)
	}
	if explicit {
		return usagef("new: pass --template or --cpu/--memory/--disk, not both")
	}
	tpl, err := engine.ResolveCubeTemplate(a.eng.Config.Cube, "", res)
	if err != nil {
		return err
	}
	// Before any "--": after it, "--template" would be an operand.
	i := slices.Index(rest, "--")
	if i < 0 {
		i = len(rest)
	}
	return next(a, slices.Insert(rest, i, "--template", tpl))
}

func cmdUp(a *app, args []string) error {
	fs := a.flags("up", "NAME [--json]")
	asJSON := fs.Bool("json", false, "print the World as JSON")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usagef("%v", err)
	}
	if err := want(fs, pos, 1, 1, "NAME"); err != nil {
		return err
	}
	w, err := a.eng.Up(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return a.printJSON(w)
	}
	fmt.Fprintf(a.stdout, "world %s is up: sandbox %s, %s overlay at %s\n", w.Name, w.Cube.SandboxID, w.Cube.Driver, w.Source)
	return nil
}

func cmdStop(a *app, args []string) error {
	fs := a.flags("stop", "NAME [--kill] [--json]")
	kill := fs.Bool("kill", false, "kill running sessions first")
	asJSON := fs.Bool("json", false, "print the World as JSON")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usagef("%v", err)
	}
	if err := want(fs, pos, 1, 1, "NAME"); err != nil {
		return err
	}
	w, err := a.eng.Stop(a.ctx, pos[0], engine.StopOptions{Kill: *kill})
	if err != nil {
		return err
	}
	if *asJSON {
		return a.printJSON(w)
	}
	fmt.Fprintf(a.stdout, "world %s stopped (sandbox paused; strata up %s resumes it)\n", w.Name, w.Name)
	return nil
}
