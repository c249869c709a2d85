package tui

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine"
)

// An error that happens while the message log is open shows in it: the
// log is not a snapshot of the moment it opened.
func TestMessageLogFollowsNewMessages(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.send(doneMsg{err: errors.New("first failure")})
	d.keys("L")
	if !strings.Contains(d.screen(), "first failure") {
		t.Fatalf("no message log:\n%s", d.screen())
	}
	d.send(doneMsg{err: errors.New("second failure while the log is open")})
	scr := d.screen()
	above := scr[:strings.LastIndex(scr, "\n")] // the status line shows it anyway
	if d.m.msgLog() == nil || !strings.Contains(above, "second failure while the log is open") {
		t.Fatalf("the open message log misses the new error:\n%s", d.screen())
	}
}

// The compare view follows its Worlds: a World that writes its result
// again shows the new version without reopening the view, and an answer
// arriving after the view closed does not reopen it.
func TestCompareFollowsWorldChanges(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"result.txt": "base\n"})
	names := []string{"w-a", "w-b"}
	for _, n := range names {
		newWorld(t, eng, src, n, "")
	}
	res := eng.FanOut(context.Background(), names, engine.ExecOptions{Argv: []string{"/bin/sh", "-c", "echo first > result.txt"}}, func(string, engine.Record) {})
	for _, r := range res {
		if r.ExitCode != 0 || r.Error != "" {
			t.Fatalf("fan-out: %+v", r)
		}
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("1")
	d.selectWorld("w-a")
	d.keys("c")
	if d.m.compare() == nil {
		t.Fatalf("no compare view: %q", d.m.lastErr)
	}
	if scr := d.screen(); !strings.Contains(scr, "1 agree") {
		t.Fatalf("the two Worlds do not agree yet:\n%s", scr)
	}
	runIn(t, eng, "w-b", "echo second > result.txt")
	d.send(eventMsg{Type: engine.EventPathsChanged, World: "w-b"})
	if scr := d.screen(); !strings.Contains(scr, "1 differ") {
		t.Fatalf("the compare view did not follow w-b's change:\n%s", scr)
	}
	// Closed, a late answer to a reload is for nobody.
	load := reloadCompare(d.m)
	closeAll[compareModal](&d.m)
	d.send(load())
	if d.m.compare() != nil {
		t.Fatal("a reload's answer reopened the closed compare view")
	}
}
