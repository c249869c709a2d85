package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
)

func cmdSnap(a *app, in *input) error {
	msg := in.String("m")
	asJSON := in.Bool("json")
	pos := in.pos
	s, err := a.eng.Snapshot(a.ctx, pos[0], engine.SnapshotOptions{Message: *msg})
	if err != nil {
		return err
	}
	if *asJSON {
		return a.printJSON(s)
	}
	fmt.Fprintf(a.stdout, "snapshot %s of world %s: %s, %s, %s; %s (%s) in %s\n",
		s.ID, s.World, count(s.Files, "file", "files"), count(s.Dirs, "dir", "dirs"), count(s.Whiteouts, "whiteout", "whiteouts"),
		count(s.NewObjects, "new object", "new objects"), humanSize(s.NewBytes), s.Duration)
	return nil
}

func cmdTimeline(a *app, in *input) error {
	asJSON := in.Bool("json")
	pos := in.pos
	if _, err := a.eng.World(pos[0]); err != nil {
		return err
	}
	tl, err := a.eng.Timeline(pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		if tl.Snapshots == nil {
			tl.Snapshots = []engine.Snapshot{}
		}
		return a.printJSON(tl)
	}
	if tl.ForkedFrom != nil {
		fmt.Fprintf(a.stdout, "forked from %s at %s\n", tl.ForkedFrom.World, tl.ForkedFrom.Snapshot)
	}
	if len(tl.Snapshots) == 0 {
		fmt.Fprintf(a.stdout, "world %s has no snapshots; take one with strata snap %s -m MSG\n", pos[0], pos[0])
		return nil
	}
	for _, line := range engine.TimelineTree(tl) {
		s := line.Snapshot
		head := "  "
		if s.ID == tl.Head {
			head = "* "
		}
		msg := s.Message
		if s.Auto {
			msg = "(auto) " + msg
		}
		fmt.Fprintf(a.stdout, "%s%s%s  %s  %s  %s\n", head, line.Prefix, s.ID, s.Time.Local().Format(time.DateTime), count(s.Files, "file", "files"), oneLine(msg))
	}
	return nil
}

func cmdRollback(a *app, in *input) error {
	kill := in.Bool("kill")
	asJSON := in.Bool("json")
	pos := in.pos
	res, err := a.eng.Rollback(a.ctx, pos[0], pos[1], engine.RollbackOptions{Kill: *kill})
	if err != nil {
		return err
	}
	if *asJSON {
		out := struct {
			*engine.RollbackResult
			Resumed *engine.SessionMeta `json:"resumed,omitempty"`
		}{RollbackResult: res}
		if !*in.Bool("no-resume") {
			if t, ok := a.eng.TurnSnapshot(res.World, res.To); ok && t.Preset != "" && (t.Conversation != "" || t.Turn > 0) {
				meta, err := agentAfterRollback(a, res.World, t)
				if err != nil {
					return err
				}
				out.Resumed = &meta
			}
		}
		return a.printJSON(out)
	}
	fmt.Fprintf(a.stdout, "rolled world %s back to %s in %s; the state before is snapshot %s (strata rollback %s %s undoes this)\n",
		res.World, res.To, res.Duration, res.Saved.ID, res.World, res.Saved.ID)
	switch {
	case res.BuildState == engine.BuildDiscard:
		fmt.Fprintf(a.stdout, "build state discarded (build_state = discard): the next build starts from what the source tree holds\n")
	case res.BuildKept > 0 || res.Touched > 0:
		fmt.Fprintf(a.stdout, "build state kept (%s", count(res.BuildKept, "entry", "entries"))
		if res.BuildDropped > 0 {
			fmt.Fprintf(a.stdout, "; %d dropped: their directories are gone", res.BuildDropped)
		}
		fmt.Fprintf(a.stdout, "); %s given the current time so the next build rebuilds what depends on them\n", count(res.Touched, "rolled-back source file", "rolled-back source files"))
	}
	if *in.Bool("no-resume") {
		return nil
	}
	return resumeAfterRollback(a, res.World, res.To)
}

// maxFork is how many Worlds one fork may create (the engine's own limit).
const maxFork = 100

func cmdFork(a *app, in *input) error {
	snap := in.String("snap")
	n := in.Int("n")
	prefix := in.String("prefix")
	asJSON := in.Bool("json")
	pos, rest := in.pos, in.rest
	if *n < 1 || *n > maxFork {
		return a.usageOf(in, usagef("fork: -n %d: want a number of Worlds from 1 to %d", *n, maxFork))
	}
	if err := checkForkAgents(a, in, pos[0], *snap, *n); err != nil {
		return a.usageOf(in, err)
	}
	ws, err := a.eng.Fork(a.ctx, pos[0], engine.ForkOptions{Snap: *snap, N: *n, Prefix: *prefix})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fanOutAfterFork(a, ws, rest)
	}
	if err := agentsAfterFork(a, in, pos[0], *snap, ws); err != nil {
		return err
	}
	if *asJSON {
		return a.printJSON(ws)
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Name
	}
	fmt.Fprintf(a.stdout, "forked %s into %s (from %s)\n", pos[0], strings.Join(names, ", "), ws[0].Base)
	writePlacements(a.stdout, a.eng.Placements(a.ctx, ws))
	return nil
}

func cmdRestore(a *app, in *input) error {
	pos := in.pos
	paths, err := a.worldPaths(pos[0], pos[2:])
	if err != nil {
		return err
	}
	if err := a.eng.RestorePaths(a.ctx, pos[0], pos[1], paths); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "restored %s in world %s from %s\n", count(len(pos)-2, "path", "paths"), pos[0], pos[1])
	return nil
}

func cmdSnapDiff(a *app, in *input) error {
	asJSON := in.Bool("json")
	pos := in.pos
	b := ""
	if len(pos) == 3 {
		b = pos[2]
	}
	ds, err := a.eng.SnapDiff(a.ctx, pos[0], pos[1], b)
	if err != nil {
		return err
	}
	type deltaJSON struct {
		Path      string `json:"path"`
		PathBytes []byte `json:"path_bytes,omitempty"`
		Change    string `json:"change"`
		exact     string
	}
	out := make([]deltaJSON, 0, len(ds))
	for _, d := range ds {
		dj := deltaJSON{Change: d.Change.String(), exact: d.Path}
		dj.Path, dj.PathBytes = overlay.JSONPath(d.Path)
		out = append(out, dj)
	}
	if *asJSON {
		return a.printJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(a.stdout, "no differences")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, d := range out {
		fmt.Fprintf(tw, "%s\t%s\n", d.Change, quotePath(d.exact))
	}
	return tw.Flush()
}

func cmdGC(a *app, in *input) error {
	asJSON := in.Bool("json")
	verify := in.Bool("verify")
	var err error
	var damaged []engine.DamagedObject
	if *verify {
		if damaged, err = a.eng.VerifyObjects(a.ctx); err != nil {
			return err
		}
	}
	res, err := a.eng.GC(a.ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := a.printJSON(struct {
			*engine.GCResult
			Damaged []engine.DamagedObject `json:"damaged,omitempty"`
		}{res, damaged}); err != nil {
			return err
		}
	} else {
		for _, d := range damaged {
			fmt.Fprintf(a.stdout, "damaged: object %s for %s in snapshot %s: %s\n", d.Object, quotePath(d.Path), d.Snapshot, d.Reason)
		}
		fmt.Fprintf(a.stdout, "removed %s (%s) and %s of purged Worlds; %s kept\n", count(res.Removed, "object", "objects"), humanSize(res.Freed), count(res.RemovedManifests, "manifest", "manifests"), count(res.Manifests, "manifest", "manifests"))
	}
	if len(damaged) > 0 {
		return fmt.Errorf("gc --verify: %s (listed above); snapshots that need them cannot be restored, rolled back to or forked", count(len(damaged), "damaged object", "damaged objects"))
	}
	return nil
}

func humanSize(n int64) string { return fsx.HumanBytes(n) }

// fanOutAfterFork runs a command in every new World (strata fork -n N -- CMD).
func fanOutAfterFork(a *app, ws []*engine.World, argv []string) error {
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Name
	}
	return fanOut(a, names, argv, engine.ExecOptions{})
}
