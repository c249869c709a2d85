package keymap

import (
	"strings"
	"testing"
)

func TestCheckKey(t *testing.T) {
	for _, a := range Default().Actions() {
		for _, k := range a.Binding.Keys() {
			if err := CheckKey(k); err != nil {
				t.Errorf("default key of %s: %v", a.Name, err)
			}
		}
	}
	for _, k := range []string{"a", "A", "?", "ctrl+a", "ctrl+alt+shift+x", "enter", "esc", "pgdown", "f12", "shift+tab", "ctrl++", "+", "é"} {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q): %v", k, err)
		}
	}
	for k, want := range map[string]string{
		"ctrl+shift+banana": `"banana" is not a key`,
		"banana":            "not a key",
		"shft+a":            `unknown modifier "shft"`,
		"shift+ctrl+a":      "order",
		"ctrl+":             "not a key",
		"ctrl+ ":            "not a key",
	} {
		err := CheckKey(k)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckKey(%q) = %v, want an error containing %q", k, err, want)
		}
	}
	if _, err := Load(map[string][]string{"global.quit": {"ctrl+shift+banana"}}); err == nil || !strings.Contains(err.Error(), "global.quit") {
		t.Errorf("Load with an impossible key: %v", err)
	}
}
