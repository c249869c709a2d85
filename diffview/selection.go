package diffview

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrNotDiffed is returned when a partial apply is asked of a file that was
// summarised (binary or too large) instead of diffed.
var ErrNotDiffed = errors.New("file was summarised, not diffed")

// ErrNotPickable is returned when a context line is toggled: only + and -
// lines can be picked.
var ErrNotPickable = errors.New("line is context, not a change")

// RangeError reports a hunk or line index that does not exist.
type RangeError struct {
	// What is "hunk" or "line".
	What string
	// Index is the offending index as given (0-based, or 1-based when
	// OneBased is set, as with the CLI's --hunks numbers).
	Index int
	// Len is how many hunks (or lines in Hunk) there are.
	Len int
	// Hunk is the hunk a line index referred to.
	Hunk     int
	OneBased bool
}

func (e *RangeError) Error() string {
	lo, hi := 0, e.Len-1
	if e.OneBased {
		lo, hi = 1, e.Len
	}
	if e.What == "line" {
		return fmt.Sprintf("line %d of hunk %d out of range: the hunk has lines %d..%d", e.Index, e.Hunk, lo, hi)
	}
	if e.Len == 0 {
		return fmt.Sprintf("hunk %d out of range: the file has no hunks", e.Index)
	}
	return fmt.Sprintf("hunk %d out of range: the file has hunks %d..%d", e.Index, lo, hi)
}

// MismatchError reports that the base given to Apply is not the old version
// the diff was computed from.
type MismatchError struct {
	Hunk int
	// Line is the 1-based line of the base that does not match.
	Line int
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("base does not match the diff at line %d (hunk %d)", e.Line, e.Hunk)
}

// HunkState says how much of a hunk is picked.
type HunkState uint8

const (
	PickedNone HunkState = iota
	PickedPartial
	PickedAll
)

func (s HunkState) String() string {
	switch s {
	case PickedNone:
		return "none"
	case PickedPartial:
		return "partial"
	case PickedAll:
		return "all"
	}
	return fmt.Sprintf("HunkState(%d)", uint8(s))
}

// Selection records which + and - lines of a FileDiff are picked. Picks are
// keyed by line number (old number for a -, new number for a +), so a
// selection survives re-diffing the same two versions with another context
// size: see Retarget.
type Selection struct {
	fd      *FileDiff
	deletes []bool // by old line number
	inserts []bool // by new line number
}

// NewSelection makes a selection on fd with every change picked (all) or
// none.
func NewSelection(fd *FileDiff, all bool) *Selection {
	s := &Selection{
		fd:      fd,
		deletes: make([]bool, fd.OldLineCount+1),
		inserts: make([]bool, fd.NewLineCount+1),
	}
	if all {
		s.setAll(true)
	}
	return s
}

// Diff is the FileDiff the selection indexes.
func (s *Selection) Diff() *FileDiff { return s.fd }

// Retarget returns a selection on fd, a diff of the same two versions (for
// example with another context size), with the same lines picked.
func (s *Selection) Retarget(fd *FileDiff) (*Selection, error) {
	if fd.OldLineCount != s.fd.OldLineCount || fd.NewLineCount != s.fd.NewLineCount {
		return nil, errors.New("retarget selection: the diff compares different versions")
	}
	return &Selection{
		fd:      fd,
		deletes: append([]bool(nil), s.deletes...),
		inserts: append([]bool(nil), s.inserts...),
	}, nil
}

func (s *Selection) setAll(v bool) {
	for h := range s.fd.Hunks {
		s.setHunk(h, v)
	}
}

// PickAll picks every change; UnpickAll clears the selection.
func (s *Selection) PickAll()   { s.setAll(true) }
func (s *Selection) UnpickAll() { s.setAll(false) }

func (s *Selection) checkHunk(i int) error {
	if i < 0 || i >= len(s.fd.Hunks) {
		return &RangeError{What: "hunk", Index: i, Len: len(s.fd.Hunks)}
	}
	return nil
}

func (s *Selection) checkLine(h, l int) error {
	if err := s.checkHunk(h); err != nil {
		return err
	}
	if n := len(s.fd.Hunks[h].Lines); l < 0 || l >= n {
		return &RangeError{What: "line", Index: l, Len: n, Hunk: h}
	}
	return nil
}

func (s *Selection) slot(l *Line) *bool {
	switch l.Op {
	case Delete:
		return &s.deletes[l.OldNo]
	case Insert:
		return &s.inserts[l.NewNo]
	}
	return nil
}

func (s *Selection) setHunk(i int, v bool) {
	for k := range s.fd.Hunks[i].Lines {
		if p := s.slot(&s.fd.Hunks[i].Lines[k]); p != nil {
			*p = v
		}
	}
}

// PickHunk picks every change of hunk i (0-based).
func (s *Selection) PickHunk(i int) error {
	if err := s.checkHunk(i); err != nil {
		return err
	}
	s.setHunk(i, true)
	return nil
}

// UnpickHunk unpicks every change of hunk i.
func (s *Selection) UnpickHunk(i int) error {
	if err := s.checkHunk(i); err != nil {
		return err
	}
	s.setHunk(i, false)
	return nil
}

// ToggleHunk unpicks hunk i when it is wholly picked, else picks all of it.
func (s *Selection) ToggleHunk(i int) error {
	if err := s.checkHunk(i); err != nil {
		return err
	}
	s.setHunk(i, s.HunkState(i) != PickedAll)
	return nil
}

// HunkNumbers maps the hunks of shown to the hunks of numbered, a diff of
// the same two versions with another context size (the one hunk numbers
// are counted in): for each hunk of shown, the 1-based numbers of the
// hunks of numbered whose changes it holds, ascending.
func HunkNumbers(shown, numbered *FileDiff) [][]int {
	type key struct {
		op Op
		no int
	}
	of := map[key]int{}
	for h := range numbered.Hunks {
		for _, l := range numbered.Hunks[h].Lines {
			switch l.Op {
			case Delete:
				of[key{Delete, l.OldNo}] = h + 1
			case Insert:
				of[key{Insert, l.NewNo}] = h + 1
			}
		}
	}
	out := make([][]int, len(shown.Hunks))
	for h := range shown.Hunks {
		var nums []int
		for _, l := range shown.Hunks[h].Lines {
			var n int
			switch l.Op {
			case Delete:
				n = of[key{Delete, l.OldNo}]
			case Insert:
				n = of[key{Insert, l.NewNo}]
			}
			if n > 0 && (len(nums) == 0 || nums[len(nums)-1] < n) {
				nums = append(nums, n)
			}
		}
		out[h] = nums
	}
	return out
}

// HunkLabel names hunk numbers as a person types them: "hunk 2",
// "hunks 2-3", "hunks 2,4"; "" for none.
func HunkLabel(nums []int) string {
	switch {
	case len(nums) == 0:
		return ""
	case len(nums) == 1:
		return fmt.Sprintf("hunk %d", nums[0])
	}
	consecutive := true
	for i := 1; i < len(nums); i++ {
		consecutive = consecutive && nums[i] == nums[i-1]+1
	}
	if consecutive {
		return fmt.Sprintf("hunks %d-%d", nums[0], nums[len(nums)-1])
	}
	s := make([]string, len(nums))
	for i, n := range nums {
		s[i] = strconv.Itoa(n)
	}
	return "hunks " + strings.Join(s, ",")
}

// PickHunkNumbers picks the hunks with the given 1-based numbers (as typed
// after --hunks PATH=); an out-of-range number is a *RangeError with
// OneBased set and nothing is changed.
func (s *Selection) PickHunkNumbers(numbers []int) error {
	// Name the furthest number asked for: "1-50" of a 3-hunk file is
	// reported as hunk 50, not 4.
	bad := 0
	for _, n := range numbers {
		if n < 1 {
			return &RangeError{What: "hunk", Index: n, Len: len(s.fd.Hunks), OneBased: true}
		}
		if n > len(s.fd.Hunks) && n > bad {
			bad = n
		}
	}
	if bad != 0 {
		return &RangeError{What: "hunk", Index: bad, Len: len(s.fd.Hunks), OneBased: true}
	}
	for _, n := range numbers {
		s.setHunk(n-1, true)
	}
	return nil
}

// PickLines picks the changes among lines from..to (inclusive, indices into
// the hunk's Lines) of hunk h; context lines in the range are ignored.
func (s *Selection) PickLines(h, from, to int) error { return s.setLines(h, from, to, true) }

// UnpickLines unpicks the changes among lines from..to of hunk h.
func (s *Selection) UnpickLines(h, from, to int) error { return s.setLines(h, from, to, false) }

func (s *Selection) setLines(h, from, to int, v bool) error {
	if from > to {
		from, to = to, from
	}
	if err := s.checkLine(h, from); err != nil {
		return err
	}
	if err := s.checkLine(h, to); err != nil {
		return err
	}
	for k := from; k <= to; k++ {
		if p := s.slot(&s.fd.Hunks[h].Lines[k]); p != nil {
			*p = v
		}
	}
	return nil
}

// ToggleLine flips the pick of line l of hunk h; ErrNotPickable for context.
func (s *Selection) ToggleLine(h, l int) error {
	if err := s.checkLine(h, l); err != nil {
		return err
	}
	p := s.slot(&s.fd.Hunks[h].Lines[l])
	if p == nil {
		return fmt.Errorf("toggle line %d of hunk %d: %w", l, h, ErrNotPickable)
	}
	*p = !*p
	return nil
}

// IsPicked reports whether line l of hunk h is a picked change (false for
// context and out-of-range indices).
func (s *Selection) IsPicked(h, l int) bool {
	if s.checkLine(h, l) != nil {
		return false
	}
	return s.picked(&s.fd.Hunks[h].Lines[l])
}

func (s *Selection) picked(l *Line) bool {
	if p := s.slot(l); p != nil {
		return *p
	}
	return false
}

// HunkState says whether none, some or all changes of hunk i are picked
// (PickedNone for an out-of-range index).
func (s *Selection) HunkState(i int) HunkState {
	if s.checkHunk(i) != nil {
		return PickedNone
	}
	picked, total := s.hunkCounts(i)
	switch picked {
	case 0:
		return PickedNone
	case total:
		return PickedAll
	}
	return PickedPartial
}

func (s *Selection) hunkCounts(i int) (picked, total int) {
	for k := range s.fd.Hunks[i].Lines {
		if p := s.slot(&s.fd.Hunks[i].Lines[k]); p != nil {
			total++
			if *p {
				picked++
			}
		}
	}
	return picked, total
}

// Count returns how many hunks have at least one picked change and how many
// changed lines are picked in all.
func (s *Selection) Count() (hunks, lines int) {
	for i := range s.fd.Hunks {
		p, _ := s.hunkCounts(i)
		if p > 0 {
			hunks++
		}
		lines += p
	}
	return hunks, lines
}

// PickedHunks lists the 0-based indices of hunks with any pick.
func (s *Selection) PickedHunks() []int {
	var out []int
	for i := range s.fd.Hunks {
		if s.HunkState(i) != PickedNone {
			out = append(out, i)
		}
	}
	return out
}

// MaxHunkNumber bounds the hunk numbers a CLI list may name: a larger one
// (a typo, or "1-2000000000") is refused while parsing, before anything is
// allocated for it. Files with more hunks than this are picked whole, or
// line by line in the TUI; whether a number names a real hunk of the file is
// checked against its diff (PickHunkNumbers).
const MaxHunkNumber = 1 << 20

// ParseHunkNumbers parses a CLI hunk list such as "1,3,5-7" into 1-based
// numbers (ranges inclusive, duplicates removed, ascending). It allocates in
// proportion to the numbers named, at most MaxHunkNumber of them.
func ParseHunkNumbers(list string) ([]int, error) {
	type span struct{ from, to int }
	var spans []span
	number := func(part, s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("parse hunk list %q: %q is not a hunk number (they start at 1)", list, part)
		}
		if n > MaxHunkNumber {
			return 0, fmt.Errorf("parse hunk list %q: hunk %d: strata numbers at most %d hunks in a file; pick the whole file instead", list, n, MaxHunkNumber)
		}
		return n, nil
	}
	for part := range strings.SplitSeq(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("parse hunk list %q: empty item", list)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := number(part, lo)
		if err != nil {
			return nil, err
		}
		to := from
		if isRange {
			if to, err = number(part, hi); err != nil {
				return nil, err
			}
			if to < from {
				return nil, fmt.Errorf("parse hunk list %q: bad range %q (the first number must not be larger)", list, part)
			}
		}
		spans = append(spans, span{from, to})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var out []int
	next := 1 // the smallest number not yet in out
	for _, sp := range spans {
		for n := max(sp.from, next); n <= sp.to; n++ {
			out = append(out, n)
		}
		next = max(next, sp.to+1)
	}
	return out, nil
}

// Apply produces the content that results from applying only the picked
// parts of fd to base, which must be the old version fd was computed from:
// a picked - line is removed, an unpicked - line stays (as context), a
// picked + line is added, an unpicked + line is dropped. A nil sel picks
// everything. With everything picked the result is the new version, with
// nothing picked it is base.
func (fd *FileDiff) Apply(base string, sel *Selection) (string, error) {
	if fd.Summarised() {
		return "", fmt.Errorf("apply picked hunks: %w", ErrNotDiffed)
	}
	if sel != nil && sel.fd != fd {
		if sel.fd.OldLineCount != fd.OldLineCount || sel.fd.NewLineCount != fd.NewLineCount {
			return "", errors.New("apply picked hunks: the selection belongs to another diff")
		}
	}
	lines := splitLines(base)
	out := make([]string, 0, len(lines)+fd.Added)
	pos := 0
	for hi := range fd.Hunks {
		h := &fd.Hunks[hi]
		start := h.oldOffset()
		if start < pos || start > len(lines) {
			return "", &MismatchError{Hunk: hi, Line: min(start, len(lines)) + 1}
		}
		out = append(out, lines[pos:start]...)
		pos = start
		for k := range h.Lines {
			l := &h.Lines[k]
			raw := l.Text
			if !l.NoNewline {
				raw += "\n"
			}
			picked := sel == nil || sel.picked(l)
			if l.Op != Insert {
				if pos >= len(lines) || lines[pos] != raw {
					return "", &MismatchError{Hunk: hi, Line: pos + 1}
				}
				pos++
			}
			if l.Op == Equal || (l.Op == Delete && !picked) || (l.Op == Insert && picked) {
				out = append(out, raw)
			}
		}
	}
	out = append(out, lines[pos:]...)
	return joinLines(out), nil
}

// joinLines concatenates raw lines, giving a newline to any line that lacks
// one but is no longer last (a partial pick can move an old last line).
func joinLines(lines []string) string {
	var b strings.Builder
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	b.Grow(n)
	for i, l := range lines {
		b.WriteString(l)
		if i < len(lines)-1 && !strings.HasSuffix(l, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Subset returns a diff holding only the given hunks (0-based, in order),
// with new-side line numbers and headers recomputed as if only those hunks
// had been made, so its UnifiedPatch applies on the old version (even with
// `git apply --unidiff-zero` for zero-context hunks, which trusts them).
// It is meant for patch output: the lines keep their full-diff numbers.
func (fd *FileDiff) Subset(hunks []int) (*FileDiff, error) {
	out := *fd
	out.Hunks = nil
	out.Added, out.Removed = 0, 0
	delta := 0
	last := -1
	for _, i := range hunks {
		if i < 0 || i >= len(fd.Hunks) {
			return nil, &RangeError{What: "hunk", Index: i, Len: len(fd.Hunks)}
		}
		if i <= last {
			return nil, fmt.Errorf("subset of hunks: index %d is out of order", i)
		}
		last = i
		h := fd.Hunks[i]
		newOff := h.oldOffset() + delta
		h.NewStart = newOff
		if h.NewLines > 0 {
			h.NewStart++
		}
		h.Header = fmt.Sprintf("@@ -%s +%s @@", rangeText(h.OldStart, h.OldLines), rangeText(h.NewStart, h.NewLines))
		delta += h.NewLines - h.OldLines
		out.Hunks = append(out.Hunks, h)
		out.Added += h.Added()
		out.Removed += h.Removed()
	}
	out.NewLineCount = fd.OldLineCount + delta
	return &out, nil
}
