package tui

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/stratahq/strata/engine"
)

// After s, the cursor is on the snapshot just taken, not on the row it
// was on; enter on it opens an info box that closes with enter and says
// nothing of confirming.
func TestTimelineSnapshotCursorAndInfoBox(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w1", "echo one > b.txt")
	ctx := context.Background()
	for _, msg := range []string{"first", "second"} {
		if _, err := eng.Snapshot(ctx, "w1", engine.SnapshotOptions{Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("5")
	first := d.m.timeline.Selected()
	d.keys("s")
	d.typeText("third")
	d.keys("enter")
	tl, err := eng.Timeline("w1")
	if err != nil {
		t.Fatal(err)
	}
	var newest engine.Snapshot
	for _, s := range tl.Snapshots {
		if s.Message == "third" {
			newest = s
		}
	}
	if newest.ID == "" {
		t.Fatalf("no snapshot taken:\n%s", d.screen())
	}
	if got := d.m.timeline.Selected(); got != newest.ID {
		t.Fatalf("cursor on %s (was %s), want the new snapshot %s:\n%s", got, first, newest.ID, d.screen())
	}

	d.keys("enter")
	if d.m.dialog() == nil {
		t.Fatalf("enter opens nothing:\n%s", d.screen())
	}
	if scr := d.screen(); strings.Contains(strings.ToLower(scr), "confirm") || !strings.Contains(scr, "close") {
		t.Errorf("the info box offers to confirm:\n%s", scr)
	}
	d.keys("enter")
	if d.m.dialog() != nil {
		t.Error("enter does not close the info box")
	}
	d.keys("enter", "esc")
	if d.m.dialog() != nil {
		t.Error("esc does not close the info box")
	}
}

// A session at a prompt shows as waiting for input in the Transcript's
// header, with how to answer it, instead of "running".
func TestTranscriptShowsWaitingSession(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w1", "")
	ctx := context.Background()
	meta, err := eng.Exec(ctx, "w1", engine.ExecOptions{Argv: []string{"/bin/sh", "-c", "echo ready; read x"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = eng.Kill(context.Background(), "w1", meta.ID, syscall.SIGKILL)
		_, _ = engine.WaitSession(context.Background(), eng.SessionDir("w1", meta.ID))
	})
	// Not through the driver: with a session running, its resource
	// sampling never settles.
	dir := eng.SessionDir("w1", meta.ID)
	deadline := time.Now().Add(15 * time.Second)
	for {
		m, _ := engine.ReadSessionMeta(dir)
		if m.Attention == engine.AttentionWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session never waiting: %s/%s", m.State, m.Attention)
		}
		time.Sleep(50 * time.Millisecond)
	}
	msg, ok := loadSessions(eng, "w1")().(sessionsLoadedMsg)
	if !ok || msg.err != nil || len(msg.rows) != 1 || !msg.rows[0].Waiting {
		t.Fatalf("sessions loaded: %+v", msg)
	}
	m, err := New(ctx, eng, Options{Source: src, Exe: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := m.transcript.SetSessions("w1", msg.rows)
	head := ansi.Strip(strings.Split(tr.View(120, 10, true), "\n")[0])
	if !strings.Contains(head, "waiting for input — enter to attach") || strings.Contains(head, "· running") {
		t.Errorf("header: %q", head)
	}
}
