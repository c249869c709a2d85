package session

import "testing"

func TestDetector(t *testing.T) {
	for _, tc := range []struct {
		keys   string
		chunks []string
		sent   string
		hit    bool
	}{
		{"\x1d", []string{"abc"}, "abc", false},
		{"\x1d", []string{"ab\x1dcd"}, "ab", true},
		{"~.", []string{"a~b"}, "a~b", false},
		{"~.", []string{"x~", ".rest"}, "x", true},
		{"~.", []string{"~~."}, "~", true},
		{"~.", []string{"~", "~", "x"}, "~~x", false},
		{"abc", []string{"aab", "abc"}, "aab", true},
	} {
		d := detector{keys: []byte(tc.keys)}
		var sent []byte
		hit := false
		for _, c := range tc.chunks {
			out, h := d.feed([]byte(c))
			sent = append(sent, out...)
			if h {
				hit = true
				break
			}
		}
		if string(sent) != tc.sent || hit != tc.hit {
			t.Errorf("keys %q chunks %q: sent %q hit %v, want %q %v", tc.keys, tc.chunks, sent, hit, tc.sent, tc.hit)
		}
	}
}
