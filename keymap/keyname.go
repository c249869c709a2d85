package keymap

import (
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	tea "github.com/stratahq/strata/third_party/bubbletea"
)

// modifiers in the order Bubble Tea prints them in a keystroke
// (tea.Key.Keystroke): a binding matches the printed string, so
// "shift+ctrl+a" would never fire.
var modifiers = []string{"ctrl", "alt", "shift", "meta", "hyper", "super"}

// namedKeys are the names of the keys that are not a character ("enter",
// "pgdown", "f12"...), taken from Bubble Tea itself so they cannot drift.
var namedKeys = sync.OnceValue(func() map[string]bool {
	names := map[string]bool{}
	for _, code := range []rune{tea.KeyEnter, tea.KeyTab, tea.KeyBackspace, tea.KeyEscape, tea.KeySpace} {
		names[tea.Key{Code: code}.Keystroke()] = true
	}
	for code := tea.KeyExtended + 1; code < tea.KeyExtended+512; code++ {
		if s := (tea.Key{Code: code}).Keystroke(); utf8.RuneCountInString(s) > 1 {
			names[s] = true
		}
	}
	return names
})

// CheckKey says why s cannot be typed as a key binding: an unknown key or
// modifier name, modifiers out of Bubble Tea's order, or nothing at all.
func CheckKey(s string) error {
	var mods []string
	base := s
	switch {
	case s == "+":
	case strings.HasSuffix(s, "++"): // ctrl and the + key
		base, mods = "+", strings.Split(strings.TrimSuffix(s, "++"), "+")
	case strings.Contains(s, "+"):
		i := strings.LastIndex(s, "+")
		base, mods = s[i+1:], strings.Split(s[:i], "+")
	}
	last := -1
	for _, m := range mods {
		i := -1
		for j, known := range modifiers {
			if m == known {
				i = j
			}
		}
		if i < 0 {
			return fmt.Errorf("key %q: unknown modifier %q (modifiers: %s)", s, m, strings.Join(modifiers, ", "))
		}
		if i <= last {
			return fmt.Errorf("key %q: write the modifiers in the order %s", s, strings.Join(modifiers, "+"))
		}
		last = i
	}
	if utf8.RuneCountInString(base) == 1 {
		if r, _ := utf8.DecodeRuneInString(base); unicode.IsPrint(r) && r != ' ' {
			return nil
		}
	}
	if namedKeys()[base] {
		return nil
	}
	return fmt.Errorf("key %q: %q is not a key (a single character, or a name such as enter, esc, tab, space, up, pgdown, f1)", s, base)
}
