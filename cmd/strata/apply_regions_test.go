package main

import (
	"testing"

	"github.com/stratahq/strata/diffview"
)

// Both sides appending at the end of a 13-line file used to print "base
// lines 14-13".
func TestConflictWhere(t *testing.T) {
	for _, tc := range []struct {
		start, end int
		want       string
	}{
		{13, 13, "after base line 13: the World and the source both added lines there"},
		{0, 0, "at the start of the base: the World and the source both added lines there"},
		{3, 4, "base line 4: the World and the source both changed it"},
		{2, 5, "base lines 3-5: the World and the source both changed them"},
	} {
		if got := conflictWhere(diffview.Conflict{BaseStart: tc.start, BaseEnd: tc.end}); got != tc.want {
			t.Errorf("conflictWhere(%d, %d) = %q, want %q", tc.start, tc.end, got, tc.want)
		}
	}
}
