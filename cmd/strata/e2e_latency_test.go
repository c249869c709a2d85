package main

import (
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// initCost is one package's line of GODEBUG=inittrace=1.
type initCost struct {
	pkg           string
	bytes, allocs int
}

// packageInits runs strata with GODEBUG=inittrace=1 and returns what each
// package's init allocated, most allocations first. Allocation counts, not
// times: they are the same on a busy machine as on a quiet one.
func packageInits(t *testing.T, args ...string) []initCost {
	t.Helper()
	c := exec.Command(strataBin, args...)
	c.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, _ := c.CombinedOutput()
	var costs []initCost
	for line := range strings.Lines(string(out)) {
		// init github.com/x/y @1.2 ms, 0.41 ms clock, 200656 bytes, 1982 allocs
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" || f[10] != "allocs" {
			continue
		}
		b, err1 := strconv.Atoi(f[7])
		a, err2 := strconv.Atoi(f[9])
		if err1 != nil || err2 != nil {
			t.Fatalf("unexpected inittrace line %q", line)
		}
		costs = append(costs, initCost{pkg: f[1], bytes: b, allocs: a})
	}
	if len(costs) == 0 {
		t.Fatalf("strata %v with GODEBUG=inittrace=1 printed no init lines:\n%s", args, out)
	}
	sort.Slice(costs, func(i, j int) bool { return costs[i].allocs > costs[j].allocs })
	return costs
}

// TestPackageInitsStayCheap: every strata process, the CLI and each
// session's re-executed init alike, runs every linked package's init before
// main, so `strata exec W -- true` pays them twice. A package-level
// regexp.MustCompile (engine/agent's host-name pattern alone was ~2000
// allocations, 200 KB) or table built at init is paid by every exec; they
// are built on first use instead. The budget is on allocations, which a
// busy machine does not change.
func TestPackageInitsStayCheap(t *testing.T) {
	const (
		perStrataPackage = 200  // main's command table is ~130
		total            = 1200 // ~760, of which the standard library and deps ~500
	)
	for _, args := range [][]string{{"--version"}, {"__session-init"}} {
		costs := packageInits(t, args...)
		sum := 0
		for _, c := range costs {
			sum += c.allocs
			if (c.pkg == "main" || strings.HasPrefix(c.pkg, "github.com/stratahq/strata/")) && c.allocs > perStrataPackage {
				t.Errorf("strata %v: package %s allocates %d times (%d bytes) at init, over %d: build it on first use (sync.OnceValue)",
					args, c.pkg, c.allocs, c.bytes, perStrataPackage)
			}
		}
		if sum > total {
			top := costs[:min(5, len(costs))]
			t.Errorf("strata %v: package inits allocate %d times in all, over %d; the most: %+v", args, sum, total, top)
		}
	}
}
