package main

import (
	"fmt"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/engine/boundary"
)

// cmdAllow: strata allow NAME HOST...
func cmdAllow(a *app, in *input) error {
	asJSON := in.Bool("json")
	name, hosts := in.pos[0], in.pos[1:]
	for _, h := range hosts {
		if _, err := boundary.ParseHostPattern(h); err != nil {
			return usagef("allow: HOST %v", err)
		}
	}
	var out []engine.AllowResult
	for _, h := range hosts {
		res, err := a.eng.AllowEgress(a.ctx, name, h)
		if err != nil {
			return err
		}
		out = append(out, res)
	}
	if *asJSON {
		return a.printJSON(out)
	}
	for _, r := range out {
		switch {
		case r.Already:
			fmt.Fprintf(a.stdout, "%s: %s was already allowed\n", name, r.Entry)
		case r.Live:
			fmt.Fprintf(a.stdout, "%s: allowed %s (the running proxy has it now)\n", name, r.Entry)
		default:
			fmt.Fprintf(a.stdout, "%s: allowed %s (from the next proxied session on)\n", name, r.Entry)
		}
	}
	return nil
}
