package tui

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/panes"
)

// threeHunks is a file whose edit by `editThree` makes three hunks.
func threeHunks() string {
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		b.WriteString("line ")
		b.WriteString(itoa(i))
		b.WriteString("\n")
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

const editThree = `sed -i -e 's/^line 2$/line two/' -e 's/^line 15$/line fifteen/' -e 's/^line 28$/line twenty-eight/' a.txt`

// Every global action, through its key, against a real engine.
var globalActionTests = map[string]func(t *testing.T, d *driver){
	keymap.Quit: func(t *testing.T, d *driver) {
		_, cmd := d.m.Update(press("q"))
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Error("q does not quit")
		}
	},
	keymap.Help: func(t *testing.T, d *driver) {
		d.keys("?")
		if d.m.help() == nil || !strings.Contains(d.screen(), "Keys") || !strings.Contains(d.screen(), "next World") {
			t.Fatalf("no help:\n%s", d.screen())
		}
		d.keys("esc")
		if d.m.help() != nil {
			t.Error("esc does not close the help")
		}
	},
	keymap.Palette: func(t *testing.T, d *driver) {
		d.keys(":")
		d.typeText("timeline pane")
		d.keys("enter")
		if d.m.palette() != nil || d.m.focus != paneTimeline {
			t.Errorf("palette: focus %v", d.m.focus)
		}
	},
	keymap.Messages: func(t *testing.T, d *driver) {
		d.send(doneMsg{err: errors.New("something went wrong")})
		d.keys("L")
		if d.m.msgLog() == nil || !strings.Contains(d.screen(), "something went wrong") {
			t.Fatalf("no message log:\n%s", d.screen())
		}
		d.keys("L")
		if d.m.msgLog() != nil {
			t.Error("L does not close the message log")
		}
	},
	keymap.FocusNext: func(t *testing.T, d *driver) {
		d.keys("tab")
		if d.m.focus != paneTranscript {
			t.Errorf("focus %v", d.m.focus)
		}
	},
	keymap.FocusPrev: func(t *testing.T, d *driver) {
		d.keys("shift+tab")
		if d.m.focus != paneTimeline {
			t.Errorf("focus %v", d.m.focus)
		}
	},
	keymap.TabWorlds: func(t *testing.T, d *driver) {
		d.keys("3", "1")
		if d.m.focus != paneWorlds {
			t.Errorf("focus %v", d.m.focus)
		}
	},
	keymap.TabTranscript: func(t *testing.T, d *driver) {
		d.keys("2")
		if d.m.focus != paneTranscript || !strings.Contains(strings.Split(d.screen(), "\n")[1], "Transcript") {
			t.Errorf("focus %v:\n%s", d.m.focus, d.screen())
		}
	},
	keymap.TabChanges: func(t *testing.T, d *driver) {
		d.keys("3")
		if d.m.focus != paneChanges || !strings.Contains(d.screen(), "a.txt") {
			t.Errorf("focus %v:\n%s", d.m.focus, d.screen())
		}
	},
	keymap.TabDiff: func(t *testing.T, d *driver) {
		d.keys("4")
		if d.m.focus != paneDiff || !strings.Contains(d.screen(), "hunk 1/3") {
			t.Errorf("focus %v:\n%s", d.m.focus, d.screen())
		}
	},
	keymap.TabTimeline: func(t *testing.T, d *driver) {
		d.keys("5")
		if d.m.focus != paneTimeline || !strings.Contains(d.screen(), "No snapshots yet") {
			t.Errorf("focus %v:\n%s", d.m.focus, d.screen())
		}
	},
	keymap.AllWorlds: func(t *testing.T, d *driver) {
		if len(d.m.worlds.Rows()) != 1 {
			t.Fatalf("%d worlds over the source", len(d.m.worlds.Rows()))
		}
		d.keys("A")
		if d.m.source != "" || len(d.m.worlds.Rows()) != 2 {
			t.Errorf("all: %d worlds", len(d.m.worlds.Rows()))
		}
		d.keys("A")
		if len(d.m.worlds.Rows()) != 1 {
			t.Errorf("back: %d worlds", len(d.m.worlds.Rows()))
		}
	},
	keymap.NextNeedsYou: func(t *testing.T, d *driver) {
		d.keys("!")
		if d.m.World() != "w1" || !strings.Contains(d.screen(), "no World needs you") {
			t.Fatalf("with nobody waiting: selected %q\n%s", d.m.World(), d.screen())
		}
		// The agent of a World over another source asks for permission.
		rec := engine.AgentRecord{
			Session: "s1", World: "elsewhere", Preset: "claude", Integration: agent.IntegrationClaude, Supervised: true,
			Status: agent.Status{State: agent.StatePermission, Reason: "allow Bash: rm -rf build?", Since: time.Now().Add(-time.Minute)},
		}
		dir := filepath.Join(d.m.eng.Paths.World("elsewhere"), "agents", "s1")
		data, _ := json.Marshal(rec)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "agent.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		d.keys("A")
		d.eventually("the other World listed", func() bool { return len(d.m.worlds.Rows()) == 2 })
		d.keys("!")
		if d.m.World() != "elsewhere" {
			t.Fatalf("! selected %q:\n%s", d.m.World(), d.screen())
		}
		if sc := d.screen(); !strings.Contains(sc, "permit?") || !strings.Contains(sc, "allow Bash: rm") {
			t.Errorf("the state and reason are not shown:\n%s", sc)
		}
	},
	keymap.AllowEgress: func(t *testing.T, d *driver) {
		d.keys("E")
		if !strings.Contains(d.m.info, "no host denied") {
			t.Errorf("E with nothing denied: %q", d.m.info)
		}
		d.send(eventMsg{Type: engine.EventEgressDenied, World: "w1", Detail: map[string]any{"host": "example.org", "port": float64(443), "allow_key": "boundary.worlds.w1.allow"}})
		d.keys("E")
		if d.m.lastErr != "" || !strings.Contains(d.m.info, "allowed example.org") {
			t.Errorf("after a denial, E: info %q, error %q", d.m.info, d.m.lastErr)
		}
	},
	keymap.Refresh: func(t *testing.T, d *driver) {
		if err := os.WriteFile(filepath.Join(d.m.eng.Paths.Upper("w1"), "late.txt"), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d.keys("ctrl+r")
		if !strings.Contains(d.screen(), "late.txt") && d.m.focus == paneChanges {
			t.Errorf("refresh did not reload:\n%s", d.screen())
		}
		if len(d.m.changes.All()) != 2 {
			t.Errorf("%d changes after refresh", len(d.m.changes.All()))
		}
	},
}

func TestGlobalActions(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": threeHunks()})
	newWorld(t, eng, src, "w1", editThree)
	other := t.TempDir()
	newWorld(t, eng, other, "elsewhere", "")
	for _, a := range keymap.Default().Area(keymap.Global) {
		test, ok := globalActionTests[a.Name]
		if !ok {
			t.Errorf("no test for %s", a.Name)
			continue
		}
		t.Run(a.Name, func(t *testing.T) {
			d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 80, 24)
			if d.m.World() != "w1" {
				t.Fatalf("selected %q:\n%s", d.m.World(), d.screen())
			}
			test(t, d)
		})
	}
}

// TestFlow goes through the root model as a person would: new World from
// the form, run a command and see its output, pick one hunk of three,
// apply, snapshot, roll back, remove with the second confirm.
func TestFlow(t *testing.T) {
	base := threeHunks()
	eng, src := testEngine(t, map[string]string{"a.txt": base})
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 160, 48)
	if !strings.Contains(d.screen(), "0 over "+src) || !strings.Contains(d.screen(), "No Worlds over this source yet.") || !strings.Contains(d.screen(), "press n to create") {
		t.Fatalf("no empty state:\n%s", d.screen())
	}

	d.keys("n")
	d.typeText("agent1")
	d.keys("enter")
	if d.m.World() != "agent1" {
		t.Fatalf("selected %q after creating; status %q %q", d.m.World(), d.m.info, d.m.lastErr)
	}
	t.Cleanup(func() {
		_, _ = eng.Remove(context.Background(), "agent1", engine.RemoveOptions{Force: true, Purge: true, Kill: true})
	})

	d.keys("x")
	d.typeText(editThree + "; echo edited-the-file")
	d.keys("enter")
	d.eventually("the command's output", func() bool { return strings.Contains(d.screen(), "edited-the-file") })
	d.eventually("three hunks", func() bool {
		fd := d.m.diff.FileDiff()
		return fd != nil && len(fd.Hunks) == 3
	})

	d.keys("4", "l", "space")
	if hs := d.m.diff.Selection().PickedHunks(); len(hs) != 1 || hs[0] != 1 {
		t.Fatalf("picked %v", hs)
	}
	if d.m.pickStates()["a.txt"] != panes.PickPartial {
		t.Fatalf("changes pane does not show the partial pick")
	}
	d.keys("a")
	if d.m.dialog() == nil || !strings.Contains(d.screen(), "write a.txt (1 of 3 hunks)") {
		t.Fatalf("no apply dialog:\n%s", d.screen())
	}
	d.keys("enter")
	if d.m.lastErr != "" {
		t.Fatalf("apply: %s", d.m.lastErr)
	}
	got, _ := os.ReadFile(filepath.Join(src, "a.txt"))
	want := strings.Replace(base, "line 15\n", "line fifteen\n", 1)
	if string(got) != want {
		t.Fatalf("source after applying hunk 2:\n%s", got)
	}

	// Snapshot, then change more, then roll back.
	d.keys("5", "s")
	d.typeText("two hunks left")
	d.keys("enter")
	if !strings.Contains(d.screen(), "two hunks left") {
		t.Fatalf("snapshot not in the timeline:\n%s", d.screen())
	}
	runIn(t, eng, "agent1", "echo extra > b.txt")
	d.keys("ctrl+r")
	if !strings.Contains(d.screen(), "b.txt") {
		t.Fatalf("b.txt not listed:\n%s", d.screen())
	}
	d.keys("5", "r", "enter")
	if d.m.lastErr != "" {
		t.Fatalf("rollback: %s", d.m.lastErr)
	}
	for _, c := range d.m.changes.All() {
		if c.Path == "b.txt" {
			t.Fatal("b.txt survived the rollback")
		}
	}

	// Removing a World with unsaved work asks twice; the second time the
	// name must be typed.
	runIn(t, eng, "agent1", "echo unsaved > c.txt")
	d.keys("1", "D", "enter")
	if d.m.dialog() == nil || d.m.dialog().Require != "agent1" {
		t.Fatalf("no second confirm:\n%s", d.screen())
	}
	d.typeText("agent1")
	d.keys("enter")
	if _, err := eng.World("agent1"); !errors.Is(err, engine.ErrWorldNotFound) {
		t.Fatalf("world still there: %v", err)
	}
	if !strings.Contains(d.screen(), "No Worlds over") {
		t.Errorf("empty state not back:\n%s", d.screen())
	}
}

// A World that starts failing rings the bell and notifies.
func TestNotifyOnFailure(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w1", "")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	ctx := context.Background()
	meta, err := eng.Exec(ctx, "w1", engine.ExecOptions{Argv: []string{"/bin/sh", "-c", "exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.WaitSession(ctx, eng.SessionDir("w1", meta.ID)); err != nil {
		t.Fatal(err)
	}
	d.send(eventMsg{Type: engine.EventSessionEnded, World: "w1", Session: meta.ID})
	if len(d.raw) != 1 || !strings.Contains(d.raw[0], "\a") || !strings.Contains(d.raw[0], "\x1b]9;strata: w1 is failed") || !strings.Contains(d.raw[0], "\x1b]777;notify;strata;w1 is failed") {
		t.Fatalf("raw output %q", d.raw)
	}
	d.send(eventMsg{Type: engine.EventWorldChanged, World: "w1"})
	if len(d.raw) != 1 {
		t.Error("notified twice for one failure")
	}
}

// The 80x24 layout is tabs; wide terminals show all panes; clicks focus
// and select; the wheel scrolls.
func TestLayoutAndMouse(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": threeHunks()})
	newWorld(t, eng, src, "w1", editThree)
	newWorld(t, eng, src, "w2", "")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 80, 24)
	lines := strings.Split(d.screen(), "\n")
	if len(lines) != 24 || !strings.Contains(lines[0], "1 Worlds  2 Transcript  3 Changes") {
		t.Fatalf("80x24:\n%s", d.screen())
	}
	d.send(tea.MouseClickMsg{X: 30, Y: 0, Button: tea.MouseLeft}) // the Changes tab
	if d.m.focus != paneChanges {
		t.Fatalf("tab click: focus %v", d.m.focus)
	}
	d.send(tea.WindowSizeMsg{Width: 200, Height: 60})
	scr := d.screen()
	for _, name := range []string{"1 Worlds", "2 Transcript", "3 Changes", "4 Diff", "5 Timeline"} {
		if !strings.Contains(scr, name) {
			t.Errorf("wide layout lacks %s:\n%s", name, scr)
		}
	}
	r := d.m.layout()
	// Click the second World's row: the first content line is the header.
	d.send(tea.MouseClickMsg{X: r[paneWorlds].x + 3, Y: r[paneWorlds].y + 3, Button: tea.MouseLeft})
	if d.m.focus != paneWorlds || d.m.World() != "w2" {
		t.Fatalf("click: focus %v world %q", d.m.focus, d.m.World())
	}
	d.send(tea.MouseWheelMsg{X: r[paneWorlds].x + 3, Y: r[paneWorlds].y + 3, Button: tea.MouseWheelUp})
	if d.m.World() != "w1" {
		t.Errorf("wheel up: world %q", d.m.World())
	}
	for _, sz := range [][2]int{{80, 24}, {100, 28}, {99, 40}, {120, 40}, {200, 60}, {40, 10}} {
		d.send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		lines := strings.Split(d.m.Render(), "\n")
		if len(lines) != sz[1] {
			t.Errorf("%dx%d: %d lines", sz[0], sz[1], len(lines))
		}
		for i, l := range lines {
			if w := ansiWidth(l); w != sz[0] {
				t.Errorf("%dx%d: line %d is %d wide", sz[0], sz[1], i, w)
				break
			}
		}
	}
}
