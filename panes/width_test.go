package panes

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// TestWidthIsStringWidth: Width agrees with ansi.StringWidth on random
// strings made of what frames hold and of what breaks the fast path
// (combining marks after a symbol, ZWJ, emoji variation selectors, wide
// characters, escapes that are not CSI, cut-off CSI, controls, invalid
// UTF-8), and on every pair of the one-cell symbols.
func TestWidthIsStringWidth(t *testing.T) {
	var syms []string
	for _, rg := range oneCellRanges {
		for r := rg[0]; r <= rg[1]; r++ {
			syms = append(syms, string(r))
		}
	}
	hostile := []string{
		"\u0301", "\u0308", "\u200d", "\ufe0f", "\ufe0e", "\u20e3", "世", "界", "😀", "👍🏽", "🇫🇷", "\u00ad", "\u200b",
		"\t", "\n", "\r", "\x07", "\x00", "\x7f", "\xff", "\xe2\x94", "\x1b", "\x1b[", "\x1b[38;5", "\x1b]8;;http://x\x07", "\x1b]8;;\x1b\\",
		"\x1bP1$r\x1b\\", "\x1b(B", "\x1b7", "\u0e33", "\u1100", "\u1161", "\uac00",
	}
	common := []string{"a", "Z", " ", "0", "~", "\x1b[m", "\x1b[0m", "\x1b[1;38;2;10;20;30m", "\x1b[?25l", "\x1b[2 q", "·", "…", "│", "─", "▁", "█", "Δ", "✓", "↑"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string {
		switch n := rng.IntN(10); {
		case n < 5:
			return common[rng.IntN(len(common))]
		case n < 8:
			return syms[rng.IntN(len(syms))]
		default:
			return hostile[rng.IntN(len(hostile))]
		}
	}
	for i := 0; i < 200_000; i++ {
		var b strings.Builder
		for j := rng.IntN(12); j >= 0; j-- {
			b.WriteString(pick())
		}
		s := b.String()
		if got, want := Width(s), ansi.StringWidth(s); got != want {
			t.Fatalf("Width(%q) = %d, ansi.StringWidth %d", s, got, want)
		}
	}
	for _, a := range syms {
		for _, h := range append(hostile, syms[rng.IntN(len(syms))], syms[rng.IntN(len(syms))]) {
			for _, s := range []string{a + h, h + a, "x" + a + h + "y"} {
				if got, want := Width(s), ansi.StringWidth(s); got != want {
					t.Fatalf("Width(%q) = %d, ansi.StringWidth %d", s, got, want)
				}
			}
		}
	}
}

func BenchmarkWidth(b *testing.B) {
	line := "\x1b[38;5;245m│\x1b[m \x1b[32m●\x1b[m agent-07      running   local    200Δ   1/3   12% ▁▂▃▅▇█▇▅▃▂ \x1b[38;5;245m│\x1b[m"
	b.Run("Width", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = Width(line)
		}
	})
	b.Run("ansi.StringWidth", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = ansi.StringWidth(line)
		}
	})
}
