package main

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
)

// docs/cli.md documents every command of the commands table and each of its
// flags, on a line that names the command.
func TestCLIDocCoversCommandsAndFlags(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	must(t, err)
	lines := strings.Split(string(doc), "\n")
	all := append([]command{{name: "tui", run: runTUI}}, commands...)
	for _, c := range all {
		var mine []string
		for _, l := range lines {
			if strings.Contains(l, "strata "+c.name+" ") || strings.Contains(l, "strata "+c.name+"`") {
				mine = append(mine, l)
			}
		}
		if len(mine) == 0 {
			t.Errorf("docs/cli.md does not document strata %s", c.name)
			continue
		}
		text := strings.Join(mine, "\n")
		fs := flagSetOf(context.Background(), c)
		if fs == nil {
			t.Errorf("strata %s builds no flag set", c.name)
			continue
		}
		fs.VisitAll(func(f *flag.Flag) {
			name := "--" + f.Name
			if len(f.Name) == 1 {
				name = "-" + f.Name
			}
			if !strings.Contains(text, name) {
				t.Errorf("docs/cli.md: strata %s %s is not documented on a line naming strata %s", c.name, name, c.name)
			}
		})
	}
}
