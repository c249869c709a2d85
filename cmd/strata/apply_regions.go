package main

import (
	"fmt"

	"github.com/stratahq/strata/diffview"
)

// conflictWhere says where a conflicting region lies in the base, as the
// TUI's conflict view does: "base lines 3-5", "base line 4", or for two
// insertions at one place (an empty base range) "after base line 13" ("at
// the start" before line 1) instead of "base lines 14-13".
func conflictWhere(r diffview.Conflict) string {
	switch {
	case r.BaseEnd <= r.BaseStart && r.BaseStart == 0:
		return "at the start of the base: the World and the source both added lines there"
	case r.BaseEnd <= r.BaseStart:
		return fmt.Sprintf("after base line %d: the World and the source both added lines there", r.BaseStart)
	case r.BaseEnd == r.BaseStart+1:
		return fmt.Sprintf("base line %d: the World and the source both changed it", r.BaseEnd)
	}
	return fmt.Sprintf("base lines %d-%d: the World and the source both changed them", r.BaseStart+1, r.BaseEnd)
}
