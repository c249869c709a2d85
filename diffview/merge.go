package diffview

import (
	"fmt"
	"strings"
	"time"
)

// mergeTimeout bounds each of the two line diffs of a merge. A diff cut
// short is coarser, which can only turn a clean merge into a conflict,
// never the reverse.
const mergeTimeout = 5 * time.Second

// Conflict is one region where ours and theirs changed the base differently.
// Line slices keep each line's "\n" (the last line of a file may lack it).
type Conflict struct {
	// BaseStart, BaseEnd: the conflicting base lines [start,end), 0-based.
	BaseStart, BaseEnd int
	// OursStart/OursEnd and TheirsStart/TheirsEnd: the same region in
	// each side, 0-based, end exclusive.
	OursStart, OursEnd     int
	TheirsStart, TheirsEnd int
	Base, Ours, Theirs     []string
	// MarkerLine is the 0-based line of Merged holding "<<<<<<<".
	MarkerLine int
}

// MergeResult is the outcome of a three-way merge.
type MergeResult struct {
	// Merged is the merged text; with conflicts it holds git-style diff3
	// markers (<<<<<<< ours, ||||||| base, =======, >>>>>>> theirs).
	Merged    string
	Conflicts []Conflict
	Clean     bool

	// chunks is Merged cut into clean text and conflicts, for ResolveWith.
	chunks []mergeChunk
	opts   MergeOptions
	// structural counts regions both sides changed into the same text
	// through different edits: clean here and in `git merge-file`, but a
	// conflict in `git merge-file --diff3` (which cannot refine). Tests use
	// it to pick the right oracle.
	structural int
}

type mergeChunk struct {
	lines    []string
	conflict int // index into Conflicts, or -1 for clean lines
}

// MergeOptions name the three sides in conflict markers.
type MergeOptions struct {
	OursLabel, BaseLabel, TheirsLabel string
}

// Choice resolves one conflict.
type Choice uint8

const (
	// Unresolved keeps the conflict markers.
	Unresolved Choice = iota
	ChooseOurs
	ChooseTheirs
	// ChooseBoth keeps ours followed by theirs.
	ChooseBoth
	ChooseBase
)

func (c Choice) String() string {
	switch c {
	case Unresolved:
		return "unresolved"
	case ChooseOurs:
		return "ours"
	case ChooseTheirs:
		return "theirs"
	case ChooseBoth:
		return "both"
	case ChooseBase:
		return "base"
	}
	return fmt.Sprintf("Choice(%d)", uint8(c))
}

// Merge3 merges two descendants of base line by line, with git's rules (as
// `git merge-file`): changes by one side are taken; changes by both sides
// that overlap or touch (are adjacent, or insert at the same place) are a
// conflict unless both sides turn that region into the same text.
func Merge3(base, ours, theirs string) MergeResult {
	return Merge3With(base, ours, theirs, MergeOptions{OursLabel: "ours", BaseLabel: "base", TheirsLabel: "theirs"})
}

// Merge3With is Merge3 with custom marker labels.
func Merge3With(base, ours, theirs string, opts MergeOptions) MergeResult {
	b := splitLines(base)
	o := splitLines(ours)
	t := splitLines(theirs)
	co := diffChanges(b, o, mergeTimeout)
	ct := diffChanges(b, t, mergeTimeout)

	res := MergeResult{opts: opts}
	var clean []string
	flush := func() {
		if len(clean) > 0 {
			res.chunks = append(res.chunks, mergeChunk{lines: clean, conflict: -1})
			clean = nil
		}
	}
	pos := 0 // next base line not yet emitted
	i, j := 0, 0
	for i < len(co) || j < len(ct) {
		// Start a region with whichever change begins first in the base.
		var a0, a1 int
		if j >= len(ct) || (i < len(co) && co[i].a0 <= ct[j].a0) {
			a0, a1 = co[i].a0, co[i].a1
		} else {
			a0, a1 = ct[j].a0, ct[j].a1
		}
		oi, tj := i, j
		// Grow it over every change of either side that overlaps or touches
		// it, as xdiff's xdl_do_merge does.
		for {
			switch {
			case i < len(co) && co[i].a0 <= a1:
				a1 = max(a1, co[i].a1)
				i++
			case j < len(ct) && ct[j].a0 <= a1:
				a1 = max(a1, ct[j].a1)
				j++
			default:
				goto grown
			}
		}
	grown:
		clean = append(clean, b[pos:a0]...)
		pos = a1
		oursRegion, os, oe := sideRegion(b, o, co, oi, i, a0, a1)
		theirsRegion, ts, te := sideRegion(b, t, ct, tj, j, a0, a1)
		switch {
		case tj == j:
			clean = append(clean, oursRegion...)
		case oi == i:
			clean = append(clean, theirsRegion...)
		case equalLines(oursRegion, theirsRegion):
			clean = append(clean, oursRegion...)
			if i-oi != 1 || j-tj != 1 || co[oi] != ct[tj] {
				res.structural++
			}
		default:
			flush()
			res.Conflicts = append(res.Conflicts, Conflict{
				BaseStart: a0, BaseEnd: a1,
				OursStart: os, OursEnd: oe,
				TheirsStart: ts, TheirsEnd: te,
				Base: b[a0:a1], Ours: oursRegion, Theirs: theirsRegion,
			})
			res.chunks = append(res.chunks, mergeChunk{conflict: len(res.Conflicts) - 1})
		}
	}
	clean = append(clean, b[pos:]...)
	flush()
	res.Clean = len(res.Conflicts) == 0
	res.Merged = res.render(nil, opts)
	return res
}

// sideRegion returns one side's text for base lines [a0,a1) given that
// side's changes cs[from:to] (all inside the region), and where the region
// lies in that side.
func sideRegion(base, side []string, cs []change, from, to, a0, a1 int) (lines []string, start, end int) {
	// Unchanged base lines map to the side with the offset of the last
	// change before them.
	offset := 0
	if from > 0 {
		offset = cs[from-1].b1 - cs[from-1].a1
	}
	start = a0 + offset
	if from < to {
		start = cs[from].b0 - (cs[from].a0 - a0)
		end = cs[to-1].b1 + (a1 - cs[to-1].a1)
	} else {
		end = a1 + offset
	}
	return side[start:end], start, end
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ResolveWith returns the merged text with conflict k resolved by
// choices[k]; there must be one choice per conflict. Unresolved keeps that
// conflict's markers.
func (r MergeResult) ResolveWith(choices []Choice) (string, error) {
	if len(choices) != len(r.Conflicts) {
		return "", fmt.Errorf("resolve merge: %d choices for %d conflicts", len(choices), len(r.Conflicts))
	}
	for k, c := range choices {
		if c > ChooseBase {
			return "", fmt.Errorf("resolve conflict %d: unknown choice %d", k, c)
		}
	}
	return r.render(choices, r.opts), nil
}

func (r *MergeResult) render(choices []Choice, opts MergeOptions) string {
	var out []string
	lineNo := 0
	for _, ch := range r.chunks {
		if ch.conflict < 0 {
			out = append(out, ch.lines...)
			lineNo += len(ch.lines)
			continue
		}
		c := &r.Conflicts[ch.conflict]
		choice := Unresolved
		if choices != nil {
			choice = choices[ch.conflict]
		}
		var add []string
		switch choice {
		case ChooseOurs:
			add = c.Ours
		case ChooseTheirs:
			add = c.Theirs
		case ChooseBase:
			add = c.Base
		case ChooseBoth:
			add = append(withFinalNewline(c.Ours), c.Theirs...)
		default:
			if choices == nil {
				c.MarkerLine = lineNo
			}
			add = append(add, marker("<<<<<<<", opts.OursLabel))
			add = append(add, withFinalNewline(c.Ours)...)
			add = append(add, marker("|||||||", opts.BaseLabel))
			add = append(add, withFinalNewline(c.Base)...)
			add = append(add, "=======\n")
			add = append(add, withFinalNewline(c.Theirs)...)
			add = append(add, marker(">>>>>>>", opts.TheirsLabel))
		}
		out = append(out, add...)
		lineNo += len(add)
	}
	return joinLines(out)
}

func marker(m, label string) string {
	if label == "" {
		return m + "\n"
	}
	return m + " " + label + "\n"
}

// withFinalNewline copies lines, giving the last one a "\n" if it lacks
// one, so a conflict section never runs into the marker after it (git does
// the same).
func withFinalNewline(lines []string) []string {
	out := append([]string(nil), lines...)
	if n := len(out); n > 0 && !strings.HasSuffix(out[n-1], "\n") {
		out[n-1] += "\n"
	}
	return out
}
