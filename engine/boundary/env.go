package boundary

import (
	"path"
	"sort"
	"strings"
)

// DefaultEnvAllow are the variables a sandboxed command gets from the caller's
// environment: what a shell and a toolchain need to run and print, nothing
// that authenticates. Entries may end in "*" (a prefix).
var DefaultEnvAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL",
	"TERM", "COLORTERM", "NO_COLOR",
	"LANG", "LANGUAGE", "LC_*", "TZ",
}

// envPattern matches a variable name: exact, or a shell glob ("LC_*", "GO*").
func envPatternMatch(pattern, name string) bool {
	if !strings.ContainsAny(pattern, "*?[") {
		return pattern == name
	}
	ok, _ := path.Match(pattern, name)
	return ok
}

// ScrubEnv keeps the variables of env (KEY=VALUE) whose names match allow, in
// their order, and returns the names it dropped, sorted: the caller's
// SSH_AUTH_SOCK, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY... never reach the
// command unless named.
func ScrubEnv(env, allow []string) (kept []string, dropped []string) {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		ok := false
		for _, p := range allow {
			if envPatternMatch(p, name) {
				ok = true
				break
			}
		}
		if ok {
			kept = append(kept, kv)
		} else {
			dropped = append(dropped, name)
		}
	}
	sort.Strings(dropped)
	return kept, dropped
}
