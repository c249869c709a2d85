package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// strict_binds is an alias of boundary.shared_caches: "/" (which used to be
// accepted and undid strict) is refused, naming the file, line and key;
// isolation is an alias of boundary.level.
func TestConfigBoundaryAliases(t *testing.T) {
	dir := t.TempDir()
	home, state := filepath.Join(dir, "home"), filepath.Join(dir, "state")
	for _, tc := range []struct{ body, key, want string }{
		{"strict_binds = [\"/\"]\n", "strict_binds", "whole host writable"},
		{"[boundary]\nshared_caches = [\"~/.ssh\"]\n", "boundary.shared_caches", "credential path"},
		{"strict_binds = [\"" + state + "/x\"]\n", "strict_binds", "strata's state"},
	} {
		p := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(p)
		if err != nil {
			t.Fatalf("%q: %v", tc.body, err)
		}
		err = c.CheckBoundary(home, state)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || ce.Line == 0 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: CheckBoundary = %v, want a ConfigError at %s with a line, saying %q", tc.body, err, tc.key, tc.want)
		}
	}
	p := filepath.Join(dir, "config.toml")
	os.WriteFile(p, []byte("isolation = \"strict\"\n"), 0o644)
	c, err := LoadConfig(p)
	if err != nil || c.effectiveBoundary().Level != "strict" {
		t.Errorf("isolation = strict: level %v, %v", c.effectiveBoundary().Level, err)
	}
	os.WriteFile(p, []byte("isolation = \"tree\"\n[boundary]\nlevel = \"strict\"\n"), 0o644)
	if _, err := LoadConfig(p); err == nil {
		t.Error("isolation and boundary.level disagreeing: accepted")
	}
}
