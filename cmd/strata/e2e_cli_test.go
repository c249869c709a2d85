package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/themes"
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
	t.Parallel()
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
	var names []string
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

// A mistake in config.toml stops every command the way it stops the TUI:
// the same message (file, line, entry), exit 2, nothing created.
func TestE2EConfigCheckedByEveryCommand(t *testing.T) {
	t.Parallel()
	cases := []struct{ config, want string }{
		{"theme = \"dark\"\n\n[keys]\n\"global.quit\" = [\"q\"]\n\"global.nonsense\" = [\"x\"]\n", `config.toml:5: keys: unknown action "global.nonsense"`},
		{"[keys]\n\"global.help\" = [\"ctrl+shift+banana\"]\n", `config.toml:2: keys: action "global.help": key "ctrl+shift+banana": "banana" is not a key`},
		{"backend = \"local\"\ntheme = \"solarized\"\n", `config.toml:2: theme "solarized": not dark, light, high-contrast, auto or a theme file`},
		{"theme = \"mine.toml\"\n", `config.toml:1: read theme`},
		{"[colors]\naccent = \"#12\"\n", `config.toml:2: colors: accent = "#12" is not a colour`},
		{"[colors]\naccnt = \"#123\"\n", `config.toml:2: colors: unknown colour role "accnt"`},
		{"[keys]\n\"global.help\" = [\"q\"]\n", `config.toml:2: keys: "q" is bound to both global.quit and global.help`},
		{"isolation = \"tree\"\nthme = \"dark\"\n", `config.toml:2: thme: unknown key`},
		{"\nisolation = tree\n", `config.toml:2: `},
		{"[agents.x]\nextends = \"claude\"\nprompt = \"stdin\"\n", `config.toml:3: agents.x.prompt: is "stdin"; use "arg", "flag", "pty" or "none"`},
		{"[agents.y]\nextends = \"nosuch\"\n", `agents.y.extends: `},
		{"[agents.claude]\ncommnd = [\"x\"]\n", `config.toml:2: agents.claude.commnd: unknown key`},
		{"kill_grace = \"soon\"\n", `config.toml:1: kill_grace: "soon": want a positive duration`},
		// One key may be written as a string; it is checked like a list.
		{"[keys]\n\"global.help\" = \"ctrl+shift+banana\"\n", `config.toml:2: keys: action "global.help": key "ctrl+shift+banana": "banana" is not a key`},
		{"[keys]\n\"global.help\" = 3\n", `config.toml:2: after key "keys.\"global.help\"": keys are a string ("p") or a list of strings`},
	}
	for _, tc := range cases {
		base := t.TempDir()
		cfg := filepath.Join(base, "cfg", "config.toml")
		must(t, os.MkdirAll(filepath.Dir(cfg), 0o755))
		must(t, os.WriteFile(cfg, []byte(tc.config), 0o644))
		if strings.Contains(tc.config, "mine.toml") {
			// A theme file next to the config, with a key themes do not have.
			must(t, os.WriteFile(filepath.Join(base, "cfg", "mine.toml"), []byte("base = \"dark\"\naccent = \"#fff\"\n"), 0o644))
		}
		vars := append(cleanEnv(base), "STRATA_CONFIG="+cfg)
		work := t.TempDir()
		var first string
		for _, args := range [][]string{{"ls"}, {}, {"tui"}, {"ls", "--all", "--json"}} {
			_, errs, code := runIn(t, vars, work, args...)
			if len(args) > 0 && args[len(args)-1] == "--json" { // the same message, as JSON
				var v struct {
					Error struct{ Code, Message string }
				}
				if json.Unmarshal([]byte(errs), &v) == nil && v.Error.Code == "config" {
					errs = "strata: " + v.Error.Message + "\n"
				}
			}
			if code != 2 || !strings.Contains(errs, tc.want) || !strings.Contains(errs, cfg) {
				t.Errorf("config %q: strata %v: exit %d, stderr %q; want exit 2 and %q naming %s", tc.config, args, code, errs, tc.want, cfg)
			}
			if first == "" {
				first = errs
			} else if errs != first {
				t.Errorf("config %q: strata %v says %q, strata ls says %q", tc.config, args, errs, first)
			}
		}
		ents, _ := os.ReadDir(base)
		if len(ents) != 1 {
			t.Errorf("config %q: a refused config created %v", tc.config, ents)
		}
	}
}

// docs/themes.md lists every colour role a theme file may set.
func TestThemesDocListsEveryRole(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/themes.md")
	must(t, err)
	for _, r := range themes.Roles() {
		if !strings.Contains(string(doc), "| `"+string(r)+"` |") {
			t.Errorf("docs/themes.md: role %q is missing from the Roles table", r)
		}
	}
}

// With --json an error is one JSON object on stderr with a stable code, and
// modes are octal strings in every JSON output.
func TestE2EJSONErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo changed >> a.txt")
	check := func(code, exit int, args ...string) {
		t.Helper()
		out, errs, got := e.run(args...)
		var v struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		if got != exit || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &v) != nil || v.Error.Code != codes[code] || v.Error.Message == "" {
			t.Errorf("strata %s: exit %d (want %d), stderr %q: want one JSON error with code %q (stdout %q)", strings.Join(args, " "), got, exit, errs, codes[code], out)
		}
	}
	check(notFound, 1, "show", "nope", "--json")
	check(notFound, 1, "status", "--json", "nope")
	check(usage, 2, "ls", "--bogus", "--json")
	check(usage, 2, "show", "--json")
	check(usage, 2, "exec", "w", "--json", "--", "true")
	check(exists, 1, "new", "w", "--json")
	check(unsaved, 1, "rm", "w", "--json")
	check(notFound, 1, "rollback", "w", "nosuchsnap", "--json")
	// A session looked up in a World that does not exist, or that lacks it.
	check(notFound, 1, "logs", "nope", "--json")
	check(notFound, 1, "logs", "w", "nosuch", "--json")
	if _, errs, _ := e.run("logs", "nope"); !strings.HasPrefix(errs, "strata: world not found") {
		t.Errorf("logs of a World that does not exist: %q", errs)
	}
	// Without --json the error stays text.
	if _, errs, _ := e.run("show", "nope"); !strings.HasPrefix(errs, "strata: world not found") {
		t.Errorf("text error: %q", errs)
	}
	// Modes: octal strings, in status and in diff.
	var st struct {
		Changes []struct {
			Mode any `json:"mode"`
		} `json:"changes"`
	}
	must(t, json.Unmarshal([]byte(e.ok("status", "w", "--json")), &st))
	var df []struct {
		Old struct {
			Mode any `json:"mode"`
		} `json:"old"`
		New struct {
			Mode any `json:"mode"`
		} `json:"new"`
	}
	must(t, json.Unmarshal([]byte(e.ok("diff", "w", "--json")), &df))
	if len(st.Changes) != 1 || st.Changes[0].Mode != "0644" || len(df) != 1 || df[0].Old.Mode != "100644" || df[0].New.Mode != "100644" {
		t.Errorf("modes: status %+v, diff %+v; want \"0644\" and \"100644\"", st.Changes, df)
	}
}

const (
	usage = iota
	notFound
	exists
	unsaved
)

var codes = map[int]string{usage: "usage", notFound: "not_found", exists: "exists", unsaved: "unsaved_work"}

// The completion scripts are valid for their shells, and what they ask
// (strata __complete) lists verbs, flags, Worlds, sessions and snapshots,
// creating nothing.
func TestE2ECompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		script := e.ok("completion", sh)
		if _, err := exec.LookPath(sh); err != nil {
			if sh == "fish" {
				t.Logf("fish not installed: its script is not syntax-checked")
				continue
			}
			t.Fatalf("%s not installed (make deps installs it): %v", sh, err)
		}
		c := exec.Command(sh, "-n")
		c.Stdin = strings.NewReader(script)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("%s -n rejects strata completion %s: %v\n%s", sh, sh, err, out)
		}
	}
	complete := func(words ...string) []string {
		t.Helper()
		return strings.Fields(e.ok(append([]string{"__complete"}, words...)...))
	}
	// Nothing exists yet: no Worlds, and asking creates no state root.
	if got := complete("status", ""); len(got) != 0 {
		t.Errorf("__complete status '' with no state root: %q", got)
	}
	if _, err := os.Stat(e.home); err == nil {
		t.Fatalf("__complete created the state root %s", e.home)
	}
	e.ok("new", "alpha")
	e.ok("new", "beta")
	id := strings.TrimSpace(e.ok("exec", "alpha", "--detach", "--", "true"))
	var snap struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal([]byte(e.ok("snap", "alpha", "-m", "one", "--json")), &snap))
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"sta"}, []string{"status"}},
		{[]string{"comp"}, []string{"compare", "completion"}},
		{[]string{"status", ""}, []string{"alpha", "beta"}},
		{[]string{"status", "a"}, []string{"alpha"}},
		{[]string{"apply", "--dr"}, []string{"--drop-applied", "--dry-run"}},
		{[]string{"logs", "-"}, []string{"--json", "--raw", "-f"}},
		{[]string{"logs", "alpha", ""}, []string{id}},
		{[]string{"rollback", "alpha", ""}, []string{snap.ID}},
		{[]string{"fork", "alpha", "--snap", ""}, []string{snap.ID}},
		{[]string{"exec", "--isolation", ""}, []string{"sandbox", "strict", "tree"}},
		{[]string{"events", "--world", "b"}, []string{"beta"}},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
	} {
		got := complete(tc.words...)
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("__complete %q = %q, want %q", tc.words, got, tc.want)
		}
	}
	// bash itself, through the script: strata status <TAB> offers the Worlds.
	script := e.ok("completion", "bash")
	c := exec.Command("bash", "-c", script+"\nCOMP_WORDS=(strata status ''); COMP_CWORD=2; _strata; printf '%s\\n' \"${COMPREPLY[@]}\"")
	c.Env = append(append(os.Environ(), e.vars...), "PATH="+filepath.Dir(strataBin)+":"+os.Getenv("PATH"))
	c.Dir = e.source
	out, err := c.CombinedOutput()
	if err != nil || strings.Fields(string(out))[0] != "alpha" || !strings.Contains(string(out), "beta") {
		t.Errorf("bash completion of 'strata status ': %v %q", err, out)
	}
}
