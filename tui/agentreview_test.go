package tui

import (
	"context"
	"strings"
	"testing"
)

// The Diff pane's comment flow against a real engine: c on a line opens
// the dialog with the quoted line, the comment shows under its line and
// is in the World's open round; the agent rewriting the line marks it
// stale (kept); X removes one; C with no agent says so and keeps the round.
func TestDiffPaneCommentsRoundTrip(t *testing.T) {
	d, eng, _ := reviewA(t)
	// From the first hunk's header down to "line two".
	d.cursorTo("+line two")
	d.keys("c")
	scr := d.screen()
	if !strings.Contains(scr, "Comment on a.txt:2") || !strings.Contains(scr, "> line two") {
		t.Fatalf("no comment dialog for line 2:\n%s", scr)
	}
	d.typeText("spell it as a digit")
	d.keys("enter")
	scr = d.screen()
	if !strings.Contains(scr, "✎ 1 spell it as a digit") || !strings.Contains(scr, "1 comment") {
		t.Fatalf("comment not shown:\n%s", scr)
	}
	r, err := eng.Review(context.Background(), "w1")
	if err != nil || len(r.Open) != 1 || r.Open[0].Snippet != "line two" || r.Open[0].Start != 2 || r.Open[0].Stale {
		t.Fatalf("engine review: %+v, %v", r, err)
	}

	// A comment on the whole second hunk, from its header.
	d.keys("l")
	d.keys("c")
	if scr := d.screen(); !strings.Contains(scr, "Comment on a.txt:12-18 (hunk 2)") {
		t.Fatalf("no hunk comment dialog:\n%s", scr)
	}
	d.typeText("why this hunk")
	d.keys("enter")

	// The agent rewrites line 2: the comment is stale, still shown.
	runIn(t, eng, "w1", `sed -i 's/^line two$/line TWO/' a.txt`)
	d.keys("ctrl+r")
	d.eventually("the stale mark", func() bool {
		return strings.Contains(d.screen(), "[stale: the code changed since this comment] spell it")
	})

	// X on the hunk comment removes it.
	d.keys("h", "h", "h") // back up to the first hunk: the cursor then walks down to the comment
	d.cursorTo("✎ 2 (lines 12-18) why this hunk")
	d.keys("X")
	if scr := d.screen(); strings.Contains(scr, "why this hunk") || !strings.Contains(scr, "comment 2 removed") {
		t.Fatalf("comment 2 not removed:\n%s", scr)
	}

	// C: the round goes nowhere without an agent, and stays open.
	d.keys("C")
	if scr := d.screen(); !strings.Contains(scr, "Send review round 1 to w1?") || !strings.Contains(scr, "1 comment is stale") {
		t.Fatalf("no send confirm:\n%s", scr)
	}
	d.keys("enter")
	if scr := d.screen(); !strings.Contains(scr, "no agent running on a terminal") {
		t.Fatalf("no error without an agent:\n%s", scr)
	}
	if r, _ := eng.Review(context.Background(), "w1"); len(r.Open) != 1 || len(r.Rounds) != 0 {
		t.Fatalf("after a failed send: %+v", r)
	}
}

// cursorTo presses j until the Diff pane's cursor row holds s.
func (d *driver) cursorTo(s string) {
	d.t.Helper()
	for range 80 {
		for _, l := range strings.Split(d.screen(), "\n") {
			if i := strings.Index(l, "▶"); i >= 0 && strings.Contains(l[i:], s) {
				return
			}
		}
		d.keys("j")
	}
	d.t.Fatalf("the cursor never reached %q:\n%s", s, d.screen())
}
