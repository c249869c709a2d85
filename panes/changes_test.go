package panes

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/overlay"
)

// bigDeletion is a deleted directory listing its 1,000 lower files, as
// overlay.ReadChanges reports it, next to one modified file.
func bigDeletion() []overlay.Change {
	cs := []overlay.Change{{Path: "README.md", Kind: overlay.Modified, Type: overlay.TypeFile}}
	cs = append(cs, overlay.Change{Path: "vendor", Kind: overlay.Deleted, Type: overlay.TypeDir, LowerType: overlay.TypeDir, Whiteout: true})
	for i := range 1000 {
		cs = append(cs, overlay.Change{Path: fmt.Sprintf("vendor/f%04d.go", i), Kind: overlay.Deleted, Type: overlay.TypeFile, LowerType: overlay.TypeFile, Whiteout: true})
	}
	return cs
}

// In the tree, a deleted directory is one row with its files under it;
// picking it picks (and counts) its files; it folds to one row.
func TestChangesDeletedDirectory(t *testing.T) {
	p := NewChanges(testEnv(t, "dark")).SetSize(0, 20)
	p, _ = p.SetChanges("w", bigDeletion(), nil)
	p, _ = p.Do(keymap.ChangesTree)
	out := ansiStrip(p.View(80, 20, true))
	if n := strings.Count(out, "vendor/"); n != 1 {
		t.Fatalf("vendor/ shows %d times:\n%s", n, out)
	}
	for p.Selected() != "vendor" {
		p, _ = p.Do(keymap.ChangesDown)
	}
	_, cmd := p.Do(keymap.ChangesPick)
	m := run(cmd).(PickPathsMsg)
	if len(m.Paths) != 1001 {
		t.Fatalf("picking the directory picks %d paths", len(m.Paths))
	}
	picks := map[string]PickState{}
	for _, path := range m.Paths {
		picks[path] = PickAll
	}
	p = p.SetPicks(picks)
	if head := strings.Split(ansiStrip(p.View(80, 20, true)), "\n")[0]; !strings.Contains(head, "1,000 picked") {
		t.Errorf("header: %q", head)
	}
	p, _ = p.Do(keymap.ChangesFold)
	if len(p.rows) != 2 || p.Selected() != "vendor" {
		t.Errorf("folded: %d rows, cursor on %q", len(p.rows), p.Selected())
	}
}

// z folds a deleted directory in the flat list too (the view the pane
// opens in), and a path that sorts between the directory and its files
// ("vendor-notes.txt" between "vendor" and "vendor/…") neither splits the
// fold nor gives the directory a second row in the tree.
func TestChangesFoldFlatAndInterleaved(t *testing.T) {
	cs := bigDeletion()
	cs = append(cs[:2], append([]overlay.Change{{Path: "vendor-notes.txt", Kind: overlay.Added, Type: overlay.TypeFile}}, cs[2:]...)...)
	p := NewChanges(testEnv(t, "dark")).SetSize(0, 20)
	p, _ = p.SetChanges("w", cs, nil)
	for p.Selected() != "vendor" {
		p, _ = p.Do(keymap.ChangesDown)
	}
	p, _ = p.Do(keymap.ChangesFold)
	out := ansiStrip(p.View(80, 20, true))
	if len(p.rows) != 3 || !strings.Contains(out, "D vendor/  ⊘ whiteout  ▸ 1,000 rows folded (z)") || !strings.Contains(out, "A vendor-notes.txt") || p.Selected() != "vendor" {
		t.Fatalf("flat fold: %d rows, cursor on %q:\n%s", len(p.rows), p.Selected(), out)
	}
	p, _ = p.Do(keymap.ChangesFold)
	if len(p.rows) != len(cs) {
		t.Fatalf("flat unfold: %d rows, want %d", len(p.rows), len(cs))
	}
	p, _ = p.Do(keymap.ChangesTree)
	if n := strings.Count(ansiStrip(p.View(80, 20, true)), "vendor/"); n != 1 {
		t.Errorf("tree: vendor/ shows %d times:\n%s", n, ansiStrip(p.View(80, 20, true)))
	}
}
