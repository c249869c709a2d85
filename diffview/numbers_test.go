package diffview

import (
	"fmt"
	"strings"
	"testing"
)

// Hunk numbers are counted in the default-context diff whatever context a
// diff is shown with: merged hunks name all they hold, split ones repeat.
func TestHunkNumbersAcrossContexts(t *testing.T) {
	var a, b strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&a, "%d\n", i)
		switch i {
		case 3, 20, 23, 37: // 20 and 23 share a hunk with 3 lines of context
			fmt.Fprintf(&b, "x%d\n", i)
		default:
			fmt.Fprintf(&b, "%d\n", i)
		}
	}
	numbered := Diff(a.String(), b.String(), Options{})
	if len(numbered.Hunks) != 3 {
		t.Fatalf("%d hunks", len(numbered.Hunks))
	}
	cases := []struct {
		ctx  int
		want string
	}{
		{0, "[[1] [2] [2] [3]]"}, // without context hunk 2 splits: both halves are hunk 2
		{12, "[[1 2 3]]"},
		{3, "[[1] [2] [3]]"},
	}
	for _, c := range cases {
		ctx := c.ctx
		if ctx == 0 {
			ctx = -1
		}
		got := fmt.Sprint(HunkNumbers(Diff(a.String(), b.String(), Options{Context: ctx}), numbered))
		if got != c.want {
			t.Errorf("context %d: %s, want %s", c.ctx, got, c.want)
		}
	}
	for nums, want := range map[string]string{"": "", "2": "hunk 2", "2,3": "hunks 2-3", "1,3": "hunks 1,3"} {
		var ns []int
		if nums != "" {
			var err error
			if ns, err = ParseHunkNumbers(nums); err != nil {
				t.Fatal(err)
			}
		}
		if got := HunkLabel(ns); got != want {
			t.Errorf("HunkLabel(%v) = %q, want %q", ns, got, want)
		}
	}
}
