package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the ## Command reference section of docs/cli.md from the command table")

const cliDocPath = "../../docs/cli.md"

// referenceSection splits docs/cli.md around its "## Command reference" body.
func referenceSection(t *testing.T, doc string) (before, body, after string) {
	t.Helper()
	const head = "\n## Command reference\n"
	start := strings.Index(doc, head)
	if start < 0 {
		t.Fatal(`docs/cli.md has no "## Command reference" section`)
	}
	start += len(head)
	end := strings.Index(doc[start:], "\n## ")
	if end < 0 {
		end = len(doc) - start
	}
	return doc[:start], doc[start : start+end], doc[start+end:]
}

// docs/cli.md's command reference is exactly what the command table
// generates: a flag added, renamed or reworded without the docs fails here.
func TestCLIReferenceUpToDate(t *testing.T) {
	b, err := os.ReadFile(cliDocPath)
	must(t, err)
	before, body, after := referenceSection(t, string(b))
	want := cliReference()
	if *updateDocs {
		must(t, os.WriteFile(cliDocPath, []byte(before+want+after), 0o644))
		return
	}
	if body != want {
		t.Errorf("docs/cli.md's ## Command reference is out of date: go test ./cmd/strata -run TestCLIReferenceUpToDate -update-docs")
	}
}

// docs/cli.md documents every command of the commands table and each of its
// flags, on a line that names the command.
func TestCLIDocCoversCommandsAndFlags(t *testing.T) {
	doc, err := os.ReadFile(cliDocPath)
	must(t, err)
	lines := strings.Split(string(doc), "\n")
	for i := range commands {
		c := &commands[i]
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
		flagSetOf(c).VisitAll(func(f *flag.Flag) {
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
