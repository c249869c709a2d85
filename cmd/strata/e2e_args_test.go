package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// argsEnv is a World "w" whose two changed files are named "-y" (a flag of
// nothing, a file name after --) and "x", plus a snapshot taken between two
// rounds of edits: -y and x hold "y1"/"x1" in the snapshot, "y2"/"x2" now.
func argsEnv(t *testing.T) (e *env, snap string) {
	t.Helper()
	e = newEnv(t)
	must(t, os.WriteFile(filepath.Join(e.source, "-y"), []byte("y0\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(e.source, "x"), []byte("x0\n"), 0o644))
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo y1 > ./-y; echo x1 > x")
	var s struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal([]byte(e.ok("snap", "w", "--json")), &s))
	e.ok("exec", "w", "--", "sh", "-c", "echo y2 > ./-y; echo x2 > x")
	return e, s.ID
}

// Every argument after "--" is an operand, for every command: a path named
// like a flag is a path, and no operand is ever dropped. Before, "apply W --
// -y" published every changed path of the World and "diff W -- x" printed
// them all.
func TestE2EDoubleDashOperands(t *testing.T) {
	e, snap := argsEnv(t)
	worldFile := func(rel string) string {
		t.Helper()
		return e.ok("exec", "w", "--", "cat", "./"+rel)
	}

	// Read-only commands first, in order; each row is one command line.
	for _, tc := range []struct {
		args       []string
		has, hasnt []string
	}{
		{[]string{"diff", "w", "--", "x"}, []string{"+++ b/x", "+x2"}, []string{"b/-y", "y2"}},
		{[]string{"diff", "w", "--", "-y"}, []string{"+++ b/-y", "+y2"}, []string{"b/x", "x2"}},
		{[]string{"diff", "w", "--stat", "--", "-y"}, []string{"-y", "1 files changed"}, []string{" x "}},
		{[]string{"diff", "w", "--json", "--", "x"}, []string{`"path": "x"`}, []string{`"path": "-y"`}},
		{[]string{"apply", "w", "--dry-run", "--", "-y"}, []string{"-y", "would apply 1 path(s)"}, []string{" x\n"}},
		{[]string{"apply", "--dry-run", "w", "--", "x"}, []string{"x", "would apply 1 path(s)"}, []string{"-y"}},
		{[]string{"blame", "w", "--json", "--", "-y"}, []string{`"path": "-y"`}, nil},
		{[]string{"top", "--json", "--", "w"}, []string{`"world": "w"`}, nil},
		{[]string{"snapdiff", "w", "--", snap}, []string{"content  -y", "content  x"}, nil},
		{[]string{"sessions", "--json", "--", "w"}, []string{`"world": "w"`}, nil},
	} {
		out := e.ok(tc.args...)
		for _, s := range tc.has {
			if !strings.Contains(out, s) {
				t.Errorf("strata %s: output lacks %q:\n%s", strings.Join(tc.args, " "), s, out)
			}
		}
		for _, s := range tc.hasnt {
			if strings.Contains(out, s) {
				t.Errorf("strata %s: output has %q (an operand after -- was dropped?):\n%s", strings.Join(tc.args, " "), s, out)
			}
		}
	}

	// Commands that take no path refuse one after -- (exit 2) instead of
	// ignoring it and acting on everything.
	for _, args := range [][]string{
		{"status", "w", "--", "x"},
		{"snap", "w", "--", "-m"},
		{"history", "--", "w"},
		{"gc", "--", "x"},
		{"trash", "--", "x"},
		{"doctor", "--", "x"},
		{"ls", "--", "x"},
		{"show", "w", "--", "x"},
		{"timeline", "w", "--", "x"},
		{"events", "--", "x"},
	} {
		e.fails(2, "unexpected argument", args...)
	}

	// restore brings back only the path named after --.
	e.ok("restore", "w", snap, "--", "-y")
	if got := worldFile("-y"); got != "y1\n" {
		t.Errorf("restore w %s -- -y: -y = %q, want the snapshot's y1", snap, got)
	}
	if got := worldFile("x"); got != "x2\n" {
		t.Errorf("restore w %s -- -y also restored x: %q", snap, got)
	}

	// apply publishes only the path named after --.
	out := e.ok("apply", "w", "--", "-y")
	if !strings.Contains(out, "applied 1 path(s)") {
		t.Errorf("apply w -- -y: %s", out)
	}
	if got := e.readSource("-y"); got != "y1\n" {
		t.Errorf("source -y = %q, want the World's y1", got)
	}
	if got := e.readSource("x"); got != "x0\n" {
		t.Fatalf("apply w -- -y also published x: source x = %q", got)
	}

	// exec and fork still take the command line after --, flags and all.
	if out := e.ok("exec", "w", "--", "sh", "-c", `echo "$0 $1"`, "-n", "--"); out != "-n --\n" {
		t.Errorf("exec w -- sh -c ... -n --: %q", out)
	}
	out, errs, code := e.run("fork", "w", "-n", "1", "--prefix", "f", "--", "sh", "-c", "cat ./-y; test $# = 0", "-x")
	if code != 0 || !strings.Contains(out, "f-1 | y1") {
		t.Errorf("fork -- CMD: exit %d\n%s\n%s", code, out, errs)
	}
}
