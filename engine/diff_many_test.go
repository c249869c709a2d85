package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
)

// TestDiffManyChangesInOrder: a diff of many changed files (read and
// diffed in parallel) lists every changed file once, in the changes'
// order, each with its own counts; a file copied up unchanged and a
// directory carry no entry.
func TestDiffManyChangesInOrder(t *testing.T) {
	ctx := context.Background()
	e, src := testEngine(t)
	const n = 600
	for i := range n {
		writeFile(t, filepath.Join(src, fmt.Sprintf("m/d%02d/f%03d.txt", i%7, i)), fmt.Sprintf("line 1\nline 2 of %d\nline 3\n", i))
	}
	merged := mountedWorld(t, e, src, "w")
	want := map[string][2]int{}
	for i := range n {
		p := fmt.Sprintf("m/d%02d/f%03d.txt", i%7, i)
		switch i % 3 {
		case 0: // one line changed
			writeFile(t, filepath.Join(merged, p), fmt.Sprintf("line 1\nline 2 of %d, edited\nline 3\n", i))
			want[p] = [2]int{1, 1}
		case 1: // i+1 lines added
			body := fmt.Sprintf("line 1\nline 2 of %d\nline 3\n", i)
			for j := 0; j <= i%5; j++ {
				body += fmt.Sprintf("added %d\n", j)
			}
			writeFile(t, filepath.Join(merged, p), body)
			want[p] = [2]int{i%5 + 1, 0}
		case 2: // copied up with the same content: no change to show
			if i%2 == 0 {
				writeFile(t, filepath.Join(merged, p), fmt.Sprintf("line 1\nline 2 of %d\nline 3\n", i))
			}
		}
	}
	writeFile(t, filepath.Join(merged, "new/dir/added.txt"), "a\nb\n")
	want["new/dir/added.txt"] = [2]int{2, 0}
	fcs, err := e.Diff(ctx, "w", DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fc := range fcs {
		got = append(got, fc.Path)
		w, ok := want[fc.Path]
		if !ok {
			t.Errorf("%s: in the diff, but the World did not change it (%s +%d -%d)", fc.Path, fc.Kind, fc.Added, fc.Removed)
			continue
		}
		if fc.Added != w[0] || fc.Removed != w[1] {
			t.Errorf("%s: +%d -%d, want +%d -%d", fc.Path, fc.Added, fc.Removed, w[0], w[1])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d files in the diff, want %d", len(got), len(want))
	}
	if !sort.StringsAreSorted(got) {
		t.Errorf("the diff is not in path order: %v", got)
	}
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Errorf("%s: twice in the diff", p)
		}
		seen[p] = true
	}
}
