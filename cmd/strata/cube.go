package main

import (
	"fmt"

	"github.com/stratahq/strata/engine"
)

func cmdUp(a *app, in *input) error {
	asJSON := in.Bool("json")
	pos := in.pos
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

func cmdStop(a *app, in *input) error {
	kill := in.Bool("kill")
	asJSON := in.Bool("json")
	pos := in.pos
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
