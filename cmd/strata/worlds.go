package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
)

func cmdNew(a *app, in *input) error {
	source := in.String("source")
	backend := in.String("backend")
	mb := in.String("mount-backend")
	iso := in.String("isolation")
	tpl := in.String("template")
	asJSON := in.Bool("json")
	labels := in.List("label")
	pos := in.pos
	cpu, mem, disk := *in.Int("cpu"), *in.Int("memory"), *in.Int("disk")
	o := engine.CreateOptions{
		Name: pos[0], Source: *source, Backend: engine.Runtime(*backend),
		MountBackend: overlay.Backend(*mb), Isolation: engine.Isolation(*iso), Template: *tpl,
		// Create resolves the template from these (engine.ResolveCubeTemplate).
		CPU: cpu, MemoryMB: mem, DiskMB: disk,
		Network:    engine.Network(*in.String("network")),
		BuildState: engine.BuildStateMode(*in.String("build-state")),
	}
	if err := engine.CheckCreateResources(a.eng.Config, o); err != nil {
		return a.usageOf(in, &usageError{msg: err.Error(), err: err})
	}
	lm, err := parseKV(labels, "--label")
	if err != nil {
		return err
	}
	o.Labels = lm
	for _, n := range in.List("pass-env") {
		if n == "" || strings.ContainsAny(n, "= ") {
			return usagef("--pass-env %q: want a variable name (NAME or a NAME_* prefix)", n)
		}
	}
	o.PassEnv = in.List("pass-env")
	for _, m := range in.List("mount") {
		t, err := engine.ParseMount(m)
		if err != nil {
			return usagef("--mount: %w", err)
		}
		o.Trees = append(o.Trees, t)
	}
	// A cube template built for the size asked for takes minutes: say how it goes.
	o.Progress = func(line string) { fmt.Fprintln(a.stderr, line) }
	if handled, err := newWithAgents(a, in, func(name string) error {
		o := o
		o.Name = name
		w, err := a.eng.Create(a.ctx, o)
		if err == nil && !*asJSON {
			fmt.Fprintf(a.stdout, "created world %s over %s\n", w.Name, w.Source)
		}
		return err
	}); handled {
		return err
	}
	w, err := a.eng.Create(a.ctx, o)
	if errors.Is(err, engine.ErrInvalidMount) {
		return &usageError{msg: err.Error(), err: err}
	}
	if err != nil {
		return err
	}
	a.warnTree(w.Name, w.Isolation)
	if *asJSON {
		return a.printJSON(w)
	}
	fmt.Fprintf(a.stdout, "created world %s over %s (%s", w.Name, w.Source, w.Backend)
	if w.MountBackend != "" {
		fmt.Fprintf(a.stdout, ", %s overlay", w.MountBackend)
	}
	if w.State != engine.StateReady {
		fmt.Fprintf(a.stdout, ", %s", w.State)
	}
	fmt.Fprintf(a.stdout, ")\n")
	for _, t := range w.Trees {
		fmt.Fprintf(a.stdout, "  tree %s: %s (%s)\n", t.Name, t.Path, t.Mode)
	}
	fmt.Fprintf(a.stdout, "run a command in it: strata exec %s -- CMD\n", w.Name)
	return nil
}

func cmdLs(a *app, in *input) error {
	all := in.Bool("all")
	asJSON := in.Bool("json")
	var err error
	dir := ""
	if !*all {
		if dir, err = os.Getwd(); err != nil {
			return fmt.Errorf("current directory: %w (use --all)", err)
		}
	}
	// A broken World's source is unknown, so it shows under every source
	// until it is removed: hiding it would hide its work.
	ws, broken, err := a.eng.Listing(dir)
	if err != nil {
		return err
	}
	infos := a.eng.Infos(a.ctx, ws, broken)
	sort.SliceStable(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	if *asJSON {
		return a.printJSON(infos)
	}
	if len(infos) == 0 {
		if *all {
			fmt.Fprintln(a.stdout, "no Worlds yet; create one with: strata new NAME --source DIR")
		} else {
			fmt.Fprintln(a.stdout, "no Worlds over this directory (strata ls --all lists every World); create one with: strata new NAME")
		}
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tCHANGES\tSESSIONS\tBACKEND\tSOURCE")
	for _, wi := range infos {
		be := string(wi.Backend)
		if wi.MountBackend != "" {
			be += "/" + string(wi.MountBackend)
		}
		sess := fmt.Sprintf("%d", wi.Sessions)
		if wi.Running > 0 {
			sess = fmt.Sprintf("%d (%d running)", wi.Sessions, wi.Running)
		}
		ch := fmt.Sprintf("%d", wi.Changes)
		if wi.Error != "" {
			ch = "?"
		}
		if wi.State == engine.StateBroken {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", wi.Name, wi.Status, "?", sess, "?", "error: "+oneLine(wi.Error))
			continue
		}
		src := wi.Source
		if n := len(wi.Trees); n > 0 {
			src += fmt.Sprintf(" (+%s)", count(n, "tree", "trees"))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", wi.Name, wi.Status, ch, sess, be, src)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var total agent.Usage
	agents := 0
	for _, wi := range infos {
		if wi.Agent != nil {
			agents++
			total = total.Add(*wi.AgentUsage)
		}
	}
	if agents > 0 {
		fmt.Fprintf(a.stdout, "agents: %s in total\n", engine.UsageText(total))
	}
	if len(broken) > 0 {
		fmt.Fprintf(a.stderr, "%s: strata show NAME says why; strata rm --purge NAME removes one\n", count(len(broken), "broken World", "broken Worlds"))
	}
	return nil
}

func cmdShow(a *app, in *input) error {
	asJSON := in.Bool("json")
	pos := in.pos
	w, err := a.eng.World(pos[0])
	var broken *engine.BrokenWorldError
	if errors.As(err, &broken) {
		return a.showBroken(broken, *asJSON)
	}
	if err != nil {
		return err
	}
	wi := a.eng.Info(a.ctx, w)
	b, berr := a.eng.Boundary(w.Name, engine.ExecOptions{})
	if *asJSON {
		if b == nil {
			return a.printJSON(wi)
		}
		return a.printJSON(struct {
			engine.WorldInfo
			Boundary *boundary.Boundary `json:"boundary"`
		}{wi, b})
	}
	defer func() {
		switch {
		case berr != nil:
			fmt.Fprintf(a.stdout, "\nboundary: %v\n", berr)
		case b != nil:
			fmt.Fprintf(a.stdout, "\nboundary (a new session, strata exec %s):\n%s", w.Name, indent(b.Describe(), "  "))
		}
	}()
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("name", wi.Name)
	row("id", wi.ID)
	row("status", wi.Status)
	if len(wi.ResidentInits) > 0 {
		pids := make([]string, len(wi.ResidentInits))
		for i, p := range wi.ResidentInits {
			pids[i] = strconv.Itoa(p)
		}
		row("resident init", "pid "+strings.Join(pids, ", ")+" (the World's sessions start in it)")
	}
	row("source", wi.Source)
	for _, t := range wi.Trees {
		v := fmt.Sprintf("%s (%s)", t.Path, t.Mode)
		if n, ok := wi.TreeChanges[t.Name]; ok {
			v += fmt.Sprintf(", %d changes", n)
		}
		row("tree "+t.Name, v)
	}
	row("backend", string(wi.Backend))
	row("mount backend", string(wi.MountBackend))
	row("isolation", string(wi.Isolation))
	row("created", wi.Created.Local().Format(time.DateTime))
	row("base", wi.Base)
	row("changes", fmt.Sprint(wi.Changes))
	row("sessions", fmt.Sprintf("%d (%d running)", wi.Sessions, wi.Running))
	row("mounted", fmt.Sprint(wi.Mounted))
	if len(wi.Labels) > 0 {
		var ls []string
		for k, v := range wi.Labels {
			ls = append(ls, k+"="+v)
		}
		sort.Strings(ls)
		row("labels", strings.Join(ls, " "))
	}
	for _, d := range wi.Details {
		row(d.Label, d.Value)
	}
	if wi.Agent != nil {
		st := string(wi.Agent.Status.State)
		if wi.Agent.Status.Reason != "" {
			st += ": " + wi.Agent.Status.Reason
		}
		row("agent", fmt.Sprintf("%s, %s (since %s)", wi.Agent.Preset, st, wi.Agent.Status.Since.Local().Format(time.TimeOnly)))
		row("turns", fmt.Sprint(len(wi.Agent.Turns)))
		row("usage", engine.UsageText(*wi.AgentUsage))
	}
	row("error", wi.Error)
	return tw.Flush()
}

// showBroken is `strata show` of a broken World: what is wrong and what to
// do. It exits 0: showing what is there succeeded.
func (a *app) showBroken(b *engine.BrokenWorldError, asJSON bool) error {
	wi := a.eng.BrokenInfo(b)
	if asJSON {
		return a.printJSON(struct {
			engine.WorldInfo
			File string `json:"file"`
			Hint string `json:"hint"`
		}{wi, b.Path, brokenHint(b.Name)})
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "name:\t%s\n", wi.Name)
	fmt.Fprintf(tw, "status:\t%s\n", wi.Status)
	fmt.Fprintf(tw, "error:\t%s\n", wi.Error)
	fmt.Fprintf(tw, "file:\t%s\n", b.Path)
	fmt.Fprintf(tw, "sessions:\t%d (%d running)\n", wi.Sessions, wi.Running)
	fmt.Fprintf(tw, "mounted:\t%v\n", wi.Mounted)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "\n"+brokenHint(b.Name))
	return nil
}

func brokenHint(name string) string {
	return fmt.Sprintf("no command can use this World until its world.toml is fixed or the World is removed: "+
		"strata rm %s moves it to the trash, strata rm --purge %s deletes it with its layers, sessions and bases", name, name)
}

// sessionJSON describes a session named by provenance in `strata status --json`.
type sessionJSON struct {
	Command []string `json:"command"`
}

// changeJSON is one entry of `strata status --json` (docs/cli.md).
type changeJSON struct {
	// Tree is the tree Path is in, in a World with several trees.
	Tree string `json:"tree,omitempty"`
	Path string `json:"path"`
	// PathBytes and TargetBytes hold the exact bytes of a name that is not
	// valid UTF-8; Path and Target then hold its quoted form (docs/cli.md).
	PathBytes   []byte `json:"path_bytes,omitempty"`
	Kind        string `json:"kind"`
	Type        string `json:"type"`
	LowerType   string `json:"lower_type,omitempty"`
	Mode        string `json:"mode"`
	Size        int64  `json:"size"`
	Target      string `json:"target,omitempty"`
	TargetBytes []byte `json:"target_bytes,omitempty"`
	Whiteout    bool   `json:"whiteout,omitempty"`
	Opaque      bool   `json:"opaque,omitempty"`
	Ignored     bool   `json:"ignored,omitempty"`
	Note        string `json:"note,omitempty"`
	// A rename (docs/cli.md): the deleted path names where its content
	// went, the added one where it came from and how much of it is the same.
	RenamedTo   string `json:"renamed_to,omitempty"`
	RenamedFrom string `json:"renamed_from,omitempty"`
	Similarity  int    `json:"similarity,omitempty"`
	// Provenance: the sessions that wrote the path, oldest first.
	Provenance []engine.PathWrite `json:"provenance"`
}

func toChangeJSON(c overlay.Change, writes []engine.PathWrite) changeJSON {
	if writes == nil {
		writes = []engine.PathWrite{}
	}
	cj := changeJSON{
		Path: c.Path, Kind: c.Kind.String(), Type: c.Type.String(),
		Mode: fmt.Sprintf("%04o", fsx.UnixMode(c.Mode)), Size: c.Size, Target: c.Target,
		Whiteout: c.Whiteout, Opaque: c.Opaque, Ignored: c.Ignored, Note: c.Note, Provenance: writes,
	}
	if c.LowerType != 0 {
		cj.LowerType = c.LowerType.String()
	}
	cj.Path, cj.PathBytes = overlay.JSONPath(c.Path)
	if c.Target != "" {
		cj.Target, cj.TargetBytes = overlay.JSONPath(c.Target)
	}
	return cj
}

func cmdStatus(a *app, in *input) error {
	asJSON := in.Bool("json")
	ignored := in.Bool("ignored")
	only := in.String("tree")
	pos := in.pos
	w, err := a.eng.World(pos[0])
	if err != nil {
		return err
	}
	if err := checkTreeFlag("status", w, *only); err != nil {
		return err
	}
	// Every overlay tree's changes, the source's first (one for a World
	// with one tree); a path of another tree is written NAME:path.
	trees, err := a.eng.ChangesByTree(a.ctx, w, *ignored, *only)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		if trees, err = a.underPaths(w, trees, pos[1:]); err != nil {
			return err
		}
	}
	// Renames are found once over every tree (a rename stays in its tree);
	// their paths read NAME:path for a tree other than the source.
	var flat []overlay.Change
	for _, tc := range trees {
		for _, c := range tc.Changes {
			c.Path = engine.TreePath(tc.Tree, c.Path)
			flat = append(flat, c)
		}
	}
	renames, err := a.eng.Renames(a.ctx, w.Name, flat)
	if err != nil {
		return err
	}
	rel := func(p string) string { _, r := w.SplitTreePath(p); return r }
	if *asJSON {
		out := struct {
			World   string        `json:"world"`
			Source  string        `json:"source"`
			Dialect string        `json:"dialect"`
			Trees   []engine.Tree `json:"trees,omitempty"`
			Changes []changeJSON  `json:"changes"`
			// Sessions holds each writing session's command once: an agent's
			// script can be long, and repeating it per change bloated the output.
			Sessions map[string]sessionJSON `json:"sessions"`
		}{World: w.Name, Source: w.Source, Dialect: string(trees[0].Dialect), Trees: w.Trees, Changes: []changeJSON{}, Sessions: map[string]sessionJSON{}}
		prov, err := a.eng.Provenance(w.Name)
		if err != nil {
			return err
		}
		for _, tc := range trees {
			for _, c := range tc.Changes {
				var writes []engine.PathWrite
				if tc.Tree == engine.MainTree { // provenance is recorded for the source only
					writes = prov[c.Path]
				}
				for i := range writes {
					out.Sessions[writes[i].Session] = sessionJSON{Command: writes[i].Command}
					writes[i].Command = nil
				}
				cj := toChangeJSON(c, writes)
				if w.HasTrees() {
					cj.Tree = tc.Tree
				}
				if r, ok := renames[engine.TreePath(tc.Tree, c.Path)]; ok {
					if rel(r.To) == c.Path {
						cj.RenamedFrom, _ = overlay.JSONPath(rel(r.From))
						cj.Similarity = r.Similarity
					} else {
						cj.RenamedTo, _ = overlay.JSONPath(rel(r.To))
					}
				}
				out.Changes = append(out.Changes, cj)
			}
		}
		return a.printJSON(out)
	}
	n := 0
	for _, tc := range trees {
		n += len(tc.Changes)
	}
	if n == 0 {
		fmt.Fprintf(a.stdout, "world %s: no changes\n", w.Name)
		return nil
	}
	// One write per 64 KiB, not per line: 100,000 changed paths.
	out := bufio.NewWriterSize(a.stdout, 64<<10)
	for _, tc := range trees {
		qp := func(p string) string { return engine.TreePath(tc.Tree, quotePath(p)) }
		for _, c := range tc.Changes {
			if r, ok := renames[engine.TreePath(tc.Tree, c.Path)]; ok {
				if rel(r.To) == c.Path {
					fmt.Fprintf(out, "R  %s -> %s (%d%%)\n", qp(rel(r.From)), qp(rel(r.To)), r.Similarity)
				}
				continue
			}
			marks := ""
			if c.Whiteout {
				marks += " (whiteout)"
			}
			if c.Opaque && c.Type == overlay.TypeDir && c.Kind != overlay.Deleted {
				marks += " (replaced dir)"
			}
			if c.Ignored {
				marks += " (ignored)"
			}
			p := qp(c.Path)
			if c.Type == overlay.TypeDir {
				p += "/"
			}
			if c.Type == overlay.TypeSymlink && c.Kind != overlay.Deleted {
				p += " -> " + quotePath(c.Target)
			}
			if c.Note != "" {
				marks += " [" + c.Note + "]"
			}
			fmt.Fprintf(out, "%s  %s%s\n", c.Kind.Letter(), p, marks)
		}
	}
	return out.Flush()
}

// quotePath shows a path as strata prints and accepts it (overlay.QuotePath).
func quotePath(p string) string { return overlay.QuotePath(p) }

func cmdRm(a *app, in *input) error {
	force := in.Bool("force")
	purge := in.Bool("purge")
	kill := in.Bool("kill")
	asJSON := in.Bool("json")
	pos := in.pos
	res, err := a.eng.Remove(a.ctx, pos[0], engine.RemoveOptions{Force: *force, Purge: *purge, Kill: *kill})
	if err != nil {
		return err
	}
	if *asJSON {
		return a.printJSON(res)
	}
	if res.Broken != "" {
		fmt.Fprintf(a.stdout, "world %s was broken (%s)\n", res.World, res.Broken)
	}
	if res.Warning != "" {
		printWarnings(a, []string{res.Warning})
	}
	if res.Purged {
		fmt.Fprintf(a.stdout, "removed world %s for good\n", res.World)
	} else if res.Broken != "" {
		fmt.Fprintf(a.stdout, "moved broken world %s to the trash as %s; it is deleted for good in 7 days (strata trash lists it)\n", res.World, res.Trash)
	} else {
		fmt.Fprintf(a.stdout, "moved world %s to the trash for 7 days (strata restore-world %s brings it back)\n", res.World, res.World)
	}
	return nil
}

func cmdTrash(a *app, in *input) error {
	asJSON := in.Bool("json")
	ts, err := a.eng.Trash(a.ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		if ts == nil {
			ts = []engine.TrashEntry{}
		}
		return a.printJSON(ts)
	}
	if len(ts) == 0 {
		fmt.Fprintln(a.stdout, "the trash is empty")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORLD\tREMOVED\tEXPIRES\tID\tSOURCE")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.World, t.Removed.Local().Format(time.DateTime), t.Expires.Local().Format(time.DateTime), t.ID, t.Source)
	}
	return tw.Flush()
}

func cmdRestoreWorld(a *app, in *input) error {
	as := in.String("as")
	pos := in.pos
	w, err := a.eng.RestoreWorld(a.ctx, pos[0], *as)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "restored world %s over %s\n", w.Name, w.Source)
	return nil
}

// warnTree says, on stderr, what tree isolation lets a command do: it is an
// opt-in, never a silent default.
func (a *app) warnTree(world string, iso engine.Isolation) {
	if iso != engine.IsolationTree {
		return
	}
	fmt.Fprintf(a.stderr, "strata: warning: world %s runs at tree isolation, which protects only the source: "+
		"a command can write the rest of the host, read your credentials (~/.ssh, tokens in the environment) "+
		"and use the host's network and daemons; --isolation sandbox (the default) keeps it in\n", world)
}

func indent(s, pre string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(pre + l)
		}
	}
	return b.String()
}

// checkTreeFlag refuses a --tree that names no overlay tree of w (usage).
func checkTreeFlag(verb string, w *engine.World, tree string) error {
	switch {
	case tree == "" || tree == engine.MainTree:
		return nil
	case !w.HasTrees():
		return usagef("%s: --tree %s: world %s has one tree, its source (main)", verb, tree, w.Name)
	}
	if _, err := w.TreeView(tree); err != nil {
		return usagef("%s: --tree %s: %w", verb, tree, err)
	}
	return nil
}

// underPaths keeps the changes at or under the PATH operands of status:
// each read as diff reads it (NAME:path, absolute, or relative to the
// caller's directory, in the tree it lies in), a directory, a tree's root
// (. from inside it) included, standing for everything under it.
func (a *app) underPaths(w *engine.World, trees []engine.TreeChanges, args []string) ([]engine.TreeChanges, error) {
	type at struct{ tree, rel string }
	var want []at
	for _, arg := range args {
		// Resolved as a name inside the operand, so that the operand may
		// be a tree's root; its directory is the operand itself.
		probe := pathArg(arg)
		if strings.HasSuffix(probe, ":") {
			probe += "x" // NAME: is the tree's root
		} else {
			probe = path.Join(probe, "x")
		}
		r, err := a.worldPath(w, probe)
		if err != nil {
			return nil, err
		}
		tree := engine.MainTree
		if w.HasTrees() {
			tree, r, _ = strings.Cut(r, ":")
		}
		want = append(want, at{tree, path.Dir(r)})
	}
	out := make([]engine.TreeChanges, 0, len(trees))
	for _, tc := range trees {
		kept, cs := tc, *tc.ChangeSet
		cs.Changes = nil
		kept.ChangeSet = &cs
		for _, c := range tc.Changes {
			for _, p := range want {
				if p.tree == tc.Tree && (p.rel == "." || c.Path == p.rel || strings.HasPrefix(c.Path, p.rel+"/")) {
					kept.Changes = append(kept.Changes, c)
					break
				}
			}
		}
		out = append(out, kept)
	}
	return out, nil
}
