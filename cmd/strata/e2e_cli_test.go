package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cleanEnv is a user's environment with every strata and XDG location (and
// HOME) pointing into base, which starts empty.
func cleanEnv(base string) []string {
	var vars []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "STRATA_") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		vars = append(vars, kv)
	}
	return append(vars,
		"HOME="+filepath.Join(base, "home"),
		"STRATA_HOME="+filepath.Join(base, "strata"),
		"XDG_STATE_HOME="+filepath.Join(base, "state"),
		"XDG_DATA_HOME="+filepath.Join(base, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(base, "config"),
		"XDG_CACHE_HOME="+filepath.Join(base, "cache"),
	)
}

// runIn runs the binary with vars in dir and returns stdout, stderr, status.
func runIn(t *testing.T, vars []string, dir string, args ...string) (string, string, int) {
	t.Helper()
	c := exec.Command(strataBin, args...)
	c.Env, c.Dir = vars, dir
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("strata %v: %v", args, err)
	}
	return out.String(), errb.String(), c.ProcessState.ExitCode()
}

// Asking for help changes nothing on disk: not the state root, not the log,
// not the config directory; it exits 0 and prints the usage on stdout.
func TestE2EHelpHasNoSideEffects(t *testing.T) {
	base := t.TempDir()
	vars := cleanEnv(base)
	work := t.TempDir()
	check := func(want string, args ...string) {
		t.Helper()
		out, errs, code := runIn(t, vars, work, args...)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("strata %s: exit %d, stdout %q (want it to contain %q), stderr %q", strings.Join(args, " "), code, out, want, errs)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 0 {
			var names []string
			filepath.WalkDir(base, func(p string, _ os.DirEntry, _ error) error { names = append(names, p); return nil })
			t.Fatalf("strata %s created %v", strings.Join(args, " "), names)
		}
	}
	check("Usage:", "--help")
	check("Usage:", "-h")
	check("Usage:", "help")
	names := []string{"tui"}
	for _, c := range commands {
		names = append(names, c.name)
	}
	for _, n := range names {
		usage := "Usage: strata " + n
		check(usage, n, "--help")
		check(usage, n, "-h")
		check(usage, n, "-help")
		check(usage, n, "w", "--help")
		check(usage, "help", n)
	}
	// A mistake in the flags is refused before anything is created too.
	for _, n := range names {
		if _, errs, code := runIn(t, vars, work, n, "--no-such-flag"); code != 2 || !strings.Contains(errs, "no-such-flag") {
			t.Errorf("strata %s --no-such-flag: exit %d, stderr %q", n, code, errs)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 0 {
			t.Fatalf("strata %s --no-such-flag created files in %s", n, base)
		}
	}
}
