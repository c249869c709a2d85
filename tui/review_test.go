package tui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"
	"github.com/stratahq/strata/third_party/teatest"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/panes"
)

func captureBases(t *testing.T, eng *engine.Engine, world string) {
	t.Helper()
	ctx := context.Background()
	w, err := eng.World(world)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := eng.Changes(ctx, w, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CaptureBases(ctx, w, cs); err != nil {
		t.Fatal(err)
	}
}

func hunkTexts(fd *diffview.FileDiff) []string {
	var out []string
	for _, h := range fd.Hunks {
		var b strings.Builder
		b.WriteString(h.Header + "\n")
		for _, l := range h.Lines {
			b.WriteString(string(l.Op.Marker()) + l.Text + "\n")
		}
		out = append(out, b.String())
	}
	return out
}

// TestTeaDriftedSourceReviewAndApply: the source drifts under a World (a
// teammate edits it after the World's base was captured). The Diff pane
// shows the same hunks as strata diff (base vs World, not the teammate's
// line as a deletion), marks the drift, o shows the World against the
// source now, the dialog says what will happen, and the hunk picked in the
// pane lands as the 3-way merge.
func TestTeaDriftedSourceReviewAndApply(t *testing.T) {
	base := threeHunks()
	eng, src := testEngine(t, map[string]string{"a.txt": base})
	newWorld(t, eng, src, "w1", editThree)
	captureBases(t, eng, "w1")
	theirs := strings.Replace(base, "line 8\n", "teammate 8\n", 1)
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	fcs, err := eng.Diff(context.Background(), "w1", engine.DiffOptions{})
	if err != nil || len(fcs) != 1 || !fcs[0].Drift {
		t.Fatalf("strata diff: %v %+v", err, fcs)
	}

	m, err := New(context.Background(), eng, Options{Source: src, Exe: "/bin/false", NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	tm := teatest.NewTestModel(t, *m, teatest.WithInitialTermSize(120, 40))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Forward(ctx, eng, tm.GetProgram()); err != nil {
		t.Fatal(err)
	}
	waitScreen := newTeaScreen(t, tm, 120, 40).wait
	waitScreen("a.txt")
	tm.Send(tea.KeyPressMsg{Code: '4', Text: "4"})
	waitScreen("line fifteen", "source changed since the World's base: apply will merge")
	tm.Send(tea.KeyPressMsg{Code: 'o', Text: "o"})
	waitScreen("teammate 8", "against the source now: view only")
	tm.Send(tea.KeyPressMsg{Code: 'o', Text: "o"})
	tm.Send(tea.KeyPressMsg{Code: 'l', Text: "l"})
	tm.Send(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	waitScreen("picked 1/3 hunks")
	tm.Send(tea.KeyPressMsg{Code: 'a', Text: "a"})
	waitScreen("Apply to the source?", "Publish 1 file from w1", "merge a.txt (1 of 3 hunks)", "1 file is 3-way merged")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	waitScreen("applied 1 path from w1")
	tm.Send(tea.KeyPressMsg{Code: 'q', Text: "q"})
	final := tm.FinalModel(t, teatest.WithFinalTimeout(teaScreenWait)).(Model)

	got, err := os.ReadFile(filepath.Join(src, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(theirs, "line 15\n", "line fifteen\n", 1); string(got) != want {
		t.Fatalf("source holds:\n%s\nwant the 3-way result:\n%s", got, want)
	}
	if scr := ansi.Strip(final.Render()); !strings.Contains(scr, "applied 1 path from w1") {
		t.Errorf("final screen:\n%s", scr)
	}
}

// The pane's hunks are the engine's, the same value strata diff prints,
// and the picks it hands to apply carry the versions they were made on.
func TestDiffPaneShowsTheEnginesDiffUnderDrift(t *testing.T) {
	base := threeHunks()
	eng, src := testEngine(t, map[string]string{"a.txt": base})
	newWorld(t, eng, src, "w1", editThree)
	captureBases(t, eng, "w1")
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte(strings.Replace(base, "line 8\n", "teammate 8\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	fcs, err := eng.Diff(context.Background(), "w1", engine.DiffOptions{})
	if err != nil || len(fcs) != 1 {
		t.Fatal(err)
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false", NoColor: true}, 80, 24)
	d.keys("3")
	d.selectChange("a.txt")
	d.keys("enter")
	pane := d.m.diff
	if pane.FileDiff() == nil || !reflect.DeepEqual(hunkTexts(pane.FileDiff()), hunkTexts(fcs[0].Diff)) {
		t.Fatalf("the pane's hunks are not strata diff's:\npane %q\ncli  %q", hunkTexts(pane.FileDiff()), hunkTexts(fcs[0].Diff))
	}
	// The hunk header rows read as strata diff prints them: "@@ ... @@ hunk N".
	var paneHeaders, cliHeaders []string
	for _, l := range strings.Split(ansi.Strip(pane.SetSize(120, 200).View(120, 200, false)), "\n") {
		if i := strings.Index(l, "@@ "); i >= 0 {
			paneHeaders = append(paneHeaders, strings.TrimSpace(l[i:]))
		}
	}
	for _, l := range strings.Split(engine.Patch(fcs), "\n") {
		if strings.HasPrefix(l, "@@ ") {
			cliHeaders = append(cliHeaders, l)
		}
	}
	if len(cliHeaders) != 3 || !reflect.DeepEqual(paneHeaders, cliHeaders) {
		t.Fatalf("hunk headers: pane %q, strata diff %q", paneHeaders, cliHeaders)
	}
	if scr := d.screen(); strings.Contains(scr, "teammate") || !strings.Contains(scr, "source changed since the World's base") {
		t.Fatalf("80x24 screen:\n%s", scr)
	}
	d.keys("l", "space")
	picks := d.m.applyPicks()
	if len(picks) != 1 || picks[0].BaseHash != fcs[0].BaseHash || picks[0].WorldHash != fcs[0].WorldHash || fmt.Sprint(picks[0].Hunks) != "[2]" {
		t.Fatalf("picks %+v, want hunk 2 with base %s world %s", picks, fcs[0].BaseHash, fcs[0].WorldHash)
	}
	// The dialog, at 80x24, says what will happen.
	d.keys("a")
	if scr := d.screen(); d.m.dialog() == nil || !strings.Contains(scr, "merge a.txt (1 of 3 hunks)") || !strings.Contains(scr, "Publish 1 file from w1") {
		t.Fatalf("80x24 dialog:\n%s", scr)
	}
	for i, l := range strings.Split(d.screen(), "\n") {
		if ansiWidth(l) > 80 || i >= 24 {
			t.Fatalf("the screen overflows 80x24 at line %d: %q", i, l)
		}
	}
	d.keys("esc")
	// A session rewrites the file between the pick and the apply: refused,
	// nothing written, and the status says which side moved.
	runIn(t, eng, "w1", `sed -i 's/^line fifteen$/line FIFTEEN/' a.txt`)
	before, _ := os.ReadFile(filepath.Join(src, "a.txt"))
	d.send(applyReq{world: "w1", picks: picks})
	after, _ := os.ReadFile(filepath.Join(src, "a.txt"))
	if !bytes.Equal(before, after) || !strings.Contains(d.m.lastErr, "the World's file changed since the hunks were picked") {
		t.Fatalf("stale pick: lastErr %q, source changed %v", d.m.lastErr, !bytes.Equal(before, after))
	}
	// Once the pane sees the new version, the stale pick is dropped and the
	// person is told.
	d.keys("ctrl+r")
	if len(d.m.applyPicks()) != 0 || !strings.Contains(d.m.info, "a.txt changed since its hunks were picked") {
		t.Fatalf("after the reload: picks %+v, info %q", d.m.applyPicks(), d.m.info)
	}
}

// The confirm dialog counts what apply will do, from a dry run on the
// real engine: a deleted directory by its files, a file by its hunks.
func TestApplyDialogCountsWhatItWillDo(t *testing.T) {
	files := map[string]string{"a.txt": threeHunks()}
	for i := 0; i < 1061; i++ {
		files[fmt.Sprintf("internal/p%d/f%04d.go", i%7, i)] = "package p\n"
	}
	eng, src := testEngine(t, files)
	newWorld(t, eng, src, "w1", editThree+" && rm -rf internal && echo new > b.txt")
	captureBases(t, eng, "w1")
	fcs, err := eng.Diff(context.Background(), "w1", engine.DiffOptions{Paths: []string{"a.txt"}})
	if err != nil || len(fcs) != 1 {
		t.Fatal(err)
	}
	sel := diffview.NewSelection(fcs[0].Diff, false)
	_ = sel.ToggleHunk(0)
	_ = sel.ToggleHunk(2)
	picks := []applyPick{
		{Path: "a.txt", Sel: sel, Hunks: []int{1, 3}, HunkCount: 3, BaseHash: fcs[0].BaseHash, WorldHash: fcs[0].WorldHash},
		{Path: "b.txt"},
		{Path: "internal"},
	}
	res, paths, err := enginePreview(context.Background(), eng, "w1", picks)
	if err != nil || len(res.Conflicts) > 0 {
		t.Fatalf("preview: %v %+v", err, res)
	}
	w, _ := eng.World("w1")
	cs, err := eng.Changes(context.Background(), w, false)
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, c := range cs.Changes {
		changed = append(changed, c.Path)
	}
	title, lines, _ := applySummary("w1", picks, paths, changed)
	want := []string{"  write a.txt (2 of 3 hunks)", "  write b.txt", "  delete internal/ — 1,061 files"}
	if !reflect.DeepEqual(lines, want) || !strings.HasPrefix(title, "Publish 1,063 files and ") || !strings.Contains(title, "directories from w1 to its source, all or nothing") {
		t.Fatalf("dialog:\n%s\n%s", title, strings.Join(lines, "\n"))
	}
	// The Changes pane picks a directory as every path under it: the
	// dialog still names the directory. One path left out: no grouping.
	var each []applyPick
	for _, c := range changed {
		if strings.HasPrefix(c, "internal/") || c == "internal" {
			each = append(each, applyPick{Path: c})
		}
	}
	_, paths, err = enginePreview(context.Background(), eng, "w1", each)
	if err != nil {
		t.Fatal(err)
	}
	if _, lines, _ = applySummary("w1", each, paths, changed); !reflect.DeepEqual(lines, []string{"  delete internal/ — 1,061 files"}) {
		t.Fatalf("per-path picks of a directory: %q", lines)
	}
	// One file not picked: the directories above it are not sent as picks
	// (to the engine a directory means everything below), so it stays.
	sort.Strings(changed)
	unpicked := "internal/p3/f0003.go"
	var most []applyPick
	for _, p := range each {
		if p.Path != unpicked && !partlyPicked(p.Path, changed, func(c string) bool { return c != unpicked }) {
			most = append(most, p)
		}
	}
	_, paths, err = enginePreview(context.Background(), eng, "w1", most)
	if err != nil {
		t.Fatal(err)
	}
	for _, ap := range paths {
		if ap.Path == unpicked || ap.Path == "internal" || ap.Path == "internal/p3" {
			t.Fatalf("the preview would publish %s (%s), which is not picked", ap.Path, ap.Action)
		}
	}
	if _, lines, _ = applySummary("w1", most, paths, changed); len(lines) != 7 || lines[0] != "  delete internal/p0/ — 152 files" || lines[3] != "  delete internal/p3/ — 151 files (1 path not picked stays in the World)" {
		t.Fatalf("a directory with one path not picked: %q", lines)
	}
	if _, err := os.Stat(filepath.Join(src, "internal")); err != nil {
		t.Fatal("the preview wrote the source")
	}
	// Plurals: one of each.
	title, lines, _ = applySummary("w1", picks[1:2], []engine.AppliedPath{{Path: "b.txt", Action: "write"}}, changed)
	if title != "Publish 1 file from w1 to its source, all or nothing:" || ansi.Strip(lines[0]) != "  write b.txt" {
		t.Fatalf("one file: %q %q", title, lines)
	}
}

// A directory picked from the list, then one file under it unpicked: the
// engine reads a directory pick as everything below it, so the TUI must
// not send it, or the unpicked file lands too.
func TestUnpickedFileUnderPickedDirectoryStays(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"gen/a.txt": "a\n", "gen/b.txt": "b\n", "gen/c.txt": "c\n", "keep.txt": "k\n"})
	newWorld(t, eng, src, "w1", "rm -rf gen")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false", NoColor: true}, 120, 40)
	var all []string
	for _, c := range d.m.changes.All() {
		all = append(all, c.Path)
	}
	if len(all) != 4 {
		t.Fatalf("changes %v", all)
	}
	d.send(panes.PickPathsMsg{World: "w1", Paths: all, Pick: true})
	d.send(panes.PickPathsMsg{World: "w1", Paths: []string{"gen/b.txt"}, Pick: false})
	picks := d.m.applyPicks()
	for _, p := range picks {
		if p.Path == "gen" || p.Path == "gen/b.txt" {
			t.Fatalf("picks %+v send %s", picks, p.Path)
		}
	}
	d.send(applyReq{world: "w1", picks: picks})
	if d.m.lastErr != "" {
		t.Fatal(d.m.lastErr)
	}
	for name, want := range map[string]bool{"gen/a.txt": false, "gen/b.txt": true, "gen/c.txt": false} {
		if _, err := os.Stat(filepath.Join(src, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
}

// A file picked whole from the list, never opened, is bound to the version
// it was picked at: a session writing it afterwards makes apply refuse.
func TestListPickIsBoundToItsVersion(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"x.txt": "x\n", "y.txt": "y\n"})
	newWorld(t, eng, src, "w1", "echo x2 > x.txt; echo y2 > y.txt")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false", NoColor: true}, 120, 40)
	if f := d.m.diff.File(); f.Path == "y.txt" {
		t.Fatal("the fixture wants y.txt not on screen")
	}
	d.send(panes.PickPathsMsg{World: "w1", Paths: []string{"y.txt"}, Pick: true})
	pk := d.m.picks["y.txt"]
	if pk == nil || pk.baseHash != sha256hex("y\n") || pk.worldHash != sha256hex("y2\n") {
		t.Fatalf("pick %+v not bound to base and World", pk)
	}
	runIn(t, eng, "w1", "echo not-reviewed > y.txt")
	d.send(applyReq{world: "w1", picks: d.m.applyPicks()})
	if got, _ := os.ReadFile(filepath.Join(src, "y.txt")); string(got) != "y\n" || !strings.Contains(d.m.lastErr, "y.txt: the World's file changed since it was picked") {
		t.Fatalf("source y.txt %q, status %q", got, d.m.lastErr)
	}
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
