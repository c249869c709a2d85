package main

import (
	"fmt"
	"sort"
	"text/tabwriter"
)

func cmdDoctor(a *app, args []string) error {
	fs := a.flags("doctor", "[--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usagef("%v", err)
	}
	if err := want(fs, pos, 0, 0, ""); err != nil {
		return err
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
	if len(r.Journals) > 0 {
		fmt.Fprintln(a.stdout, "\nunfinished publications:")
		for _, j := range r.Journals {
			fmt.Fprintf(a.stdout, "  %s %s %s (%d steps) %s\n", j.ID, j.State, j.Root, j.Steps, j.Err)
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
