package panes

import (
	"sync"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// Width is ansi.StringWidth, the cells s takes on screen, without its
// grapheme segmentation for what a frame is mostly made of: printable
// ASCII, SGR and other CSI sequences, and the one-cell symbols the panes
// draw (box drawing, blocks, sparklines, arrows, ·, …, Δ). Anything else
// (other escapes, controls, combining marks, wide or emoji characters,
// invalid UTF-8) is measured by ansi.StringWidth, whole: the result is
// always ansi.StringWidth's. Every line of every frame is measured at
// least twice; segmentation was a third of a frame's time.
func Width(s string) int {
	w := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f:
			w++
			i++
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[':
			// CSI: parameters 0x30–0x3f, intermediates 0x20–0x2f, a final 0x40–0x7e.
			j := i + 2
			for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f {
				j++
			}
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
				j++
			}
			if j >= len(s) || s[j] < 0x40 || s[j] > 0x7e {
				return ansi.StringWidth(s)
			}
			i = j + 1
		case c >= 0x80:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !oneCell(r) {
				return ansi.StringWidth(s)
			}
			w++
			i += size
		default:
			return ansi.StringWidth(s)
		}
	}
	return w
}

// oneCellRanges are the blocks the panes draw symbols from; a rune in them
// counts as one cell only if ansi.StringWidth says so alone and next to
// ASCII and to itself (no joining, no emoji presentation).
var oneCellRanges = [][2]rune{
	{0x00a1, 0x00ff}, // Latin-1: ·, ×, accented letters
	{0x0391, 0x03c9}, // Greek letters: Δ
	{0x2010, 0x2027}, // dashes, quotes, •, …
	{0x2030, 0x205e},
	{0x2190, 0x21ff}, // arrows
	{0x2200, 0x22ff}, // ≠, ⊘
	{0x2500, 0x25ff}, // box drawing, blocks, geometric shapes
	{0x2700, 0x27bf}, // ✓ ✗ ✎
	{0x2800, 0x28ff}, // braille
}

var (
	oneCellOnce sync.Once
	oneCellSet  map[rune]bool
)

func oneCell(r rune) bool {
	oneCellOnce.Do(func() {
		oneCellSet = map[rune]bool{}
		for _, rg := range oneCellRanges {
			for r := rg[0]; r <= rg[1]; r++ {
				s := string(r)
				if ansi.StringWidth(s) == 1 && ansi.StringWidth("a"+s+"a") == 3 && ansi.StringWidth(s+s) == 2 {
					oneCellSet[r] = true
				}
			}
		}
	})
	return oneCellSet[r]
}
