package diffview

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("line %d\n", i+1)
	}
	return out
}

func TestDiffHunksAndHeaders(t *testing.T) {
	old := numbered(20)
	nw := append([]string(nil), old...)
	nw[1] = "changed 2\n"                                          // hunk 1
	nw = append(nw[:15], append([]string{"new\n"}, nw[15:]...)...) // hunk 2: insert after line 15
	fd := Diff(join(old), join(nw), Options{})
	if len(fd.Hunks) != 2 {
		t.Fatalf("want 2 hunks, got %d", len(fd.Hunks))
	}
	if h := fd.Hunks[0]; h.Header != "@@ -1,5 +1,5 @@" || h.OldStart != 1 || h.NewLines != 5 {
		t.Fatalf("hunk 0 header %q %+v", h.Header, h)
	}
	if h := fd.Hunks[1]; h.Header != "@@ -13,6 +13,7 @@" {
		t.Fatalf("hunk 1 header %q", h.Header)
	}
	h := fd.Hunks[0]
	want := []struct {
		op           Op
		text         string
		oldNo, newNo int
	}{
		{Equal, "line 1", 1, 1},
		{Delete, "line 2", 2, 0},
		{Insert, "changed 2", 0, 2},
		{Equal, "line 3", 3, 3},
		{Equal, "line 4", 4, 4},
		{Equal, "line 5", 5, 5},
	}
	if len(h.Lines) != len(want) {
		t.Fatalf("hunk 0 has %d lines", len(h.Lines))
	}
	for i, w := range want {
		l := h.Lines[i]
		if l.Op != w.op || l.Text != w.text || l.OldNo != w.oldNo || l.NewNo != w.newNo {
			t.Errorf("line %d = %+v, want %+v", i, l, w)
		}
	}
	if fd.Added != 2 || fd.Removed != 1 {
		t.Fatalf("stats +%d -%d", fd.Added, fd.Removed)
	}
}

func TestDiffContextMergesNearbyChanges(t *testing.T) {
	old := numbered(40)
	edit := func(gap int) *FileDiff {
		nw := append([]string(nil), old...)
		nw[5] = "x\n"
		nw[5+gap+1] = "y\n"
		return Diff(join(old), join(nw), Options{})
	}
	// git merges changes whose gap is at most twice the context.
	if n := len(edit(6).Hunks); n != 1 {
		t.Fatalf("gap 6 with context 3: %d hunks, want 1", n)
	}
	if n := len(edit(7).Hunks); n != 2 {
		t.Fatalf("gap 7 with context 3: %d hunks, want 2", n)
	}
	nw := append([]string(nil), old...)
	nw[10] = "x\n"
	fd := Diff(join(old), join(nw), Options{Context: -1})
	if len(fd.Hunks) != 1 || len(fd.Hunks[0].Lines) != 2 || fd.Hunks[0].Header != "@@ -11 +11 @@" {
		t.Fatalf("zero context: %+v", fd.Hunks)
	}
	fd = Diff(join(old), join(nw), Options{Context: 10})
	if fd.Context != 10 || len(fd.Hunks[0].Lines) != 22 {
		t.Fatalf("context 10: %d lines", len(fd.Hunks[0].Lines))
	}
	// Pure insertion with no context points at the line before.
	fd = Diff("a\nb\n", "a\nX\nb\n", Options{Context: -1})
	if fd.Hunks[0].Header != "@@ -1,0 +2 @@" {
		t.Fatalf("insertion header %q", fd.Hunks[0].Header)
	}
}

func TestDiffMissingFinalNewline(t *testing.T) {
	fd := Diff("a\nb", "a\nb\n", Options{})
	if !fd.OldNoNewline || fd.NewNoNewline {
		t.Fatalf("flags old=%v new=%v", fd.OldNoNewline, fd.NewNoNewline)
	}
	lines := fd.Hunks[0].Lines
	if len(lines) != 3 || lines[1].Op != Delete || !lines[1].NoNewline || lines[2].Op != Insert || lines[2].NoNewline {
		t.Fatalf("lines %+v", lines)
	}
	// An unchanged last line without newline is context and keeps the mark.
	fd = Diff("a\nb\nc", "A\nb\nc", Options{})
	last := fd.Hunks[0].Lines[len(fd.Hunks[0].Lines)-1]
	if last.Op != Equal || !last.NoNewline || last.Text != "c" {
		t.Fatalf("last line %+v", last)
	}
	if fd := Diff("same", "same", Options{}); !fd.Identical() {
		t.Fatal("identical texts gave hunks")
	}
}

func TestDiffCRLFKeepsCarriageReturn(t *testing.T) {
	fd := Diff("a\r\nb\r\n", "a\r\nc\r\n", Options{})
	if got := fd.Hunks[0].Lines[1].Text; got != "b\r" {
		t.Fatalf("text %q", got)
	}
}

func TestDiffSummaries(t *testing.T) {
	bin := "abc\x00def"
	if fd := Diff(bin, "x", Options{}); !fd.Binary || len(fd.Hunks) != 0 || fd.OldSize != 7 {
		t.Fatalf("binary: %+v", fd)
	}
	if fd := Diff(bin, "x", Options{Force: true}); fd.Binary || len(fd.Hunks) != 1 {
		t.Fatalf("forced binary: %+v", fd)
	}
	big := strings.Repeat("x\n", 600)
	if fd := Diff(big, big+"y\n", Options{MaxBytes: 1000}); !fd.TooLarge || len(fd.Hunks) != 0 {
		t.Fatalf("too large: %+v", fd)
	}
	if fd := Diff(big, big+"y\n", Options{MaxBytes: 1000, Force: true}); fd.TooLarge || len(fd.Hunks) != 1 {
		t.Fatalf("forced large: %+v", fd)
	}
}

func TestIsBinary(t *testing.T) {
	latin1 := []byte("caf\xe9 au lait, na\xefve r\xe9sum\xe9 of a longer line of text\n")
	cases := []struct {
		name string
		in   []byte
		want bool
	}{
		{"empty", nil, false},
		{"ascii", []byte("hello\tworld\r\n"), false},
		{"utf8", []byte("héllo wörld 日本語 🎉\n"), false},
		{"nul", []byte("text\x00text"), true},
		{"latin1 sprinkle", latin1, false},
		{"random bytes", []byte{0xff, 0xfe, 0x01, 0x02, 0x80, 0x81, 0x90, 0x03, 0x04, 0xc0}, true},
		{"escape sequences", []byte("\x1b[31mred\x1b[0m\n"), false},
		{"control soup", []byte("\x01\x02\x03\x04\x05\x06abc"), true},
	}
	for _, c := range cases {
		if got := IsBinary(c.in); got != c.want {
			t.Errorf("%s: IsBinary = %v, want %v", c.name, got, c.want)
		}
	}
	// A multi-byte rune cut by the 64 KiB sniff window is not evidence.
	s := strings.Repeat("a", binarySniffBytes-1) + "é" + "tail"
	if IsBinary([]byte(s)) {
		t.Fatal("rune cut at the sniff limit made text binary")
	}
}

func TestWordDiff(t *testing.T) {
	o, n := WordDiff("return foo(bar, baz)", "return foo(bar, qux)")
	if len(o) != 1 || len(n) != 1 {
		t.Fatalf("spans %v %v", o, n)
	}
	if got := "return foo(bar, baz)"[o[0].Start:o[0].End]; got != "baz" {
		t.Fatalf("old span %q", got)
	}
	if got := "return foo(bar, qux)"[n[0].Start:n[0].End]; got != "qux" {
		t.Fatalf("new span %q", got)
	}
	if o, n := WordDiff("alpha beta", "gamma delta"); o != nil || n != nil {
		t.Fatalf("unrelated lines highlighted: %v %v", o, n)
	}
	o, n = WordDiff("naïve café", "naïve cafés")
	if len(o) != 1 || len(n) != 1 || "naïve cafés"[n[0].Start:n[0].End] != "cafés" || !utf8.ValidString("naïve café"[o[0].Start:o[0].End]) {
		t.Fatalf("unicode spans %v %v", o, n)
	}
	// Diff pairs the k-th deleted with the k-th inserted line.
	fd := Diff("x := 1\ny := 2\n", "x := 10\ny := 2\n", Options{})
	del, ins := fd.Hunks[0].Lines[0], fd.Hunks[0].Lines[1]
	if len(del.Changed) != 1 || del.Text[del.Changed[0].Start:del.Changed[0].End] != "1" ||
		len(ins.Changed) != 1 || ins.Text[ins.Changed[0].Start:ins.Changed[0].End] != "10" {
		t.Fatalf("pair highlights %+v %+v", del, ins)
	}
}

// TestDiffCorrectUnderRuneCollisions shrinks the rune space so that many
// lines share a rune, as happens past ~1.1M distinct lines, and checks that
// the diff still reproduces the new text exactly.
func TestDiffCorrectUnderRuneCollisions(t *testing.T) {
	saved := runeCapacity
	runeCapacity = 7
	defer func() { runeCapacity = saved }()
	for seed := uint64(1); seed <= 200; seed++ {
		g := newTextGen(seed, 0)
		old := g.lines(30)
		nw := g.edit(old, 0, len(old), 5)
		fd := Diff(join(old), join(nw), Options{})
		got, err := fd.Apply(join(old), nil)
		if err != nil || got != join(nw) {
			t.Fatalf("seed %d: apply all = %q, %v", seed, got, err)
		}
		for _, h := range fd.Hunks {
			for _, l := range h.Lines {
				if l.Op == Equal && (l.OldNo < 1 || old[l.OldNo-1] != nw[l.NewNo-1]) {
					t.Fatalf("seed %d: context line pairs different lines", seed)
				}
			}
		}
	}
}

// TestDiffMoreDistinctLinesThanRunes runs the real thing: 1.2M distinct
// lines, more than there are runes.
func TestDiffMoreDistinctLinesThanRunes(t *testing.T) {
	if testing.Short() || raceEnabled {
		// Single-goroutine code: -race adds nothing but a 10x slowdown on
		// 1.2M lines; the collision path runs under -race in
		// TestDiffCorrectUnderRuneCollisions.
		t.Skip("large input; skipped with -short and -race")
	}
	n := int(runeCapacity) + 100_000
	var ob, nb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&ob, "%x\n", i)
		switch i {
		case n / 2:
			nb.WriteString("inserted\n")
			fmt.Fprintf(&nb, "%x\n", i)
		case 10:
		default:
			fmt.Fprintf(&nb, "%x\n", i)
		}
	}
	fd := Diff(ob.String(), nb.String(), Options{MaxBytes: 64 << 20})
	if fd.Added != 1 || fd.Removed != 1 || len(fd.Hunks) != 2 {
		t.Fatalf("got +%d -%d in %d hunks", fd.Added, fd.Removed, len(fd.Hunks))
	}
	got, err := fd.Apply(ob.String(), nil)
	if err != nil || got != nb.String() {
		t.Fatalf("apply all differs: %v", err)
	}
}

func TestDiffApplyRoundTripRandom(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		g := newTextGen(seed, 8)
		old := g.maybeDropFinalNewline(join(g.lines(g.rng.IntN(60))))
		nw := g.maybeDropFinalNewline(join(g.edit(splitLines(old), 0, len(splitLines(old)), 1+g.rng.IntN(6))))
		for _, ctx := range []int{-1, 0, 1, 5} {
			fd := Diff(old, nw, Options{Context: ctx})
			all, err := fd.Apply(old, NewSelection(fd, true))
			if err != nil || all != nw {
				t.Fatalf("seed %d ctx %d: all picked = %q (%v), want %q", seed, ctx, all, err, nw)
			}
			none, err := fd.Apply(old, NewSelection(fd, false))
			if err != nil || none != old {
				t.Fatalf("seed %d ctx %d: none picked = %q (%v), want %q", seed, ctx, none, err, old)
			}
		}
	}
}
