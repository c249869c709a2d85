package agent

import (
	"regexp"
	"sync"
)

// lazyRegexp is a regexp compiled on its first use. A package-level
// regexp.MustCompile runs in every strata process, the CLI and each
// session's re-executed init alike, where these patterns are rarely needed:
// hostName alone compiles to a program of some 200 KB.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
