package tui

import "testing"

// The Transcript shows the command the person typed after x, not the
// World shell's -c wrapper quoted around it; a command started any other
// way (strata exec W -- sh -c …) is shown whole, as strata sessions lists it.
func TestSessionCommandIsWhatWasTyped(t *testing.T) {
	const typed = "\x00typed"
	bash := []string{"/bin/bash", "-c", typed}
	cube := []string{"/bin/sh", "-c", "script", "strata", typed}
	for _, c := range []struct {
		argv, shell []string
		want        string
	}{
		{[]string{"/bin/bash", "-c", "sh -c 'sed -i s/a/b/ x'"}, bash, "sh -c 'sed -i s/a/b/ x'"},
		{[]string{"/bin/sh", "-c", "script", "strata", "make test"}, cube, "make test"},
		{[]string{"/bin/sh", "-c", "true"}, bash, "/bin/sh -c true"},
		{[]string{"/bin/bash", "-c", "true", "extra"}, bash, "/bin/bash -c true extra"},
		{[]string{"claude", "--resume"}, bash, "claude --resume"},
		{[]string{"/bin/bash", "-c", "make"}, nil, "/bin/bash -c make"},
	} {
		if got := sessionCommand(c.argv, c.shell, typed); got != c.want {
			t.Errorf("sessionCommand(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}
