package diffview

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// threeHunks is a 30-line file with a change near the top, the middle and
// the bottom.
func threeHunks() (old, nw string) {
	o := numbered(30)
	n := append([]string(nil), o...)
	n[2] = "top changed\n"
	n[15] = "middle changed\n"
	n = append(n[:28], append([]string{"bottom inserted\n"}, n[28:]...)...)
	return join(o), join(n)
}

func TestApplyOneHunkOfThree(t *testing.T) {
	old, nw := threeHunks()
	fd := Diff(old, nw, Options{})
	if len(fd.Hunks) != 3 {
		t.Fatalf("want 3 hunks, got %d", len(fd.Hunks))
	}
	sel := NewSelection(fd, false)
	if err := sel.PickHunk(1); err != nil {
		t.Fatal(err)
	}
	got, err := fd.Apply(old, sel)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(old, "line 16\n", "middle changed\n", 1)
	if got != want {
		t.Fatalf("apply hunk 2 of 3:\n%s", got)
	}
	if s := sel.HunkState(1); s != PickedAll {
		t.Fatalf("state %v", s)
	}
	if h, l := sel.Count(); h != 1 || l != 2 {
		t.Fatalf("count %d hunks %d lines", h, l)
	}
	if got := sel.PickedHunks(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("picked hunks %v", got)
	}
}

func TestApplyLinePicks(t *testing.T) {
	old := "a\nb\nc\nd\n"
	nw := "a\nB\nC\nd\n"
	fd := Diff(old, nw, Options{})
	// Lines: a, -b, -c, +B, +C, d.
	h := fd.Hunks[0]
	if len(h.Lines) != 6 || h.Lines[1].Op != Delete || h.Lines[3].Op != Insert {
		t.Fatalf("unexpected hunk %+v", h.Lines)
	}
	sel := NewSelection(fd, false)
	// Pick only "-b" and "+B": c stays (unpicked -), C is dropped (unpicked +).
	if err := sel.ToggleLine(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := sel.ToggleLine(0, 3); err != nil {
		t.Fatal(err)
	}
	got, err := fd.Apply(old, sel)
	if err != nil || got != "a\nc\nB\nd\n" {
		t.Fatalf("apply = %q, %v", got, err)
	}
	if s := sel.HunkState(0); s != PickedPartial {
		t.Fatalf("state %v", s)
	}
	if err := sel.ToggleLine(0, 0); !errors.Is(err, ErrNotPickable) {
		t.Fatalf("toggling context: %v", err)
	}
	// A range pick ignores context lines in it.
	sel.UnpickAll()
	if err := sel.PickLines(0, 5, 2); err != nil {
		t.Fatal(err)
	}
	got, _ = fd.Apply(old, sel)
	if got != "a\nb\nB\nC\nd\n" {
		t.Fatalf("range pick = %q", got)
	}
	if err := sel.ToggleHunk(0); err != nil || sel.HunkState(0) != PickedAll {
		t.Fatalf("toggle partial hunk should pick all: %v %v", err, sel.HunkState(0))
	}
	if err := sel.ToggleHunk(0); err != nil || sel.HunkState(0) != PickedNone {
		t.Fatalf("toggle full hunk should unpick: %v", err)
	}
}

func TestApplyPartialPickAtEndWithoutNewline(t *testing.T) {
	old := "a\nb"
	nw := "a\nb\nc"
	fd := Diff(old, nw, Options{})
	// -b(no newline) +b +c(no newline): keep the old b, add only c.
	sel := NewSelection(fd, false)
	for k, l := range fd.Hunks[0].Lines {
		if l.Op == Insert && l.Text == "c" {
			if err := sel.ToggleLine(0, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := fd.Apply(old, sel)
	if err != nil || got != "a\nb\nc" {
		t.Fatalf("apply = %q, %v", got, err)
	}
}

func TestSelectionRangeErrors(t *testing.T) {
	old, nw := threeHunks()
	fd := Diff(old, nw, Options{})
	sel := NewSelection(fd, false)
	var re *RangeError
	if err := sel.PickHunk(3); !errors.As(err, &re) || re.What != "hunk" || re.Index != 3 || re.Len != 3 {
		t.Fatalf("PickHunk(3): %v", err)
	}
	if err := sel.ToggleHunk(-1); !errors.As(err, &re) {
		t.Fatalf("ToggleHunk(-1): %v", err)
	}
	if err := sel.PickLines(0, 0, 99); !errors.As(err, &re) || re.What != "line" || re.Hunk != 0 {
		t.Fatalf("PickLines out of range: %v", err)
	}
	err := sel.PickHunkNumbers([]int{1, 4})
	if !errors.As(err, &re) || !re.OneBased || re.Index != 4 {
		t.Fatalf("PickHunkNumbers: %v", err)
	}
	if !strings.Contains(err.Error(), "hunk 4 out of range: the file has hunks 1..3") {
		t.Fatalf("message %q", err)
	}
	if h, _ := sel.Count(); h != 0 {
		t.Fatal("a failed PickHunkNumbers changed the selection")
	}
	if err := sel.PickHunkNumbers([]int{1, 3}); err != nil {
		t.Fatal(err)
	}
	if got := sel.PickedHunks(); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("picked %v", got)
	}
}

func TestParseHunkNumbers(t *testing.T) {
	got, err := ParseHunkNumbers("1,3-5, 3")
	if err != nil || len(got) != 4 || got[0] != 1 || got[1] != 3 || got[3] != 5 {
		t.Fatalf("got %v %v", got, err)
	}
	for _, bad := range []string{"", "0", "a", "3-1", "1,,2", "-2"} {
		if _, err := ParseHunkNumbers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A hostile or mistyped range is refused while parsing, in a few small
// allocations: "1-2000000000" used to build a 2-billion-element list (16 GB)
// before anything looked at it.
func TestParseHunkNumbersRefusesHugeNumbersWithoutAllocating(t *testing.T) {
	for _, bad := range []string{"1-2000000000", "2000000000", "1,3-1048577", "1-99999999999999999999", "1048577-1048578"} {
		var err error
		allocs := testing.AllocsPerRun(5, func() { _, err = ParseHunkNumbers(bad) })
		if err == nil {
			t.Fatalf("%q accepted", bad)
		}
		if allocs > 20 {
			t.Errorf("%q: %v allocations before refusing", bad, allocs)
		}
	}
	_, err := ParseHunkNumbers("1-2000000000")
	if err == nil || !strings.Contains(err.Error(), "2000000000") || !strings.Contains(err.Error(), "at most 1048576") {
		t.Fatalf("message %v", err)
	}
	// The bound itself is allowed, and overlapping ranges cost nothing extra.
	got, err := ParseHunkNumbers(fmt.Sprintf("1-%d,1-%d,2", MaxHunkNumber, MaxHunkNumber))
	if err != nil || len(got) != MaxHunkNumber || got[0] != 1 || got[len(got)-1] != MaxHunkNumber {
		t.Fatalf("1-MaxHunkNumber twice: %d numbers, %v", len(got), err)
	}
	if got, err := ParseHunkNumbers("5-7, 1,6,2-3,7"); err != nil || fmt.Sprint(got) != "[1 2 3 5 6 7]" {
		t.Fatalf("got %v %v", got, err)
	}
}

// Against the file's real hunks, the error names the furthest number asked.
func TestPickHunkNumbersNamesTheFurthestHunkAsked(t *testing.T) {
	old, nw := threeHunks()
	sel := NewSelection(Diff(old, nw, Options{}), false)
	nums, err := ParseHunkNumbers("1-50")
	if err != nil {
		t.Fatal(err)
	}
	err = sel.PickHunkNumbers(nums)
	var re *RangeError
	if !errors.As(err, &re) || re.Index != 50 || re.Len != 3 || !strings.Contains(err.Error(), "hunk 50 out of range: the file has hunks 1..3") {
		t.Fatalf("PickHunkNumbers(1-50) of 3 hunks: %v", err)
	}
	if h, _ := sel.Count(); h != 0 {
		t.Fatal("a refused pick changed the selection")
	}
}

func TestApplyRejectsWrongBase(t *testing.T) {
	old, nw := threeHunks()
	fd := Diff(old, nw, Options{})
	var me *MismatchError
	if _, err := fd.Apply(strings.Replace(old, "line 15\n", "edited\n", 1), nil); !errors.As(err, &me) || me.Hunk != 1 {
		t.Fatalf("mismatch: %v", err)
	}
	if _, err := fd.Apply("short\n", nil); !errors.As(err, &me) {
		t.Fatalf("short base: %v", err)
	}
	if _, err := Diff("a\x00", "b", Options{}).Apply("a\x00", nil); !errors.Is(err, ErrNotDiffed) {
		t.Fatalf("binary apply: %v", err)
	}
}

func TestSelectionRetargetKeepsPicks(t *testing.T) {
	old, nw := threeHunks()
	fd3 := Diff(old, nw, Options{})
	sel := NewSelection(fd3, false)
	if err := sel.PickHunk(2); err != nil {
		t.Fatal(err)
	}
	fd20 := Diff(old, nw, Options{Context: 20}) // one big hunk
	if len(fd20.Hunks) != 1 {
		t.Fatalf("context 20 gave %d hunks", len(fd20.Hunks))
	}
	sel20, err := sel.Retarget(fd20)
	if err != nil {
		t.Fatal(err)
	}
	if sel20.HunkState(0) != PickedPartial {
		t.Fatalf("state %v", sel20.HunkState(0))
	}
	a, _ := fd3.Apply(old, sel)
	b, _ := fd20.Apply(old, sel20)
	if a != b || !strings.Contains(b, "bottom inserted") || strings.Contains(b, "top changed") {
		t.Fatalf("retargeted apply differs:\n%s\n---\n%s", a, b)
	}
	if _, err := sel.Retarget(Diff("x\n", "y\n", Options{})); err == nil {
		t.Fatal("retarget to an unrelated diff accepted")
	}
}
