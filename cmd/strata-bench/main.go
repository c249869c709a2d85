// Command strata-bench times strata against what a user would otherwise do
// (git worktree add, cp -a, git status) on generated trees, in one run, and
// prints a table. `make bench` runs it; `make bench BIG=1` adds a
// 1,000,000-file tree.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratahq/strata/engine/session"
)

type row struct {
	group    string
	name     string
	strata   []time.Duration
	baseName string
	baseline []time.Duration
	target   time.Duration
	note     string
	zero     bool // 0 is a measurement (CPU time), printed as 0
	// A row of sizes, not times (peak RSS): values in unit, target maxVal.
	values []float64
	unit   string
	maxVal float64
}

type bench struct {
	ctx      context.Context
	dir      string
	bin      string
	runs     int
	baseRuns int
	rows     []row
	logf     func(string, ...any)
	// cpu is the CPU time (user+system) of each run of the last timeCmd,
	// which a loaded machine does not inflate as it does wall time.
	cpu []time.Duration
}

func main() {
	start := time.Now()
	// Run in the background (SIGINT ignored), strata would give each
	// session an init of its own: time what a terminal's user gets.
	session.CatchIgnoredJobSignals()
	big := flag.Bool("big", false, "also measure a 1,000,000-file tree")
	dir := flag.String("dir", filepath.Join(os.TempDir(), "strata-bench"), "work directory (generated trees are cached here)")
	bin := flag.String("bin", "bin/strata", "strata binary")
	runs := flag.Int("runs", 15, "runs per strata measurement (median reported)")
	baseRuns := flag.Int("baseline-runs", 3, "runs per slow baseline (cp -a, git worktree add)")
	only := flag.String("only", "", "comma-separated groups to run (worlds,snapshots,snapshots-api,apply,tui,million,many-worlds,many-changes,reflink,ccache)")
	flag.IntVar(&scaleFiles, "scale-files", 0, "files in the million group's tree (0 = 1,000,000 with -big, else the group is skipped)")
	flag.IntVar(&scaleWorlds, "scale-worlds", scaleWorlds, "Worlds in the many-worlds group")
	flag.IntVar(&scaleChanged, "scale-changed", scaleChanged, "changed files in the many-changes group")
	flag.Int64Var(&cowSize, "cow-size", cowSize, "bytes of the big file and of the changed binaries in the reflink group")
	probe := flag.Bool("tui-probe", false, "internal: run the TUI with a frame timer and print its figures (many-worlds)")
	probeSrc := flag.String("probe-src", "", "internal: the -tui-probe source tree")
	probeWant := flag.String("probe-want", "", "internal: text the -tui-probe first frame shows")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (with -tui-probe: of the TUI) to this file")
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *probe {
		if err := tuiProbe(start, abs, *probeSrc, *probeWant); err != nil {
			pprof.StopCPUProfile()
			fatal(err)
		}
		return
	}
	b := &bench{
		ctx: context.Background(), dir: *dir, bin: abs, runs: *runs, baseRuns: *baseRuns,
		logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+f+"\n", a...) },
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		fatal(err)
	}
	want := func(g string) bool { return *only == "" || strings.Contains(","+*only+",", ","+g+",") }
	sizes := []int{10_000, 100_000}
	if *big {
		sizes = append(sizes, 1_000_000)
	}
	for _, g := range groups {
		if want(g.name) {
			if err := g.run(b, sizes); err != nil {
				fatal(fmt.Errorf("%s: %w", g.name, err))
			}
		}
	}
	b.print()
}

type group struct {
	name string
	run  func(b *bench, sizes []int) error
}

// groups is filled by the files of this command, one per area.
var groups []group

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "strata-bench:", err)
	os.Exit(1)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func spread(ds []time.Duration, zero bool) string {
	if len(ds) == 0 {
		return ""
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("%s–%s", fmtDurZ(s[0], zero), fmtDurZ(s[len(s)-1], zero))
}

func medianVal(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func minMax(vs []float64) (float64, float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

func fmtVal(v float64, unit string) string { return fmt.Sprintf("%.1f %s", v, unit) }

// fmtDurZ is fmtDur, with 0 printed as 0 where it is a measurement.
func fmtDurZ(d time.Duration, zero bool) string {
	if zero && d == 0 {
		return "0"
	}
	return fmtDur(d)
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func (b *bench) add(r row) {
	b.rows = append(b.rows, r)
	if r.unit != "" {
		b.logf("%-45s strata %s", r.name, fmtVal(medianVal(r.values), r.unit))
		return
	}
	b.logf("%-45s strata %s  %s %s", r.name, fmtDur(median(r.strata)), r.baseName, fmtDur(median(r.baseline)))
}

func (b *bench) print() {
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tOPERATION\tSTRATA (median)\tRANGE\tRUNS\tBASELINE\tBASELINE (median)\tSPEEDUP\tTARGET\tMET")
	for _, r := range b.rows {
		if r.unit != "" {
			tgt, met := "", ""
			if r.maxVal > 0 {
				tgt, met = "≤ "+fmtVal(r.maxVal, r.unit), "yes"
				if medianVal(r.values) > r.maxVal {
					met = "NO"
				}
			}
			lo, hi := minMax(r.values)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s–%s\t%d\t-\t-\t\t%s\t%s\n", r.group, r.name, fmtVal(medianVal(r.values), r.unit),
				fmtVal(lo, r.unit), fmtVal(hi, r.unit), len(r.values), tgt, met)
			continue
		}
		m, bm := median(r.strata), median(r.baseline)
		ms := fmtDurZ(m, r.zero)
		speed, met, tgt := "", "", ""
		if bm > 0 && m > 0 {
			speed = fmt.Sprintf("%.0fx", float64(bm)/float64(m))
			if r := float64(bm) / float64(m); r < 10 {
				speed = fmt.Sprintf("%.1fx", r) // 0.2x: the baseline is faster
			}
		}
		if r.target > 0 {
			tgt = "≤ " + fmtDur(r.target)
			met = "yes"
			if m > r.target {
				met = "NO"
			}
		}
		base := r.baseName
		if base == "" {
			base = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.group, r.name, ms, spread(r.strata, r.zero), len(r.strata), base, fmtDur(bm), speed, tgt, met)
	}
	_ = tw.Flush()
	for _, r := range b.rows {
		if r.note != "" {
			fmt.Printf("note: %s: %s\n", r.name, r.note)
		}
	}
}

// timeCmd runs a command n times and returns each wall time; setup runs
// before each (untimed).
func (b *bench) timeCmd(n int, setup func(i int) error, name string, args func(i int) []string, env []string, dir string) ([]time.Duration, error) {
	return b.timeCmdExit(n, setup, name, args, env, dir, 0)
}

// timeCmdExit is timeCmd for commands whose success is exit status okCode
// as well as 0 (git diff exits 1 when files differ).
func (b *bench) timeCmdExit(n int, setup func(i int) error, name string, args func(i int) []string, env []string, dir string, okCode int) ([]time.Duration, error) {
	var out []time.Duration
	b.cpu = nil
	for i := 0; i < n; i++ {
		if setup != nil {
			if err := setup(i); err != nil {
				return nil, err
			}
		}
		cmd := exec.Command(name, args(i)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = dir
		start := time.Now()
		outb, err := cmd.CombinedOutput()
		d := time.Since(start)
		if ee, ok := err.(*exec.ExitError); ok && okCode != 0 && ee.ExitCode() == okCode {
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args(i), " "), err, outb)
		}
		out = append(out, d)
		if ps := cmd.ProcessState; ps != nil {
			b.cpu = append(b.cpu, ps.UserTime()+ps.SystemTime())
		}
	}
	return out, nil
}

func (b *bench) timeFunc(n int, setup func(i int) error, fn func(i int) error) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < n; i++ {
		if setup != nil {
			if err := setup(i); err != nil {
				return nil, err
			}
		}
		start := time.Now()
		if err := fn(i); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

var execCommand = exec.Command
