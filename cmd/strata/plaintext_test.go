package main

import (
	"strings"
	"testing"
)

func TestPlainText(t *testing.T) {
	cases := map[string]string{
		"\x1b[1;31mred\x1b[0m plain\r\n":           "red plain\n",
		"\x1b]0;title\x07after\n":                  "after\n",
		"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\": "link",
		"50%\r100%\r\ndone":                        "50%\n100%\ndone",
		"\x1b[?25l\x1b[H\x1b[2Jscreen\x1b[K":       "screen",
		"a\bb\x00c\x7fd":                           "abcd",
		"\x1b(Bcharset \x1b=keypad":                "charset keypad",
		"\x1bPq#0;2;0;0;0\x1b\\sixel gone":         "sixel gone",
		"héllo ✓\n":                                "héllo ✓\n",
		"tab\there":                                "tab\there",
		"line\r\r\nnext\r":                         "line\nnext\n",
	}
	for in, want := range cases {
		// Whole, and split at every byte: a sequence cut across two
		// transcript records is still removed.
		for cut := 0; cut <= len(in); cut++ {
			var b strings.Builder
			p := &plainText{w: &b}
			p.Write([]byte(in[:cut]))
			p.Write([]byte(in[cut:]))
			p.Close()
			if b.String() != want {
				t.Errorf("plainText(%q) cut at %d = %q, want %q", in, cut, b.String(), want)
				break
			}
		}
	}
}
