package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/overlay"
)

func cmdDiff(a *app, in *input) error {
	stat := in.Bool("stat")
	asJSON := in.Bool("json")
	against := in.String("against")
	againstWorld := in.String("against-world")
	ctxLines := in.Int("U")
	force := in.Bool("binary")
	pos := in.pos
	if *ctxLines < 0 {
		return usagef("diff: -U %d: want a number of context lines, 0 or more", *ctxLines)
	}
	c := *ctxLines
	if c == 0 {
		c = -1 // diffview: negative means no context
	}
	if tree := *in.String("tree"); tree != "" {
		w, err := a.eng.World(pos[0])
		if err != nil {
			return err
		}
		if err := checkTreeFlag("diff", w, tree); err != nil {
			return err
		}
	}
	paths, err := a.worldPaths(pos[0], pos[1:])
	if err != nil {
		return err
	}
	fcs, err := a.eng.Diff(a.ctx, pos[0], engine.DiffOptions{Paths: paths, Against: *against, AgainstWorld: *againstWorld, Context: c, Force: *force, Tree: *in.String("tree")})
	if err != nil {
		return err
	}
	if *asJSON {
		type hunkJSON struct {
			Number int    `json:"number"`
			Header string `json:"header"`
			// PickNumbers: what `strata apply --hunks` calls this hunk
			// (differs from number with -U other than 3).
			PickNumbers []int    `json:"pick_numbers,omitempty"`
			Lines       []string `json:"lines"`
		}
		// A side's mode is an octal string like status's ("100644", as git
		// writes it), not the number.
		type sideJSON struct {
			Type   string `json:"type,omitempty"`
			Mode   string `json:"mode,omitempty"`
			Target string `json:"target,omitempty"`
		}
		side := func(t string, mode uint32, target string) sideJSON {
			s := sideJSON{Type: t, Target: target}
			if mode != 0 {
				s.Mode = fmt.Sprintf("%06o", mode)
			}
			return s
		}
		type fileJSON struct {
			engine.FileChange
			Old      sideJSON   `json:"old"`
			New      sideJSON   `json:"new"`
			HunkList []hunkJSON `json:"hunk_list"`
		}
		out := make([]fileJSON, 0, len(fcs))
		for _, fc := range fcs {
			fj := fileJSON{FileChange: fc, HunkList: []hunkJSON{}}
			fj.Old = side(fc.Old.Type, fc.Old.Mode, fc.Old.Target)
			fj.New = side(fc.New.Type, fc.New.Mode, fc.New.Target)
			fj.Path, fj.PathBytes = overlay.JSONPath(fc.Path)
			for i, h := range fc.Diff.Hunks {
				hj := hunkJSON{Number: i + 1, Header: h.Header}
				if i < len(fc.HunkNumbers) {
					hj.PickNumbers = fc.HunkNumbers[i]
				}
				for _, l := range h.Lines {
					hj.Lines = append(hj.Lines, opPrefix(l.Op)+l.Text)
				}
				fj.HunkList = append(fj.HunkList, hj)
			}
			out = append(out, fj)
		}
		return a.printJSON(out)
	}
	if *stat {
		// tabwriter writes each cell on its own: one write per 64 KiB instead.
		out := bufio.NewWriterSize(a.stdout, 64<<10)
		tw := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
		var add, del int
		for _, fc := range fcs {
			what := fmt.Sprintf("+%d -%d (%s)", fc.Added, fc.Removed, count(fc.Hunks, "hunk", "hunks"))
			if fc.Binary {
				what = "binary"
			} else if fc.TooLarge {
				what = "too large to diff"
			}
			fmt.Fprintf(tw, " %s\t| %s\n", engine.TreePath(fc.Tree, quotePath(fc.Path)), what)
			add += fc.Added
			del += fc.Removed
		}
		_ = tw.Flush()
		fmt.Fprintf(out, " %s changed, %s, %s\n", count(len(fcs), "file", "files"), count(add, "insertion(+)", "insertions(+)"), count(del, "deletion(-)", "deletions(-)"))
		return out.Flush()
	}
	for _, fc := range fcs {
		switch {
		case fc.BaseUnknown != "":
			fmt.Fprintf(a.stderr, "strata: %s: its base could not be recorded before the source changed (%s); the diff shows it as new, and apply will ask for a merge by hand\n", quotePath(fc.Path), fc.BaseUnknown)
		case fc.LateBase:
			fmt.Fprintf(a.stderr, "strata: %s: the source changed after the World copied it up; this diff's base may include that edit\n", quotePath(fc.Path))
		}
		if fc.Drift && *againstWorld == "" {
			if *against == "source" {
				fmt.Fprintf(a.stderr, "strata: %s: the source changed since the World's base: this is the World against the source now; apply merges the diff against the base (strata diff %s %s)\n", quotePath(fc.Path), pos[0], quotePath(fc.Path))
			} else {
				fmt.Fprintf(a.stderr, "strata: %s: the source changed since the World's base: apply will merge (strata diff %s --against source %s shows the World against the source now)\n", quotePath(fc.Path), pos[0], quotePath(fc.Path))
			}
		}
	}
	if *against != "base" || *againstWorld != "" {
		_, err = fmt.Fprint(a.stdout, engine.Patch(fcs))
		return err
	}
	// A deleted file whose content reappears under another name is one
	// rename entry, as git shows it.
	renamedTo, renamedFrom := map[int]engine.RenamePair{}, map[int]bool{}
	for _, r := range engine.FindRenames(fcs) {
		renamedTo[r.To], renamedFrom[r.From] = r, true
	}
	var b strings.Builder
	for i := range fcs {
		switch r, ok := renamedTo[i]; {
		case ok:
			b.WriteString(renamePatch(fcs, r, c))
		case !renamedFrom[i]:
			b.WriteString(engine.Patch(fcs[i : i+1]))
		}
	}
	_, err = fmt.Fprint(a.stdout, b.String())
	return err
}

func opPrefix(op diffview.Op) string {
	switch op {
	case diffview.Insert:
		return "+"
	case diffview.Delete:
		return "-"
	}
	return " "
}

func cmdApply(a *app, in *input) error {
	dry := in.Bool("dry-run")
	asJSON := in.Bool("json")
	drop := in.Bool("drop-applied")
	branch := in.String("to-branch")
	msg := in.String("m")
	allowSetuid := in.Bool("allow-setuid")
	hunks := in.List("hunks")
	expectBase := in.List("expect-base")
	expectWorld := in.List("expect-world")
	pos := in.pos
	// Every --hunks value is checked before anything else is looked at.
	type hunkPick struct {
		path string
		nums []int
	}
	var hunkPicks []hunkPick
	for _, h := range hunks {
		p, list, ok := strings.Cut(h, "=")
		if !ok || p == "" || list == "" {
			return usagef("apply: --hunks %q: want PATH=1,3", h)
		}
		nums, err := diffview.ParseHunkNumbers(list)
		if err != nil {
			return usagef("apply: --hunks %q: %w", h, err)
		}
		hunkPicks = append(hunkPicks, hunkPick{p, nums})
	}
	w, err := a.eng.World(pos[0])
	if err != nil {
		return err
	}
	if err := a.eng.CheckSource(w); err != nil {
		return err
	}
	var picks []engine.Pick
	operands := pos[1:]
	if tree := *in.String("tree"); tree != "" && (w.HasTrees() || tree != engine.MainTree) {
		// --tree NAME: plain paths are in that tree; none = all of it.
		if err := checkTreeFlag("apply", w, tree); err != nil {
			return err
		}
		operands = treeOperands(w, tree, operands)
		for i := range hunkPicks {
			hunkPicks[i].path = treeOperands(w, tree, []string{hunkPicks[i].path})[0]
		}
		if len(operands) == 0 && len(hunkPicks) == 0 {
			picks = append(picks, engine.Pick{Path: tree + ":."})
		}
	}
	hunkPaths := map[string]bool{}
	for _, h := range hunkPicks {
		rel, err := a.worldPath(w, h.path)
		if err != nil {
			return err
		}
		picks = append(picks, engine.Pick{Path: rel, Hunks: h.nums})
		hunkPaths[rel] = true
	}
	for _, p := range operands {
		rel, err := a.worldPath(w, p)
		if err != nil {
			return err
		}
		if !hunkPaths[rel] {
			picks = append(picks, engine.Pick{Path: rel})
		}
	}
	if err := a.expectVersions(w, picks, expectBase, "--expect-base", func(p *engine.Pick, h string) { p.BaseHash = h }); err != nil {
		return err
	}
	if err := a.expectVersions(w, picks, expectWorld, "--expect-world", func(p *engine.Pick, h string) { p.WorldHash = h }); err != nil {
		return err
	}
	res, err := a.eng.Apply(a.ctx, w.Name, engine.ApplyOptions{Picks: picks, DryRun: *dry, DropApplied: *drop, ToBranch: *branch, Message: *msg, AllowSetuid: *allowSetuid})
	var warnings []string
	if res != nil {
		warnings = res.Warnings
	}
	var ce *engine.ConflictError
	if errors.As(err, &ce) {
		if *asJSON {
			_ = a.printJSON(struct {
				World     string            `json:"world"`
				Applied   bool              `json:"applied"`
				Conflicts []engine.Conflict `json:"conflicts"`
				Warnings  []string          `json:"warnings,omitempty"`
			}{w.Name, false, ce.Conflicts, warnings})
			return &exitError{code: 1}
		}
		printWarnings(a, warnings)
		fmt.Fprintf(a.stderr, "strata: apply %s: %s; nothing was written:\n", w.Name, count(len(ce.Conflicts), "conflict", "conflicts"))
		for _, c := range ce.Conflicts {
			fmt.Fprintf(a.stderr, "  %s: %s\n", engine.TreePath(c.Tree, quotePath(c.Path)), c.Reason)
			for _, r := range c.Regions {
				fmt.Fprintf(a.stderr, "    %s\n", conflictWhere(r)) // apply_regions.go
			}
		}
		return &exitError{code: 1}
	}
	var stale *engine.StalePickError
	if errors.As(err, &stale) && *asJSON {
		type staleJSON struct {
			Path string `json:"path"`
			Side string `json:"side"` // "world" or "base": which version moved
			Want string `json:"want"`
			Got  string `json:"got"`
		}
		_ = a.printJSON(struct {
			World     string    `json:"world"`
			Applied   bool      `json:"applied"`
			StalePick staleJSON `json:"stale_pick"`
		}{w.Name, false, staleJSON{stale.Path, stale.Side, stale.Want, stale.Got}})
		return &exitError{code: 1, err: err}
	}
	if err != nil {
		return err
	}
	printWarnings(a, warnings) // on stderr with --json too: a script's log shows them
	if *asJSON {
		return a.printJSON(res)
	}
	verb := "applied"
	if res.DryRun {
		verb = "would apply"
	}
	for _, p := range res.Paths {
		h := ""
		if len(p.Hunks) > 0 {
			h = fmt.Sprintf(" (hunks %v)", p.Hunks)
		}
		fmt.Fprintf(a.stdout, "%-8s %s%s\n", p.Action, engine.TreePath(p.Tree, quotePath(p.Path)), h)
	}
	switch {
	case len(res.Trees) > 0:
		// A World with several trees: one publication per tree.
		for _, t := range res.Trees {
			fmt.Fprintf(a.stdout, "%s %s of tree %s to %s\n", verb, count(t.Paths, "path", "paths"), t.Tree, t.Source)
		}
		fmt.Fprintf(a.stdout, "%s %s from world %s in %s\n", verb, count(len(res.Paths), "path", "paths"), w.Name, res.Duration)
	case res.Branch != "":
		fmt.Fprintf(a.stdout, "%s %s from world %s as commit %s on branch %s\n", verb, count(len(res.Paths), "path", "paths"), w.Name, short(res.Commit), res.Branch)
	default:
		fmt.Fprintf(a.stdout, "%s %s from world %s to %s in %s\n", verb, count(len(res.Paths), "path", "paths"), w.Name, res.Source, res.Duration)
	}
	if len(res.Dropped) > 0 {
		fmt.Fprintf(a.stdout, "dropped %s from the World\n", count(len(res.Dropped), "applied path", "applied paths"))
	}
	return nil
}

// expectVersions binds picked paths to the hashes of the versions they were
// reviewed on (PATH=HASH, as strata diff --json reports them).
func (a *app) expectVersions(w *engine.World, picks []engine.Pick, flags []string, name string, set func(*engine.Pick, string)) error {
	for _, f := range flags {
		p, h, ok := strings.Cut(f, "=")
		if !ok || p == "" || !validHash(h) {
			return usagef("%s %q: want PATH=HASH, a sha256 in hex (or %q) as strata diff --json prints it", name, f, engine.HashAbsent)
		}
		rel, err := a.worldPath(w, p)
		if err != nil {
			return err
		}
		found := false
		for i := range picks {
			if picks[i].Path == rel {
				set(&picks[i], strings.ToLower(h))
				found = true
			}
		}
		if !found {
			return usagef("%s %s: the path is not picked; name it (or --hunks %s=N) too", name, p, p)
		}
	}
	return nil
}

func validHash(h string) bool {
	if h == engine.HashAbsent {
		return true
	}
	if len(h) != 64 {
		return false
	}
	for _, c := range strings.ToLower(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// printWarnings tells the person, on stderr, what went wrong elsewhere
// without stopping the command.
func printWarnings(a *app, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(a.stderr, "strata: warning: %s\n", w)
	}
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// pathArg reads a PATH argument: the quoted form strata prints for odd
// names ("a\xff", see overlay.QuotePath) is unquoted, anything else is
// the path itself, byte for byte.
func pathArg(p string) string {
	if _, err := os.Lstat(p); err == nil {
		return p // a real name that merely looks quoted
	}
	if u, ok := overlay.UnquotePath(p); ok {
		return u
	}
	return p
}

// worldPath maps a PATH argument to the World path it names, by the
// engine's policy (engine.ResolvePath): relative to the caller's directory
// when it lies in the source or the World's merged view, else to the source
// root. A path outside the World is a usage error.
func (a *app) worldPath(w *engine.World, p string) (string, error) {
	rel, err := engine.ResolveTreePath(a.eng.Paths, w, callerDir(), pathArg(p))
	if err != nil {
		return "", &usageError{msg: err.Error(), err: err}
	}
	return rel, nil
}

// worldPaths maps PATH arguments of World name (see worldPath).
func (a *app) worldPaths(name string, args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	w, err := a.eng.World(name)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(args))
	for _, p := range args {
		rel, err := a.worldPath(w, p)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

// callerDir is the working directory, symlinks resolved ("" if unknown).
func callerDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	if real, err := realPath(wd); err == nil {
		return real
	}
	return wd
}

func cmdHistory(a *app, in *input) error {
	asJSON := in.Bool("json")
	world := in.String("world")
	hs, err := a.eng.History()
	if err != nil {
		return err
	}
	var out []engine.HistoryEntry
	for _, h := range hs {
		if *world == "" || h.World == *world {
			out = append(out, h)
		}
	}
	if *asJSON {
		if out == nil {
			out = []engine.HistoryEntry{}
		}
		return a.printJSON(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(a.stdout, "nothing was applied yet")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWORLD\tPATHS\tTO")
	for _, h := range out {
		to := h.Source
		if h.Branch != "" {
			to = "branch " + h.Branch + " " + short(h.Commit)
		}
		var ps []string
		for _, p := range h.Paths {
			ps = append(ps, p.Path)
		}
		list := strings.Join(ps, ", ")
		if len(list) > 60 {
			list = list[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%d: %s\t%s\n", h.Time.Local().Format(time.DateTime), h.World, len(h.Paths), list, to)
	}
	return tw.Flush()
}

// treeOperands puts plain relative PATHs in tree (apply --tree): NAME:path
// and absolute paths keep their own tree.
func treeOperands(w *engine.World, tree string, args []string) []string {
	out := make([]string, len(args))
	for i, p := range args {
		if t, rel := w.SplitTreePath(p); rel == p && t == engine.MainTree && !filepath.IsAbs(p) {
			p = tree + ":" + p
		}
		out[i] = p
	}
	return out
}
