package panes

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/stratahq/strata/keymap"
)

func transcriptWith(t *testing.T, rows []SessionRow, data string) Transcript {
	t.Helper()
	p := NewTranscript(testEnv(t, "dark"))
	p, _ = p.SetSessions("w", rows)
	return p.SetSize(0, 10).Append([]byte(data))
}

// A session waiting for input says so, and how to answer it.
func TestTranscriptWaitingHeader(t *testing.T) {
	p := transcriptWith(t, []SessionRow{{ID: "s-0001aaaaaaaa", Command: "claude", State: "running", TTY: false, Waiting: true}}, "Allow edit? [y/n] ")
	head := ansi.Strip(strings.Split(p.View(100, 10, true), "\n")[0])
	if !strings.Contains(head, "waiting for input — enter to attach") || strings.Contains(head, "running") {
		t.Errorf("header: %q", head)
	}
}

// Search says which match is shown of how many, and says so when nothing
// matches.
func TestTranscriptSearchSaysWhere(t *testing.T) {
	p := transcriptWith(t, fixtureSessions(), string(fixtureTranscript()))
	p = p.runSearch("fail")
	out := ansi.Strip(p.View(80, 10, true))
	if !strings.Contains(out, "match 6/6") {
		t.Errorf("no match count:\n%s", out)
	}
	p = p.jumpMatch(1)
	if out := ansi.Strip(p.View(80, 10, true)); !strings.Contains(out, "match 1/6") {
		t.Errorf("n does not move the count:\n%s", out)
	}
	p = p.runSearch("zebra")
	if out := ansi.Strip(p.View(80, 10, true)); !strings.Contains(out, "no match for zebra") {
		t.Errorf("no-match not said:\n%s", out)
	}
}

// A matched line keeps its own colours outside the match.
func TestTranscriptSearchKeepsColours(t *testing.T) {
	p := transcriptWith(t, fixtureSessions(), "\x1b[31mred fail here\x1b[0m plain\n")
	p = p.runSearch("fail")
	out := p.View(80, 10, true)
	if !strings.Contains(out, "\x1b[31mred ") {
		t.Errorf("the colour before the match is lost: %q", out)
	}
	if !strings.Contains(out, "\x1b[m\x1b[31m here") {
		t.Errorf("the colour after the match is not restored: %q", out)
	}
	if !strings.Contains(ansi.Strip(out), "red fail here plain") {
		t.Errorf("text changed: %q", ansi.Strip(out))
	}
}

// Scrolled away from the tail, the pane says where it is.
func TestTranscriptPosition(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	p := transcriptWith(t, fixtureSessions(), b.String())
	if out := ansi.Strip(p.View(80, 10, true)); strings.Contains(out, "line 5,000/5,000") || strings.Contains(out, "%)") {
		t.Errorf("position shown while following:\n%s", out)
	}
	p, _ = p.Scroll(-3000)
	if out := ansi.Strip(p.View(80, 10, true)); !strings.Contains(out, "line 2,000/5,000 (40%)") {
		t.Errorf("no position:\n%s", out)
	}
}

// A long or multi-line command gives way in the header: the session's
// state (waiting for input, its exit) and its id stay on the one header
// line at 80 columns, and the pane keeps its height.
func TestTranscriptHeaderCommandGivesWay(t *testing.T) {
	long := "claude --model opus --permission-mode acceptEdits --append-system-prompt 'be brief and careful'\necho second line"
	for _, c := range []struct {
		row  SessionRow
		want string
	}{
		{SessionRow{ID: "s-0001aaaaaaaa", Command: long, State: "running", Waiting: true}, "waiting for input — enter to attach · s-0001aa"},
		{SessionRow{ID: "s-0002bbbbbbbb", Command: long, State: "exited", ExitCode: 3}, "exit 3 · s-0002bb"},
	} {
		p := transcriptWith(t, []SessionRow{c.row}, "out\n")
		view := p.View(80, 10, true)
		lines := strings.Split(view, "\n")
		head := ansi.Strip(lines[0])
		if len(lines) != 10 || !strings.Contains(head, c.want) || !strings.Contains(head, "claude --model") || ansi.StringWidth(lines[0]) != 80 {
			t.Errorf("%d lines; header %q: want %q after the cut command", len(lines), head, c.want)
		}
		if strings.Contains(head, "echo second") && !strings.Contains(head, "⏎") {
			t.Errorf("header shows a newline of the command raw: %q", head)
		}
	}
}

// A second / starts an empty query (typing must not extend the last one,
// "fail" then "zebra" searching "failzebra"); enter alone repeats the last
// search and ↑ brings back earlier ones, as in less and vim.
func TestTranscriptSearchStartsEmpty(t *testing.T) {
	p := transcriptWith(t, fixtureSessions(), string(fixtureTranscript()))
	search := func(keys ...string) {
		p, _ = p.Do(keymap.TranscriptSearch)
		for _, k := range keys {
			if k == "up" {
				p, _ = p.Update(keyPress(k))
				continue
			}
			for _, c := range typeText(k) {
				p, _ = p.Update(c)
			}
		}
		p, _ = p.Update(keyPress("enter"))
	}
	footer := func() string {
		lines := strings.Split(ansi.Strip(p.View(80, 10, true)), "\n")
		return strings.TrimSpace(lines[len(lines)-1])
	}
	search("fail")
	search("zebra")
	if p.query != "zebra" || !strings.Contains(footer(), "no match for zebra") {
		t.Fatalf("second search: query %q, footer %q", p.query, footer())
	}
	search()
	if p.query != "zebra" {
		t.Errorf("enter alone: query %q, want the last search again", p.query)
	}
	search("up", "up")
	if p.query != "fail" || !strings.Contains(footer(), "/fail") {
		t.Errorf("↑↑: query %q, footer %q; want fail", p.query, footer())
	}
}
