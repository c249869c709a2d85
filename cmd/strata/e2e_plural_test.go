package main

import (
	"regexp"
	"strings"
	"testing"
)

// One of a thing is written in the singular in every CLI summary (issue 18:
// "1 paths", "(1 hunks)"), and a multi-line command keeps its row in the
// sessions table as it does in blame's.
func TestE2EPluralsAndOneRowPerSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo hi > a.txt\necho done")
	stat := e.ok("diff", "w", "--stat")
	for _, want := range []string{"(1 hunk)\n", " 1 file changed, 1 insertion(+), 1 deletion(-)\n"} {
		if !strings.Contains(stat, want) {
			t.Errorf("diff --stat lacks %q:\n%s", want, stat)
		}
	}
	snap := e.ok("snap", "w", "-m", "one")
	if !strings.Contains(snap, ": 1 file, ") || !strings.Contains(snap, "1 new object (") {
		t.Errorf("snap summary of one file: %s", snap)
	}
	tl := e.ok("timeline", "w")
	if !strings.Contains(tl, "  1 file  one") {
		t.Errorf("timeline row of a one-file snapshot: %s", tl)
	}
	for _, out := range []string{stat, snap, tl} {
		if m := regexp.MustCompile(`\b1 [a-z]+s\b`).FindString(out); m != "" {
			t.Errorf("plural after 1: %q in\n%s", m, out)
		}
	}
	ss := e.ok("sessions", "w")
	lines := strings.Split(strings.TrimSuffix(ss, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `echo hi > a.txt\necho done`) {
		t.Errorf("sessions table with a multi-line command:\n%s", ss)
	}
}
