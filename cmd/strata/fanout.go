package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/stratahq/strata/engine"
)

// fanOut runs argv in every named World at once, prints output line by
// line prefixed by the World, then a summary table. The exit status is the
// number of Worlds whose command failed, capped at 125 (0: all succeeded).
func fanOut(a *app, names []string, argv []string, o engine.ExecOptions) error {
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	var mu sync.Mutex
	partial := map[string]*bytes.Buffer{}
	emit := func(world string, stderr bool, line []byte) {
		w := a.stdout
		if stderr {
			w = a.stderr
		}
		fmt.Fprintf(w, "%-*s | %s", width, world, line)
	}
	o.Argv = argv
	res := a.eng.FanOut(a.ctx, names, o, func(world string, r engine.Record) {
		mu.Lock()
		defer mu.Unlock()
		key := world + "\x00" + r.Stream.String()
		buf := partial[key]
		if buf == nil {
			buf = &bytes.Buffer{}
			partial[key] = buf
		}
		buf.Write(r.Data)
		for {
			i := bytes.IndexByte(buf.Bytes(), '\n')
			if i < 0 {
				break
			}
			emit(world, r.Stream == engine.StreamStderr, buf.Next(i+1))
		}
	})
	for key, buf := range partial {
		if buf.Len() > 0 {
			world, stream, _ := strings.Cut(key, "\x00")
			emit(world, stream == engine.StreamStderr.String(), append(buf.Bytes(), '\n'))
		}
	}
	fmt.Fprintln(a.stdout)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORLD\tEXIT\tDURATION\tCHANGED\tSESSION")
	failed := 0
	for _, r := range res {
		exit := fmt.Sprint(r.ExitCode)
		if r.Signal != "" {
			exit += " (" + r.Signal + ")"
		}
		if r.Error != "" {
			exit += " error: " + r.Error
		}
		if r.ExitCode != 0 || r.Error != "" {
			failed++
		}
		ch := fmt.Sprintf("%d", len(r.Changed))
		if len(r.Changed) > 0 && len(r.Changed) <= 3 {
			ch += " (" + strings.Join(r.Changed, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.World, exit, r.Duration, ch, r.Session)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return &exitError{code: min(failed, 125), err: fmt.Errorf("%d of %d Worlds failed", failed, len(res))}
	}
	return nil
}
