package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/stratahq/strata/engine"
)

func cmdEvents(a *app, in *input) error {
	follow := in.Bool("f")
	asJSON := in.Bool("json")
	world := in.String("world")
	print := func(ev engine.Event) error {
		if *world != "" && ev.World != *world {
			return nil
		}
		if *asJSON {
			return a.printJSONLine(ev)
		}
		var details []string
		for k, v := range ev.Detail {
			details = append(details, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(details)
		_, err := fmt.Fprintf(a.stdout, "%s  %-16s %-12s %s %s\n", ev.Time.Local().Format("2006-01-02 15:04:05.000"), ev.Type, ev.World, ev.Session, strings.Join(details, " "))
		return err
	}
	evs, off, err := a.eng.ReadActivity(0)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := print(ev); err != nil {
			return err
		}
	}
	if !*follow {
		return nil
	}
	// Follow the activity log itself (every strata process appends to it),
	// waking on fsnotify through Subscribe and falling back to a slow poll.
	sub, err := a.eng.Subscribe(a.ctx)
	if err != nil {
		return err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return nil
		case _, ok := <-sub:
			if !ok {
				return nil
			}
		case <-tick.C:
		}
		evs, next, err := a.eng.ReadActivity(off)
		if err != nil {
			return err
		}
		off = next
		for _, ev := range evs {
			if err := print(ev); err != nil {
				return err
			}
		}
	}
}
