package diffview

import (
	"strings"
	"testing"
)

// FuzzMerge3 checks the merge invariants on arbitrary inputs; agreement
// with git merge-file is checked by the oracle tests, which keeps fuzzing
// fast.
func FuzzMerge3(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n", "a\nb\nC\n")
	f.Add("a\nb\nc\n", "a\nX\nc\n", "a\nY\nc\n")
	f.Add("", "x", "y")
	f.Add("a\nb", "a\nb\n", "a\nb")
	f.Add("1\n2\n3\n4\n5\n6\n", "1\n2\n3\n4\n5\n6\n7\n", "0\n1\n2\n3\n4\n5\n6\n")
	f.Fuzz(func(t *testing.T, base, ours, theirs string) {
		r := Merge3(base, ours, theirs)
		if r.Clean != (len(r.Conflicts) == 0) {
			t.Fatalf("Clean=%v with %d conflicts", r.Clean, len(r.Conflicts))
		}
		if base == theirs && (!r.Clean || r.Merged != ours) {
			t.Fatalf("theirs unchanged: got %q, want ours %q", r.Merged, ours)
		}
		if base == ours && (!r.Clean || r.Merged != theirs) {
			t.Fatalf("ours unchanged: got %q, want theirs %q", r.Merged, theirs)
		}
		if ours == theirs && (!r.Clean || r.Merged != ours) {
			t.Fatalf("same change on both sides: got %q clean=%v", r.Merged, r.Clean)
		}
		if !r.Clean {
			choices := make([]Choice, len(r.Conflicts))
			for i := range choices {
				choices[i] = ChooseOurs
			}
			// Resolving every conflict with ours keeps every ours-only and
			// theirs-only change, so it is a merge that theirs did not block.
			got, err := r.ResolveWith(choices)
			if err != nil || strings.Contains(got, "<<<<<<< ours\n") && !strings.Contains(base+ours+theirs, "<<<<<<<") {
				t.Fatalf("resolve with ours: %q, %v", got, err)
			}
			for _, c := range r.Conflicts {
				if c.BaseStart > c.BaseEnd || c.OursStart > c.OursEnd || c.TheirsStart > c.TheirsEnd {
					t.Fatalf("bad conflict range %+v", c)
				}
			}
		}
		// Merging is symmetric up to the side names.
		rev := Merge3(base, theirs, ours)
		if rev.Clean != r.Clean || (r.Clean && rev.Merged != r.Merged) {
			t.Fatalf("swapping sides changed the result: %q vs %q", r.Merged, rev.Merged)
		}
	})
}

// FuzzDiffApply: applying every pick gives the new text, none gives the old
// one, and patch writing and layout never panic.
func FuzzDiffApply(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\nd", 3, 40)
	f.Add("", "x\n", 0, 10)
	f.Add("x", "", -1, 1)
	f.Add("\t世界\n🎉\n", "\t世界!\n", 1, 7)
	f.Fuzz(func(t *testing.T, old, nw string, context, width int) {
		fd := Diff(old, nw, Options{Context: context % 50, Force: true})
		all, err := fd.Apply(old, NewSelection(fd, true))
		if err != nil || all != nw {
			t.Fatalf("all picked: %q, %v; want %q", all, err, nw)
		}
		none, err := fd.Apply(old, NewSelection(fd, false))
		if err != nil || none != old {
			t.Fatalf("none picked: %q, %v; want %q", none, err, old)
		}
		_ = UnifiedPatch(PatchFile{OldPath: "a b/\"x\"", NewPath: "a b/\"x\"", OldMode: ModeFile, NewMode: ModeExecutable, Diff: fd})
		width = width % 200
		for _, sbs := range []bool{false, true} {
			for _, r := range Layout(fd, LayoutOptions{Width: width, SideBySide: sbs, Wrap: true, ShowLineNumbers: true}) {
				if width > 0 && r.Width() != width {
					t.Fatalf("row width %d != %d: %q", r.Width(), width, r.Text())
				}
			}
		}
	})
}
