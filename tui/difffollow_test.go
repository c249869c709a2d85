package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
)

const driftNote = "source changed since the World's base: apply will merge"

// reviewA opens w1's diff of a.txt (three hunks) in the Diff pane.
func reviewA(t *testing.T) (*driver, *engine.Engine, string) {
	t.Helper()
	eng, src := testEngine(t, map[string]string{"a.txt": threeHunks()})
	newWorld(t, eng, src, "w1", editThree)
	captureBases(t, eng, "w1")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 160, 48)
	d.selectWorld("w1")
	d.keys("3")
	d.selectChange("a.txt")
	d.keys("4")
	if scr := d.screen(); !strings.Contains(scr, "line fifteen") || strings.Contains(scr, driftNote) {
		t.Fatalf("no diff of a.txt, or drift before any:\n%s", scr)
	}
	return d, eng, src
}

// An edit of the source file under review (a teammate, an editor) shows
// in the Diff pane without a reload: the watcher's message reads it again.
func TestDiffFollowsSourceEdit(t *testing.T) {
	d, _, src := reviewA(t)
	file := filepath.Join(src, "a.txt")
	if got := d.m.diffSource(); got != file {
		t.Fatalf("the Diff pane follows %q, want %q", got, file)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(threeHunks(), "line 8\n", "teammate 8\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d.send(sourceChangedMsg{file: file})
	if scr := d.screen(); !strings.Contains(scr, driftNote) {
		t.Fatalf("the diff did not follow the source edit:\n%s", scr)
	}
	d.keys("o")
	if scr := d.screen(); !strings.Contains(scr, "teammate 8") {
		t.Fatalf("the vs-source view shows the old source:\n%s", scr)
	}
}

// Another World over the same source applies: the source moved under w1,
// whose diff says so at once (the engine's event is for the other World).
func TestDiffFollowsOtherWorldsApply(t *testing.T) {
	d, eng, src := reviewA(t)
	newWorld(t, eng, src, "w2", `sed -i 's/^line 8$/w2 line 8/' a.txt`)
	if _, err := engineApply(context.Background(), eng, "w2", []applyPick{{Path: "a.txt"}}); err != nil {
		t.Fatal(err)
	}
	d.send(eventMsg{Type: engine.EventApplyDone, World: "w2"})
	if scr := d.screen(); !strings.Contains(scr, driftNote) {
		t.Fatalf("w1's diff did not follow w2's apply to the source:\n%s", scr)
	}
}

// The watcher reports a change of the followed file (written in place or
// replaced by a rename, as editors save), nothing for its neighbours, and
// nothing once it follows no file.
func TestSourceWatch(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(file, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sw, err := newSourceWatch((&Model{}).log())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan tea.Msg, 16)
	go sw.run(ctx, func(m tea.Msg) { got <- m })
	sw.follow(file)
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case m := <-got:
			if !want {
				t.Fatalf("%s: unexpected %+v", what, m)
			}
			if m != (sourceChangedMsg{file: file}) {
				t.Fatalf("%s: %+v", what, m)
			}
		case <-time.After(map[bool]time.Duration{true: 5 * time.Second, false: 300 * time.Millisecond}[want]):
			if want {
				t.Fatalf("%s: no message", what)
			}
		}
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "b\n")
	expect("write in place", true)
	write(".a.txt.swp", "x\n")
	expect("a neighbour", false)
	write(".a.txt.new", "c\n")
	if err := os.Rename(filepath.Join(dir, ".a.txt.new"), file); err != nil {
		t.Fatal(err)
	}
	expect("replaced by a rename", true)
	// Requests carried out out of order: the last one asked wins.
	older, newer := followSource(sw, ""), followSource(sw, file)
	newer()
	older()
	write("a.txt", "e\n")
	expect("a late older request", true)
	sw.follow("")
	write("a.txt", "d\n")
	expect("followed no more", false)
}
