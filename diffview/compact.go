package diffview

// This file ports xdiff's xdl_change_compact (git, without the indent
// heuristic, which `git merge-file` does not use). go-diff and xdiff may
// place an ambiguous change group differently (inserting a line equal to its
// neighbour can be shown above or below it); sliding every group the way
// xdiff does makes hunks look like git's and makes Merge3 see the same
// change boundaries as `git merge-file`.

type compactFile struct {
	ids     []int32
	changed []bool // changed[i+1] is line i; index 0 and n+1 are sentinels
}

func (f *compactFile) isChanged(i int) bool { return f.changed[i+1] }
func (f *compactFile) set(i int, v bool)    { f.changed[i+1] = v }
func (f *compactFile) n() int               { return len(f.ids) }

type lineGroup struct{ start, end int }

func (f *compactFile) groupInit(g *lineGroup) {
	g.start, g.end = 0, 0
	for f.isChanged(g.end) {
		g.end++
	}
}

func (f *compactFile) groupNext(g *lineGroup) bool {
	if g.end == f.n() {
		return false
	}
	g.start = g.end + 1
	g.end = g.start
	for f.isChanged(g.end) {
		g.end++
	}
	return true
}

func (f *compactFile) groupPrevious(g *lineGroup) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	g.start = g.end
	for f.isChanged(g.start - 1) {
		g.start--
	}
	return true
}

func (f *compactFile) slideDown(g *lineGroup) bool {
	if g.end < f.n() && f.ids[g.start] == f.ids[g.end] {
		f.set(g.start, false)
		g.start++
		f.set(g.end, true)
		g.end++
		for f.isChanged(g.end) {
			g.end++
		}
		return true
	}
	return false
}

func (f *compactFile) slideUp(g *lineGroup) bool {
	if g.start > 0 && f.ids[g.start-1] == f.ids[g.end-1] {
		g.start--
		f.set(g.start, true)
		g.end--
		f.set(g.end, false)
		for f.isChanged(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}

// compact slides the change groups of one side (ids, changed) down as far as
// they go, merging groups that meet, then back up to line up with a change
// group of the other side when one is in reach. changed slices are updated
// in place.
func compact(ids []int32, changed []bool, otherIDs []int32, otherChanged []bool) {
	f := &compactFile{ids: ids, changed: withSentinels(changed)}
	o := &compactFile{ids: otherIDs, changed: withSentinels(otherChanged)}
	var g, og lineGroup
	f.groupInit(&g)
	o.groupInit(&og)
	for {
		if g.end != g.start {
			var earliestEnd int
			endMatchingOther := -1
			for {
				size := g.end - g.start
				endMatchingOther = -1
				for f.slideUp(&g) {
					mustSync(o.groupPrevious(&og))
				}
				earliestEnd = g.end
				if og.end > og.start {
					endMatchingOther = g.end
				}
				for f.slideDown(&g) {
					mustSync(o.groupNext(&og))
					if og.end > og.start {
						endMatchingOther = g.end
					}
				}
				if size == g.end-g.start {
					break
				}
			}
			if g.end != earliestEnd && endMatchingOther != -1 {
				for og.end == og.start {
					mustSync(f.slideUp(&g))
					mustSync(o.groupPrevious(&og))
				}
			}
		}
		if !f.groupNext(&g) {
			break
		}
		mustSync(o.groupNext(&og))
	}
	copy(changed, f.changed[1:len(f.changed)-1])
	copy(otherChanged, o.changed[1:len(o.changed)-1])
}

func withSentinels(changed []bool) []bool {
	out := make([]bool, len(changed)+2)
	copy(out[1:], changed)
	return out
}

// mustSync guards the invariant that unchanged lines of both sides pair up
// one to one; breaking it is a bug in this package, not bad input.
func mustSync(ok bool) {
	if !ok {
		panic("diffview: change groups out of sync")
	}
}
