package engine

import (
	"context"
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

// An agent's HOME is a dir strata binds in (/run/strata/home), which the
// host has not: the boundary puts no home layer over it and refuses
// nothing, and the credentials of the homes the host's user keeps them in
// are hidden all the same. (Before, every agent at the sandbox level failed
// on a host without /run/strata/home: a fresh boot.)
func TestBoundaryOfABoundHome(t *testing.T) {
	e, src := testEngine(t)
	w, err := e.Create(context.Background(), CreateOptions{Name: "w", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	userHome := t.TempDir()
	t.Setenv("HOME", userHome)
	if err := os.MkdirAll(filepath.Join(userHome, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	bound := "/run/strata-test-absent-" + filepath.Base(userHome) + "/home"
	o := ExecOptions{Isolation: IsolationSandbox, Binds: []Bind{{Source: t.TempDir(), Target: bound}}}
	b, err := e.boundaryOf(w, o, []string{"HOME=" + bound, defaultPath})
	if err != nil {
		t.Fatalf("a HOME strata binds in, absent on the host: %v", err)
	}
	if b.HomeUpper != "" {
		t.Errorf("a home layer over the bound home: %s", b.HomeUpper)
	}
	hidden := false
	for _, h := range b.Hidden {
		if h.Path == filepath.Join(userHome, ".ssh") && h.Exists {
			hidden = true
		}
	}
	if !hidden {
		t.Errorf("the user's ~/.ssh (%s) is not hidden from a session with HOME=%s: %+v", userHome, bound, b.Hidden)
	}
	// The same HOME, not bound: refused as before, naming what to do.
	o.Binds = nil
	if _, err := e.boundaryOf(w, o, []string{"HOME=" + bound, defaultPath}); err == nil || !strings.Contains(err.Error(), "not a directory on this host") {
		t.Errorf("an absent HOME not bound in: %v, want the refusal", err)
	}
}
