package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/overlay/publish"
)

func cmdDoctor(a *app, in *input) error {
	asJSON := in.Bool("json")
	repair := in.Bool("repair")
	dryRun := in.Bool("dry-run")
	if *dryRun && !*repair {
		return usagef("--dry-run goes with --repair")
	}
	if *repair {
		return a.doctorRepair(*dryRun, *asJSON)
	}
	r := a.eng.Doctor(a.ctx)
	if *asJSON {
		return a.printJSON(r)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	root := "no (rootless: fuse-overlayfs or kernel overlay in a user namespace)"
	if r.Root {
		root = "yes"
	}
	fmt.Fprintf(tw, "kernel:\t%s\n", r.Kernel)
	fmt.Fprintf(tw, "root:\t%s\n", root)
	fmt.Fprintf(tw, "user namespaces:\t%s\n", r.UserNamespaces)
	fmt.Fprintf(tw, "/dev/fuse:\t%v\n", r.DevFuse)
	bins := make([]string, 0, len(r.FuseBinaries))
	for b := range r.FuseBinaries {
		bins = append(bins, b)
	}
	sort.Strings(bins)
	for _, b := range bins {
		fmt.Fprintf(tw, "%s:\t%s\n", b, r.FuseBinaries[b])
	}
	fmt.Fprintf(tw, "state root:\t%s (%s free)\n", r.StateRoot, r.StateFree)
	cfg := r.Config
	if cfg == "" {
		cfg = "(none; defaults)"
	}
	fmt.Fprintf(tw, "config:\t%s\n", cfg)
	fmt.Fprintf(tw, "worlds:\t%d\n", r.Worlds)
	fmt.Fprintf(tw, "cube:\t%s %s %s\n", r.Cube.Status, r.Cube.Endpoint, r.Cube.Detail)
	_ = tw.Flush()
	writeCubeDoctor(a.stdout, r.Cube)
	fmt.Fprintln(a.stdout, "\nmount backends (probed on scratch dirs: read, write, delete, recreate a dir):")
	tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, b := range r.Backends {
		state := "ok"
		if !b.OK {
			state = "FAILS: " + b.Reason
		}
		mark := "  "
		if b.Backend == r.Preferred {
			mark = "* "
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\n", mark, b.Backend, b.Duration, state)
	}
	_ = tw.Flush()
	for _, c := range r.CopyOnWrite {
		fmt.Fprintf(a.stdout, "\ncopy-on-write for %s:\n", c.Source)
		for _, line := range strings.Split(c.String(), "\n") {
			fmt.Fprintln(a.stdout, "  "+line)
		}
	}
	fmt.Fprintln(a.stdout, "\nsandbox boundary (what sessions at the default level get here):")
	tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, c := range a.eng.BoundaryChecks() {
		state := "ok"
		if !c.OK {
			state = "MISSING"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, state, c.Detail)
	}
	_ = tw.Flush()
	if len(r.Journals) > 0 {
		fmt.Fprintln(a.stdout, "\nunfinished publications (strata doctor --repair resolves them; --repair --dry-run first shows how):")
		for _, j := range r.Journals {
			printJournal(a, j)
		}
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(a.stdout, "\nproblems:")
		for _, p := range r.Problems {
			fmt.Fprintln(a.stdout, "  -", p)
		}
		return &exitError{code: 1}
	}
	fmt.Fprintln(a.stdout, "\nno problems found")
	return nil
}

// doctorRepair is `strata doctor --repair`: it exits 1 when a publication
// is still unresolved afterwards (refused, or its repair failed).
func (a *app) doctorRepair(dryRun, asJSON bool) error {
	reps, err := a.eng.RepairJournals(a.ctx, dryRun)
	if asJSON {
		if perr := a.printJSON(struct {
			DryRun       bool                    `json:"dry_run"`
			Publications []publish.JournalRepair `json:"publications"`
		}{dryRun, reps}); perr != nil {
			return perr
		}
	} else {
		if len(reps) == 0 {
			fmt.Fprintln(a.stdout, "no unfinished publications")
		}
		for _, j := range reps {
			printJournal(a, j)
		}
	}
	if err != nil {
		if asJSON {
			return &exitError{code: 1}
		}
		return err
	}
	return nil
}

// printJournal explains one unfinished publication: which source, which
// paths, how far it got, what repair did or would do.
func printJournal(a *app, j publish.JournalRepair) {
	root := j.Root
	if root == "" {
		root = "an unknown directory"
	}
	fmt.Fprintf(a.stdout, "  publication %s (%s) to %s\n", j.ID, j.State, root)
	fmt.Fprintf(a.stdout, "    journal: %s\n", j.File)
	if j.Steps > 0 || len(j.Paths) > 0 {
		fmt.Fprintf(a.stdout, "    %s, %d of its renames already landed\n", count(j.Steps, "step", "steps"), j.Landed)
	}
	const maxList = 10
	list := func(label string, items []string) {
		if len(items) == 0 {
			return
		}
		shown := items
		if len(shown) > maxList {
			shown = shown[:maxList]
		}
		fmt.Fprintf(a.stdout, "    %s: %s", label, strings.Join(shown, ", "))
		if len(items) > maxList {
			fmt.Fprintf(a.stdout, " (and %d more)", len(items)-maxList)
		}
		fmt.Fprintln(a.stdout)
	}
	list("paths", j.Paths)
	list("staged files in the source", j.Temps)
	if j.Problem != "" {
		fmt.Fprintf(a.stdout, "    problem: %s\n", j.Problem)
	}
	fmt.Fprintf(a.stdout, "    action: %s\n", repairAction(j.Action))
	list("removed", j.Removed)
	if j.Error != "" {
		fmt.Fprintf(a.stdout, "    error: %s\n", j.Error)
	}
}

// repairAction says an overlay.JournalRepair action in words.
func repairAction(action string) string {
	words := map[string][2]string{
		"rolled_forward":       {"completed (rolled forward: its staged files verified)", "would be completed (rolled forward: its staged files verify)"},
		"rolled_back":          {"rolled back (it never committed; its staged files removed)", "would be rolled back (it never committed; its staged files removed)"},
		"removed_partial_file": {"dropped (a half-written journal; nothing was staged)", "would be dropped (a half-written journal; nothing was staged)"},
		"discarded":            {"discarded (only the files it staged were removed)", "would be discarded (only the files it staged removed)"},
		"refused":              {"refused: not replayed, nothing touched", "would be refused: not replayed, nothing touched"},
		"left":                 {"left as it is", "would be left as it is"},
	}
	dry := strings.HasPrefix(action, "would_")
	w, ok := words[strings.TrimPrefix(action, "would_")]
	switch {
	case !ok:
		return action
	case dry:
		return w[1]
	}
	return w[0]
}

// writeCubeDoctor prints the templates a CubeSandbox lists (and which of
// them strata built for a size) and its nodes' capacity.
func writeCubeDoctor(w io.Writer, d engine.CubeDoctor) {
	if len(d.Templates) > 0 {
		built := map[string]engine.BuiltCubeTemplate{}
		for _, b := range d.Built {
			built[b.ID] = b
		}
		fmt.Fprintln(w, "\ncube templates (GET /templates):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, t := range d.Templates {
			note := t.LastError
			if b, ok := built[t.TemplateID]; ok {
				note = fmt.Sprintf("built by strata from %s for cpu %dm, memory %d MB, disk %d MB", b.Image, b.CPU, b.MemoryMB, b.DiskMB)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.TemplateID, t.Status, t.InstanceType, note)
		}
		_ = tw.Flush()
	}
	if d.Cluster != nil {
		writeCubeCluster(w, *d.Cluster)
	}
}

// writeCubeCluster prints each node's capacity and saturation, or why
// there are none to show.
func writeCubeCluster(w io.Writer, c engine.CubeCluster) {
	fmt.Fprintln(w, "\ncube nodes:")
	if len(c.Nodes) == 0 {
		note := c.Note
		if note == "" {
			note = "the CubeSandbox lists no nodes"
		}
		fmt.Fprintln(w, "  "+note)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tHOST\tHEALTHY\tCPU FREE/TOTAL\tCPU USED\tMEMORY FREE/TOTAL\tMEMORY USED\tSLOTS")
	for _, n := range c.Nodes {
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%d/%d cores\t%.0f%%\t%s/%s\t%.0f%%\t%d\n", n.NodeID, n.HostIP, n.Healthy,
			n.Allocatable.CPUCores, n.Capacity.CPUCores, n.CPUSaturation,
			humanBytes(n.Allocatable.MemoryMB<<20), humanBytes(n.Capacity.MemoryMB<<20), n.MemorySaturation, n.MaxMvmSlots)
	}
	_ = tw.Flush()
	if o := c.Overview; o != nil {
		fmt.Fprintf(w, "  %d of %s healthy; %d/%d cores and %s/%s free\n", o.HealthyNodes, count(o.NodeCount, "node", "nodes"),
			o.AllocatableCPUCores, o.TotalCPUCores, humanBytes(o.AllocatableMemoryMB<<20), humanBytes(o.TotalMemoryMB<<20))
	}
}

// writeTopCube adds the Cube nodes' capacity to top's table when a Cube is
// configured.
func (a *app) writeTopCube(w io.Writer) {
	ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
	defer cancel()
	c, err := a.eng.CubeCluster(ctx)
	if errors.Is(err, engine.ErrCubeNotConfigured) {
		return
	}
	if err != nil {
		c = engine.CubeCluster{Note: "node capacity unavailable: " + err.Error()}
	}
	writeCubeCluster(w, c)
}

// writePlacements says, for each World running in a sandbox of its own,
// where it went and what state it carries (fork -n N of a cube World).
func writePlacements(w io.Writer, ps []engine.Placement) {
	for _, p := range ps {
		if !p.Remote {
			continue
		}
		node := p.Node
		if node == "" {
			node = "unknown (the API does not say)"
		}
		sb := p.Sandbox
		if sb == "" {
			sb = "none yet"
		}
		fmt.Fprintf(w, "  %s: sandbox %s, node %s, from %s; carries %s\n", p.World, sb, node, p.From, p.Carries)
	}
}
