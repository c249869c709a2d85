package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/panes"
)

// K on a command that ignores SIGTERM: TERM, then KILL after kill_grace;
// the session reads killed by strata (not failed), and K again offers
// SIGKILL at once.
func TestKillEscalates(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "x\n"})
	newWorld(t, eng, src, "w1", "")
	eng.Config.KillGrace = "300ms"
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	// Started after the driver: the synchronous driver would otherwise
	// follow the live transcript for ever.
	meta, err := eng.Exec(context.Background(), "w1", engine.ExecOptions{Argv: []string{"/bin/sh", "-c", "trap '' TERM; touch trapped; while :; do sleep 0.1; done"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	// K only once the shell ignores TERM: under load, a K sent before the
	// trap was set ended it with SIGTERM.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Lstat(filepath.Join(eng.Paths.Upper("w1"), "trapped")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session's shell never set its TERM trap")
		}
	}
	kill := panes.ActionMsg{Action: keymap.TranscriptKill, World: "w1", Session: meta.ID}
	d.send(kill)
	if !strings.Contains(d.screen(), "Kill session") {
		t.Fatalf("no kill confirm:\n%s", d.screen())
	}
	d.keys("y")
	m, err := eng.Session("w1", meta.ID)
	if err != nil || m.State != engine.SessionKilled || m.Signal != "SIGKILL" || !m.KilledByStrata || engine.SessionAttention(m) != engine.AttentionDone {
		t.Fatalf("after K: %v %+v", err, m)
	}
	d.send(kill)
	if !strings.Contains(d.screen(), "Force-kill session") {
		t.Fatalf("K again does not offer SIGKILL:\n%s", d.screen())
	}
}
