package diffview

import (
	"strings"
	"time"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// change is one contiguous edit: base lines [a0,a1) are replaced by the
// other side's lines [b0,b1). Consecutive changes are separated by at least
// one unchanged line.
type change struct {
	a0, a1, b0, b1 int
}

// splitLines cuts text into lines that keep their trailing "\n"; only the
// last line may lack one. Keeping the newline makes "x" and "x\n" different
// lines, exactly as git's xdiff records compare them.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := make([]string, 0, strings.Count(text, "\n")+1)
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			lines = append(lines, text)
			break
		}
		lines = append(lines, text[:i+1])
		text = text[i+1:]
	}
	return lines
}

// runeCapacity is how many distinct lines can be given distinct runes: all
// code points except the UTF-16 surrogate block, which does not survive a
// []rune -> string -> []rune round trip inside go-diff. A variable so tests
// can force collisions.
var runeCapacity int32 = 0x110000 - 0x800

func runeForID(id int32) rune {
	r := id % runeCapacity
	if r >= 0xD800 {
		r += 0x800
	}
	return r
}

// lineIDs interns every distinct line of a and b to a small integer.
func lineIDs(a, b []string) (ida, idb []int32, distinct int) {
	ids := make(map[string]int32, len(a)+len(b))
	intern := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	ida = intern(a)
	idb = intern(b)
	return ida, idb, len(ids)
}

// diffLines compares two line slices and returns, per line, whether it is
// part of a change. Lines are interned to ids, each id becomes one rune and
// go-diff's Myers bisection runs on the rune strings. With more distinct
// lines than there are runes (> ~1.1M) ids share runes; every equality go-diff
// reports is then re-checked on the real ids and split into a delete and an
// insert where the lines differ, so the result stays a correct diff.
// timeout bounds the bisection; past it the diff is still correct, only less
// minimal.
func diffLines(a, b []string, timeout time.Duration) (ida, idb []int32, ca, cb []bool) {
	ida, idb, distinct := lineIDs(a, b)
	ca = make([]bool, len(a))
	cb = make([]bool, len(b))

	pre := 0
	for pre < len(ida) && pre < len(idb) && ida[pre] == idb[pre] {
		pre++
	}
	suf := 0
	for suf < len(ida)-pre && suf < len(idb)-pre && ida[len(ida)-1-suf] == idb[len(idb)-1-suf] {
		suf++
	}
	ma := ida[pre : len(ida)-suf]
	mb := idb[pre : len(idb)-suf]
	switch {
	case len(ma) == 0 && len(mb) == 0:
	case len(ma) == 0 || len(mb) == 0 || len(ma)+len(mb) == 2:
		// Nothing in common (prefix and suffix are trimmed). go-diff's
		// DiffBisect also indexes out of range on a 1-by-1 input.
		for i := range ma {
			ca[pre+i] = true
		}
		for i := range mb {
			cb[pre+i] = true
		}
	default:
		// Like xdiff, leave out lines the other side lacks (certainly
		// changed) and lines matched too often amid such lines before
		// running Myers: it speeds the diff up and makes go-diff choose
		// the same alignment as git in most tie cases.
		keepA, keepB := discardUnmatched(ida, idb, distinct, pre, len(ida)-suf, pre, len(idb)-suf, ca, cb)
		ra := make([]rune, len(keepA))
		for i, k := range keepA {
			ra[i] = runeForID(ida[k])
		}
		rb := make([]rune, len(keepB))
		for i, k := range keepB {
			rb[i] = runeForID(idb[k])
		}
		bisectMark(ra, rb, keepA, keepB, ida, idb, ca, cb, timeout, distinct > int(runeCapacity))
	}
	compact(ida, ca, idb, cb)
	compact(idb, cb, ida, ca)
	return ida, idb, ca, cb
}

func runeCount(s string) int {
	n := 0
	for range s {
		n++
	}
	return n
}

// changesOf turns the per-line change marks into an ordered edit script.
func changesOf(ca, cb []bool) []change {
	var out []change
	i, j := 0, 0
	for i < len(ca) || j < len(cb) {
		if (i < len(ca) && ca[i]) || (j < len(cb) && cb[j]) {
			c := change{a0: i, b0: j}
			for i < len(ca) && ca[i] {
				i++
			}
			for j < len(cb) && cb[j] {
				j++
			}
			c.a1, c.b1 = i, j
			out = append(out, c)
			continue
		}
		i++
		j++
	}
	return out
}

// diffChanges is the edit script from a to b.
func diffChanges(a, b []string, timeout time.Duration) []change {
	_, _, ca, cb := diffLines(a, b, timeout)
	return changesOf(ca, cb)
}

// bisectMark diffs the rune strings with go-diff and marks the lines behind
// the runes (keepA, keepB map rune positions to line indices) as changed.
func bisectMark(ra, rb []rune, keepA, keepB []int, ida, idb []int32, ca, cb []bool, timeout time.Duration, collisions bool) {
	// Trim the common ends first, as xdiff's xdl_recs_cmp does at every
	// level (DiffBisect itself does not).
	for len(ra) > 0 && len(rb) > 0 && ra[0] == rb[0] && ida[keepA[0]] == idb[keepB[0]] {
		ra, rb, keepA, keepB = ra[1:], rb[1:], keepA[1:], keepB[1:]
	}
	for len(ra) > 0 && len(rb) > 0 && ra[len(ra)-1] == rb[len(rb)-1] && ida[keepA[len(keepA)-1]] == idb[keepB[len(keepB)-1]] {
		ra, rb = ra[:len(ra)-1], rb[:len(rb)-1]
		keepA, keepB = keepA[:len(keepA)-1], keepB[:len(keepB)-1]
	}
	if len(ra) == 0 || len(rb) == 0 || (len(ra) == 1 && len(rb) == 1) {
		// go-diff's DiffBisect indexes out of range on a 1-by-1 input.
		if len(ra) == 1 && len(rb) == 1 && ra[0] == rb[0] && ida[keepA[0]] == idb[keepB[0]] {
			return
		}
		for _, k := range keepA {
			ca[k] = true
		}
		for _, k := range keepB {
			cb[k] = true
		}
		return
	}
	dmp := diffmatchpatch.New()
	// DiffTimeout 0 turns off go-diff's half-match shortcut, which can
	// produce non-minimal diffs; the deadline passed to DiffBisect still
	// bounds the work.
	dmp.DiffTimeout = 0
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	i, j := 0, 0
	for _, d := range dmp.DiffBisect(string(ra), string(rb), deadline) {
		n := runeCount(d.Text)
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			for k := 0; k < n; k++ {
				if collisions && ida[keepA[i]] != idb[keepB[j]] {
					ca[keepA[i]], cb[keepB[j]] = true, true
				}
				i++
				j++
			}
		case diffmatchpatch.DiffDelete:
			for k := 0; k < n; k++ {
				ca[keepA[i]] = true
				i++
			}
		case diffmatchpatch.DiffInsert:
			for k := 0; k < n; k++ {
				cb[keepB[j]] = true
				j++
			}
		}
	}
}

const (
	maxEqLimit     = 1024 // XDL_MAX_EQLIMIT
	simscanWindow  = 100  // XDL_SIMSCAN_WINDOW
	keepDiscardRun = 4    // XDL_KPDIS_RUN
)

const (
	actionDiscard = iota
	actionKeep
	actionInvestigate
)

// bogoSqrt is xdiff's rough square root.
func bogoSqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

// discardUnmatched ports xdiff's xdl_cleanup_records on the ranges
// [a0,a1) and [b0,b1): lines with no match on the other side, and lines
// with very many matches sitting among them, are marked changed up front.
// It returns the indices of the lines left for the Myers pass.
func discardUnmatched(ida, idb []int32, distinct, a0, a1, b0, b1 int, ca, cb []bool) (keepA, keepB []int) {
	countA := make([]int, distinct)
	countB := make([]int, distinct)
	for _, id := range ida {
		countA[id]++
	}
	for _, id := range idb {
		countB[id]++
	}
	classify := func(ids []int32, lo, hi int, other []int, n int) []uint8 {
		mlim := min(bogoSqrt(n), maxEqLimit)
		action := make([]uint8, len(ids))
		for i := lo; i < hi; i++ {
			switch nm := other[ids[i]]; {
			case nm == 0:
				action[i] = actionDiscard
			case nm >= mlim:
				action[i] = actionInvestigate
			default:
				action[i] = actionKeep
			}
		}
		return action
	}
	pick := func(action []uint8, lo, hi int, changed []bool) []int {
		keep := make([]int, 0, hi-lo)
		for i := lo; i < hi; i++ {
			if action[i] == actionKeep || (action[i] == actionInvestigate && !cleanMultiMatch(action, i, lo, hi-1)) {
				keep = append(keep, i)
			} else {
				changed[i] = true
			}
		}
		return keep
	}
	actA := classify(ida, a0, a1, countB, len(ida))
	actB := classify(idb, b0, b1, countA, len(idb))
	return pick(actA, a0, a1, ca), pick(actB, b0, b1, cb)
}

// cleanMultiMatch ports xdl_clean_mmatch: a line matched too often is
// discarded only inside a run made mostly of unmatched lines.
func cleanMultiMatch(action []uint8, i, s, e int) bool {
	if i-s > simscanWindow {
		s = i - simscanWindow
	}
	if e-i > simscanWindow {
		e = i + simscanWindow
	}
	rdis0, rpdis0 := 0, 1
	for r := 1; i-r >= s; r++ {
		switch action[i-r] {
		case actionDiscard:
			rdis0++
			continue
		case actionInvestigate:
			rpdis0++
			continue
		}
		break
	}
	if rdis0 == 0 {
		return false
	}
	rdis1, rpdis1 := 0, 1
	for r := 1; i+r <= e; r++ {
		switch action[i+r] {
		case actionDiscard:
			rdis1++
			continue
		case actionInvestigate:
			rpdis1++
			continue
		}
		break
	}
	if rdis1 == 0 {
		return false
	}
	rdis1 += rdis0
	rpdis1 += rpdis0
	return rpdis1*keepDiscardRun < rpdis1+rdis1
}
