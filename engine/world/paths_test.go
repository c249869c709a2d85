package world

import (
	"regexp"
	"testing"
)

func TestValidateNameMatchesTheDocumentedPattern(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	cases := []string{
		"", "a", "A", "0", "-a", ".a", "_a", "a-b.c_d", "a/b", "a b", "..", "a..", "é", "a\x00",
		"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0", "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01",
	}
	for _, c := range cases {
		if got, want := ValidateName(c) == nil, re.MatchString(c); got != want {
			t.Errorf("ValidateName(%q) ok=%v, pattern says %v", c, got, want)
		}
	}
}
