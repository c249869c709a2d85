package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/keymap"
)

// From a changed path, w opens the transcript of the session that wrote
// it, scrolled to the output around the write, not to the tail.
func TestJumpToWriter(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w1", "")
	first := runIn(t, eng, "w1", `i=0; while [ $i -lt 80 ]; do echo "before $i"; i=$((i+1)); done; sleep 0.3; echo changed > b.txt; sleep 0.3; echo WROTE-B; i=0; while [ $i -lt 80 ]; do echo "after $i"; i=$((i+1)); done`)
	second := runIn(t, eng, "w1", `echo other session; echo c > c.txt`)
	_, ws, err := eng.Blame("w1", "b.txt")
	if err != nil || len(ws) != 1 || ws[0].Session != first.ID {
		t.Fatalf("the engine's provenance of b.txt: %+v %v", ws, err)
	}

	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("2")
	if d.m.tSession != second.ID {
		t.Fatalf("the newest session is not shown first")
	}
	d.keys("3")
	d.selectChange("b.txt")
	d.send(press(keymap.Default().Binding(keymap.ChangesWriter).Keys()[0]))
	if d.m.focus != paneTranscript || d.m.tSession != first.ID {
		t.Fatalf("focus %v session %q (want %q); status %q %q", d.m.focus, d.m.tSession, first.ID, d.m.info, d.m.lastErr)
	}
	scr := d.screen()
	if !strings.Contains(scr, "WROTE-B") || !strings.Contains(scr, "before 79") || strings.Contains(scr, "after 79") {
		t.Fatalf("not scrolled to the write:\n%s", scr)
	}
	if d.m.transcript.Following() {
		t.Error("still following the tail")
	}
	if !strings.Contains(d.m.info, "b.txt: create by") && !strings.Contains(d.m.info, "b.txt: write by") {
		t.Errorf("status %q", d.m.info)
	}

	// The other path leads to the other session.
	d.keys("3")
	d.selectChange("c.txt")
	d.keys("w")
	if d.m.tSession != second.ID || !strings.Contains(d.screen(), "other session") {
		t.Fatalf("c.txt: session %q\n%s", d.m.tSession, d.screen())
	}
}

// A path inherited through a fork was written in the parent World: w says
// so instead of opening one of this World's transcripts.
func TestJumpToInheritedWriter(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "parent", "")
	writer := runIn(t, eng, "parent", `echo changed > b.txt`)
	if _, err := eng.Fork(context.Background(), "parent", engine.ForkOptions{N: 1, Prefix: "kid"}); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.selectWorld("kid-1")
	d.keys("3")
	d.selectChange("b.txt")
	d.send(press(keymap.Default().Binding(keymap.ChangesWriter).Keys()[0]))
	if d.m.lastErr != "" || !strings.Contains(d.m.info, "in world parent, before this World was forked") || !strings.Contains(d.m.info, writer.ID[:4]) {
		t.Fatalf("status %q %v", d.m.info, d.m.lastErr)
	}
	if d.m.focus == paneTranscript {
		t.Error("focus moved to this World's transcript for a write made in another World")
	}
}
