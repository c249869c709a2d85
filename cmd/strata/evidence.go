package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
)

func cmdBlame(a *app, in *input) error {
	asJSON := in.Bool("json")
	pos := in.pos
	paths, err := a.worldPaths(pos[0], pos[1:2])
	if err != nil {
		return err
	}
	rel, writes, err := a.eng.Blame(pos[0], paths[0])
	if err != nil {
		return err
	}
	if *asJSON {
		if writes == nil {
			writes = []engine.PathWrite{}
		}
		jp, jb := overlay.JSONPath(rel)
		return a.printJSON(struct {
			World     string             `json:"world"`
			Path      string             `json:"path"`
			PathBytes []byte             `json:"path_bytes,omitempty"`
			Writes    []engine.PathWrite `json:"writes"`
		}{pos[0], jp, jb, writes})
	}
	if len(writes) == 0 {
		fmt.Fprintf(a.stdout, "%s: no session of world %s is recorded writing it\n", quotePath(rel), pos[0])
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	// Writes inherited through a fork were made in another World.
	inherited := slices.ContainsFunc(writes, func(w engine.PathWrite) bool { return w.World != "" })
	if inherited {
		fmt.Fprint(tw, "WORLD\t")
	}
	fmt.Fprintln(tw, "SESSION\tOP\tFIRST WRITE\tLAST WRITE\tCOMMAND")
	for _, w := range writes {
		if inherited {
			world := w.World
			if world == "" {
				world = pos[0]
			}
			fmt.Fprintf(tw, "%s\t", world)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.Session, w.Op, w.First.Local().Format("2006-01-02 15:04:05.000"),
			w.Last.Local().Format("15:04:05.000"), oneLine(shellQuote(w.Command)))
	}
	return tw.Flush()
}

func cmdTop(a *app, in *input) error {
	asJSON := in.Bool("json")
	interval := in.Duration("interval")
	count := in.Int("count")
	pos := in.pos
	if *interval <= 0 {
		return usagef("top: --interval must be positive")
	}
	if *count < 0 {
		return usagef("top: --count %d: want 0 (until interrupted) or more", *count)
	}
	names := pos
	if len(names) == 0 {
		ws, err := a.eng.Worlds()
		if err != nil {
			return err
		}
		for _, w := range ws {
			names = append(names, w.Name)
		}
	}
	if *asJSON {
		rs, err := a.eng.SampleResources(a.ctx, names, *interval)
		if err != nil {
			return err
		}
		if rs == nil {
			rs = []engine.Resources{}
		}
		return a.printJSON(rs)
	}
	if !isTerminal(a.stdout) {
		// A pipe or a file gets plain tables, no cursor codes: one by
		// default (CPU use measured over --interval), --count N for N.
		for n := 0; n < max(*count, 1); n++ {
			rs, err := a.eng.SampleResources(a.ctx, names, *interval)
			if a.ctx.Err() != nil {
				return nil // interrupted
			}
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if n > 0 {
				b.WriteString("\n")
			}
			writeTopTable(&b, rs, true)
			a.writeTopCube(&b)
			if _, err := a.stdout.Write(b.Bytes()); err != nil {
				return err
			}
			if a.ctx.Err() != nil {
				return nil
			}
		}
		return nil
	}
	prev := map[string]engine.Resources{}
	// Redraw in place: home the cursor, overwrite each line and clear its
	// rest, then clear below; no full-screen clear, so nothing flickers.
	fmt.Fprint(a.stdout, "\x1b[?25l\x1b[H\x1b[2J")
	defer fmt.Fprint(a.stdout, "\x1b[?25h")
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		var rows []engine.Resources
		for _, name := range names {
			r, err := a.eng.Resources(a.ctx, name)
			if err != nil {
				continue // removed meanwhile
			}
			if p, ok := prev[name]; ok {
				r.SetCPUPercent(p)
			}
			prev[name] = r
			rows = append(rows, r)
		}
		var b bytes.Buffer
		b.WriteString("\x1b[H")
		fmt.Fprintf(&b, "strata top  %s  (every %s, ctrl-c quits)\x1b[K\n\x1b[K\n", time.Now().Format("15:04:05"), *interval)
		var tb bytes.Buffer
		writeTopTable(&tb, rows, n > 0)
		a.writeTopCube(&tb)
		for _, line := range strings.SplitAfter(tb.String(), "\n") {
			if line == "" {
				continue
			}
			b.WriteString(strings.TrimSuffix(line, "\n") + "\x1b[K\n")
		}
		b.WriteString("\x1b[J")
		if _, err := a.stdout.Write(b.Bytes()); err != nil {
			return err
		}
		if *count > 0 && n+1 >= *count {
			return nil
		}
		select {
		case <-a.ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func writeTopTable(w *bytes.Buffer, rows []engine.Resources, havePercent bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORLD\tSESSIONS\tPROCS\tCPU%\tCPU TIME\tMEMORY\tUPPER\tFILES\tACCT\t")
	for _, r := range rows {
		pct := "-"
		if havePercent {
			pct = fmt.Sprintf("%.1f", r.CPUPercent)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t\n", r.World, r.Running, r.Processes, pct,
			time.Duration(r.CPUSeconds*float64(time.Second)).Round(10*time.Millisecond), humanBytes(r.MemoryBytes),
			humanBytes(r.UpperBytes), r.UpperFiles, r.Accounting)
	}
	_ = tw.Flush()
}

// oneLine keeps a command on its table row: a script's newlines, tabs and
// carriage returns are written as \n, \t and \r.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
}

func humanBytes(n int64) string { return fsx.HumanBytes(n) }

func cmdCompare(a *app, in *input) error {
	asJSON := in.Bool("json")
	pos := in.pos
	cmp, err := a.eng.Compare(a.ctx, pos)
	if err != nil {
		return err
	}
	if *asJSON {
		return a.printJSON(cmp)
	}
	if len(cmp.Paths) == 0 {
		fmt.Fprintf(a.stdout, "no World changed anything: %s all read the source as it is\n", strings.Join(cmp.Worlds, ", "))
		return nil
	}
	for _, p := range cmp.Paths {
		mark := "≠"
		if p.Agree {
			mark = "="
		}
		fmt.Fprintf(a.stdout, "%s %s  (changed by %s)\n", mark, quotePath(p.Path), strings.Join(p.ChangedBy, ", "))
		if p.Agree {
			continue
		}
		for _, v := range p.Versions {
			desc := v.Type
			switch v.Type {
			case "file":
				desc = fmt.Sprintf("file %s, %d bytes, %.12s", v.Mode, v.Size, v.Hash)
			case "symlink":
				desc = "symlink -> " + v.Target
			}
			if v.Source {
				desc += " (the source's)"
			}
			fmt.Fprintf(a.stdout, "    %s: %s\n", strings.Join(v.Worlds, ", "), desc)
		}
	}
	fmt.Fprintf(a.stdout, "\n%s: %d agree, %d disagree; every other path is unchanged in all Worlds (agree)\n",
		count(len(cmp.Paths), "changed path", "changed paths"), cmp.Agreed, cmp.Disagreed)
	if cmp.Disagreed > 0 {
		fmt.Fprintf(a.stdout, "adopt one World's version of a path: strata apply WORLD PATH\n")
	}
	return nil
}
