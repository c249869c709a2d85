package tui

import "testing"

// The Transcript shows the command the person typed after x, not the
// World shell's -c wrapper quoted around it.
func TestSessionCommandIsWhatWasTyped(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"/bin/bash", "-c", "sh -c 'sed -i s/a/b/ x'"}, "sh -c 'sed -i s/a/b/ x'"},
		{[]string{"/usr/bin/zsh", "-c", "make test"}, "make test"},
		{[]string{"claude", "--resume"}, "claude --resume"},
		{[]string{"python3", "-c", "print(1)"}, "python3 -c 'print(1)'"},
	} {
		if got := sessionCommand(c.argv); got != c.want {
			t.Errorf("sessionCommand(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}
