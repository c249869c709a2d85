package tui

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/diffview"
)

// conflictSetup makes a World whose edit of a.txt (lines 2, 15 and 28)
// meets a source edit of lines 2 and 15: applying it conflicts in two
// regions, while line 28 merges cleanly.
func conflictSetup(t *testing.T) (*driver, string, string) {
	t.Helper()
	base := threeHunks()
	eng, src := testEngine(t, map[string]string{"a.txt": base})
	newWorld(t, eng, src, "w1", editThree)
	theirs := strings.Replace(base, "line 2\n", "line 2 from the source\n", 1)
	theirs = strings.Replace(theirs, "line 15\n", "line 15 from the source\n", 1)
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("3", "space", "a", "enter")
	if d.m.conflicts() == nil {
		t.Fatalf("no conflict view: %q\n%s", d.m.lastErr, d.screen())
	}
	return d, src, theirs
}

func readSource(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(src, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A conflicting apply writes nothing and opens the conflict view; the
// person keeps theirs for the first region and ours for the second, and
// applies again: the source ends with exactly that, plus the clean part.
func TestConflictResolvePerRegion(t *testing.T) {
	d, src, theirs := conflictSetup(t)
	if got := readSource(t, src); got != theirs {
		t.Fatalf("the source changed despite the conflict:\n%s", got)
	}
	scr := d.screen()
	for _, want := range []string{"Conflicts · apply from w1", "1 conflicting path ", "conflict 1/2", "line two", "line 2 from the source", "ours · the World", "theirs · the source", "a.txt 0/2 resolved"} {
		if !strings.Contains(scr, want) {
			t.Errorf("conflict view lacks %q:\n%s", want, scr)
		}
	}
	if !strings.Contains(d.m.lastErr, "2 overlapping") && !strings.Contains(d.m.lastErr, "1 conflict,") {
		t.Errorf("status: %q", d.m.lastErr)
	}
	// The status bar shows the conflict keys, not the panes'.
	if last := strings.Split(scr, "\n")[39]; !strings.Contains(last, "o keep ours") || strings.Contains(last, "quit") {
		t.Errorf("status bar: %q", last)
	}
	// Applying with a region open is refused and says which.
	d.keys("enter")
	if d.m.conflicts() == nil || !strings.Contains(d.screen(), "2 of 2 conflicts unresolved") {
		t.Fatalf("apply with open conflicts:\n%s", d.screen())
	}
	d.keys("t") // region 1: theirs; the cursor moves on to region 2
	if f, r := d.m.conflicts().Current(); f != 0 || r != 1 {
		t.Fatalf("cursor at %d/%d after choosing", f, r)
	}
	d.keys("o")
	if d.m.conflicts().Choice(0, 0) != diffview.ChooseTheirs || d.m.conflicts().Choice(0, 1) != diffview.ChooseOurs {
		t.Fatalf("choices %v %v", d.m.conflicts().Choice(0, 0), d.m.conflicts().Choice(0, 1))
	}
	d.keys("enter")
	if d.m.conflicts() != nil || d.m.lastErr != "" {
		t.Fatalf("apply again: %q\n%s", d.m.lastErr, d.screen())
	}
	want := strings.Replace(threeHunks(), "line 2\n", "line 2 from the source\n", 1)
	want = strings.Replace(want, "line 15\n", "line fifteen\n", 1)
	want = strings.Replace(want, "line 28\n", "line twenty-eight\n", 1)
	if got := readSource(t, src); got != want {
		t.Fatalf("source after resolving:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(d.m.info, "applied 1 path from w1") {
		t.Errorf("status: %q", d.m.info)
	}
}

// Both keeps ours then theirs; esc closes the view without writing.
func TestConflictBothAndCancel(t *testing.T) {
	d, src, theirs := conflictSetup(t)
	d.keys("b", "b", "esc")
	if d.m.conflicts() != nil || !strings.Contains(d.m.info, "nothing was written") {
		t.Fatalf("esc: %q", d.m.info)
	}
	if got := readSource(t, src); got != theirs {
		t.Fatalf("esc wrote the source:\n%s", got)
	}
	d.keys("a", "enter") // the picks are still there: conflicts again
	if d.m.conflicts() == nil {
		t.Fatal("no conflict view the second time")
	}
	d.keys("b", "b", "enter")
	got := readSource(t, src)
	if !strings.Contains(got, "line two\nline 2 from the source\n") || !strings.Contains(got, "line fifteen\nline 15 from the source\n") {
		t.Fatalf("both:\n%s", got)
	}
}

// e opens the merge (choices made so far, markers for the rest) in
// $EDITOR; an edit that leaves markers is refused; a clean one is applied.
func TestConflictResolveInEditor(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	d, src, theirs := conflictSetup(t)
	d.keys("t") // region 1 theirs, region 2 left open
	d.keys("e")
	files, _ := filepath.Glob(filepath.Join(os.Getenv("TMPDIR"), "strata-conflict-*-a.txt"))
	if len(files) != 1 {
		t.Fatalf("temp files %v", files)
	}
	b, _ := os.ReadFile(files[0])
	if text := string(b); !strings.Contains(text, "line 2 from the source\n") || strings.Contains(text, "line two") ||
		!strings.Contains(text, "<<<<<<< ours\nline fifteen\n") {
		t.Fatalf("editor got:\n%s", text)
	}
	// The editor the program would exec; this one leaves the markers in.
	editor := func(script string) {
		t.Setenv("EDITOR", "sed -i "+script)
		argv := append(editorArgv(), files[0])
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", argv, err, out)
		}
		d.send(conflictEditorDoneMsg{world: "w1", path: "a.txt", file: files[0]})
	}
	editor("s/^line.fifteen$/line_15_by_hand/")
	if !strings.Contains(d.m.lastErr, "conflict markers remain") {
		t.Fatalf("markers accepted: %q", d.m.lastErr)
	}
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Error("the scratch file was left behind")
	}
	d.keys("enter")
	if d.m.conflicts() == nil || readSource(t, src) != theirs {
		t.Fatal("applied a resolution holding markers")
	}
	// Edit again: the text comes back as edited; remove the markers.
	d.keys("e")
	files, _ = filepath.Glob(filepath.Join(os.Getenv("TMPDIR"), "strata-conflict-*-a.txt"))
	if len(files) != 1 {
		t.Fatalf("temp files %v", files)
	}
	editor("-e /^<<<<<<</d -e /^|||||||/,/^=======/d -e /^>>>>>>>/d -e /^line.15.from.the.source$/d")
	if d.m.lastErr != "" || !d.m.conflicts().Edited(0) {
		t.Fatalf("clean edit: %q", d.m.lastErr)
	}
	d.keys("enter")
	want := strings.Replace(threeHunks(), "line 2\n", "line 2 from the source\n", 1)
	want = strings.Replace(want, "line 15\n", "line_15_by_hand\n", 1)
	want = strings.Replace(want, "line 28\n", "line twenty-eight\n", 1)
	if got := readSource(t, src); got != want {
		t.Fatalf("source after the edit:\n%s\nwant:\n%s", got, want)
	}
}

// A resolution is published only against the source it was made for: if
// the source changes again, the apply conflicts anew.
func TestConflictSourceMovedOn(t *testing.T) {
	d, src, _ := conflictSetup(t)
	d.keys("o", "o")
	moved := strings.Replace(readSource(t, src), "line 5\n", "line 5 moved on\n", 1)
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	d.keys("enter")
	if d.m.conflicts() == nil || !strings.Contains(d.screen(), "the source changed again") {
		t.Fatalf("no new conflict:\n%s", d.screen())
	}
	if readSource(t, src) != moved {
		t.Fatal("the source was overwritten")
	}
}

// A publication that changed what was picked says so where the person looks:
// a setuid bit the World set is stripped, and the status line tells.
func TestApplyWarningShown(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w1", "printf '#!/bin/sh\\n' > tool && chmod 4755 tool")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("3", "space", "a", "enter")
	if d.m.lastErr != "" {
		t.Fatalf("apply: %s\n%s", d.m.lastErr, d.screen())
	}
	if !strings.Contains(d.m.info, "applied 1 path from w1 · warning: ") || !strings.Contains(d.m.info, "setuid") {
		t.Fatalf("status after an apply that stripped setuid: %q", d.m.info)
	}
	st, err := os.Stat(filepath.Join(src, "tool"))
	if err != nil || st.Mode()&os.ModeSetuid != 0 {
		t.Fatalf("tool in the source: %v %v", st.Mode(), err)
	}
}
