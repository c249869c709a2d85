package engine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// One key of [keys] may be written as a string, as most TUIs' configs take
// it: "diff.pick" = "p" is ["p"], not a TOML type error.
func TestConfigKeyAsString(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte("[keys]\n\"diff.pick\" = \"p\"\n\"diff.apply\" = [\"a\", \"A\"]\n\"worlds.new\" = []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	km := c.KeyMap()
	if !slices.Equal(km["diff.pick"], []string{"p"}) || !slices.Equal(km["diff.apply"], []string{"a", "A"}) || km["worlds.new"] == nil || len(km["worlds.new"]) != 0 {
		t.Errorf("keys: %q", km)
	}
}
