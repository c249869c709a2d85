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

// treeChanges are the changes of a World over the source and a "game"
// tree, as FlatChanges reports them: byte order puts "game:…" among the
// source's paths ("engine/…" < "game:…" < "zlib/…").
func treeChanges() []overlay.Change {
	f := func(k overlay.Kind, path string) overlay.Change {
		return overlay.Change{Path: path, Kind: k, Type: overlay.TypeFile}
	}
	return []overlay.Change{
		f(overlay.Modified, "engine/core.cpp"),
		f(overlay.Added, "game:Content/map.umap"),
		f(overlay.Modified, "game:Source/game.cpp"),
		f(overlay.Added, "game:readme.txt"),
		f(overlay.Modified, "zlib/inflate.c"),
	}
}

// In the tree view each extra tree has its own heading after the source's
// paths, its paths under it without the NAME: prefix; a tree's heading
// folds the whole tree and picks every path of it and nothing else.
func TestChangesTreeGroupsExtraTrees(t *testing.T) {
	p := NewChanges(testEnv(t, "dark")).SetSize(0, 24)
	p, _ = p.SetTrees([]string{"game"}).SetChanges("w", treeChanges(), nil)
	p, _ = p.Do(keymap.ChangesTree)
	out := ansiStrip(p.View(80, 24, true))
	var got []string
	for _, l := range strings.Split(out, "\n")[1:] {
		if l = strings.TrimRight(l, " "); l != "" {
			got = append(got, l)
		}
	}
	want := []string{
		"  ▾ source (main)",
		"    ▾ engine/",
		"      M core.cpp",
		"    ▾ zlib/",
		"      M inflate.c",
		"  ▾ game:",
		"    ▾ Content/",
		"      A map.umap",
		"    ▾ Source/",
		"      M game.cpp",
		"    A readme.txt",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tree view at 80x24:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v := p.Visible(); strings.Join(v, ",") != "engine/core.cpp,zlib/inflate.c,game:Content/map.umap,game:Source/game.cpp,game:readme.txt" {
		t.Errorf("visible order: %v", v)
	}
	// Pick on the game: heading picks the game tree's paths only.
	for p.list.Cursor = 0; p.rows[p.list.Cursor].dir != "game:"; p.list.Cursor++ {
	}
	_, cmd := p.Do(keymap.ChangesPick)
	m := run(cmd).(PickPathsMsg)
	if strings.Join(m.Paths, ",") != "game:Content/map.umap,game:Source/game.cpp,game:readme.txt" {
		t.Errorf("picking game: picks %v", m.Paths)
	}
	// Pick on the source's heading picks the source's paths only.
	p.list.Cursor = 0
	_, cmd = p.Do(keymap.ChangesPick)
	if m := run(cmd).(PickPathsMsg); strings.Join(m.Paths, ",") != "engine/core.cpp,zlib/inflate.c" {
		t.Errorf("picking the source picks %v", m.Paths)
	}
	// Folding the game: heading hides its 5 rows; pick still takes them.
	for p.list.Cursor = 0; p.rows[p.list.Cursor].dir != "game:"; p.list.Cursor++ {
	}
	p, _ = p.Do(keymap.ChangesFold)
	out = ansiStrip(p.View(80, 24, true))
	if !strings.Contains(out, "▸ game:  ▸ 5 rows folded (z)") || strings.Contains(out, "map.umap") || len(p.rows) != 6 {
		t.Fatalf("folded game: (%d rows):\n%s", len(p.rows), out)
	}
	_, cmd = p.Do(keymap.ChangesPick)
	if m := run(cmd).(PickPathsMsg); len(m.Paths) != 3 {
		t.Errorf("picking folded game: picks %v", m.Paths)
	}
	// Folding the source keeps the game tree shown.
	p.list.Cursor = 0
	p, _ = p.Do(keymap.ChangesFold)
	if out := ansiStrip(p.View(80, 24, true)); !strings.Contains(out, "▸ source (main)  ▸ 4 rows folded (z)") || strings.Contains(out, "core.cpp") {
		t.Errorf("folded source:\n%s", out)
	}
}
