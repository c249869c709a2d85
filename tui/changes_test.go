package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Picking a deleted directory in the tree picks its files, says how many,
// and applying it removes the directory from the source.
func TestPickDeletedDirectoryApplies(t *testing.T) {
	files := map[string]string{"keep.txt": "k\n"}
	for _, n := range []string{"a", "b", "c"} {
		files["old/"+n+".txt"] = n + "\n"
	}
	eng, src := testEngine(t, files)
	newWorld(t, eng, src, "w1", "rm -rf old")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("3", "t")
	d.selectChange("old")
	if n := strings.Count(d.screen(), "old/"); n != 1 {
		t.Fatalf("old/ shows %d times:\n%s", n, d.screen())
	}
	d.keys("space")
	if !strings.Contains(d.screen(), "3 picked") {
		t.Fatalf("picking the directory does not count its files:\n%s", d.screen())
	}
	d.keys("a")
	if d.m.dialog() == nil {
		t.Fatalf("no apply dialog: %q\n%s", d.m.lastErr, d.screen())
	}
	d.keys("enter")
	if d.m.lastErr != "" {
		t.Fatalf("apply: %s", d.m.lastErr)
	}
	if _, err := os.Stat(filepath.Join(src, "old")); !os.IsNotExist(err) {
		t.Errorf("old/ still in the source: %v", err)
	}
	if _, err := os.Stat(filepath.Join(src, "keep.txt")); err != nil {
		t.Errorf("keep.txt: %v", err)
	}
}

// A file renamed in a World reads as a rename in the Changes pane, on both
// its rows, as strata status shows it: the deleted row says where the
// content went, so picking it alone is not a silent delete.
func TestChangesShowRenames(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"README.md": "# title\n\nsome text\nmore text\n", "other.txt": "o\n"})
	newWorld(t, eng, src, "w1", "mv README.md READ.md && rm other.txt && echo new > new.txt")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("3")
	scr := d.screen()
	for _, want := range []string{"D README.md  ⊘ whiteout · renamed to READ.md", "A READ.md  renamed from README.md"} {
		if !strings.Contains(scr, want) {
			t.Errorf("Changes pane lacks %q:\n%s", want, scr)
		}
	}
	if strings.Contains(scr, "other.txt  ⊘ whiteout · renamed") || strings.Contains(scr, "new.txt  renamed") {
		t.Errorf("an unrelated delete and add read as a rename:\n%s", scr)
	}
}
