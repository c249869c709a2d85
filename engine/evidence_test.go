package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/cgroup"
	"github.com/stratahq/strata/engine/local"
)

// evidenceEngine is testEngine whose Worlds' cgroups are removed at the end.
func evidenceEngine(t *testing.T) (*Engine, string) {
	t.Helper()
	e, src := testEngine(t)
	t.Cleanup(func() {
		ws, _ := e.Worlds()
		for _, w := range ws {
			for _, id := range e.runningSessions(w) {
				_ = KillSession(e.SessionDir(w.Name, id), syscall.SIGKILL)
				_, _ = WaitSession(context.Background(), e.SessionDir(w.Name, id))
			}
			cgroup.RemoveWorld(w)
		}
	})
	return e, src
}

func startScript(t *testing.T, e *Engine, world, script string) SessionMeta {
	t.Helper()
	meta, err := e.Exec(context.Background(), world, ExecOptions{Argv: []string{"/bin/sh", "-c", script}, Env: []string{defaultPath}})
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

func runScript(t *testing.T, e *Engine, world, script string) SessionMeta {
	t.Helper()
	meta := startScript(t, e, world, script)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	end, err := WaitSession(ctx, e.SessionDir(world, meta.ID))
	if err != nil {
		t.Fatal(err)
	}
	if end.ExitCode != 0 {
		t.Fatalf("%q in %s: exit %d %s", script, world, end.ExitCode, end.Error)
	}
	return end
}

// Two sessions in one World: each path is blamed on the session that wrote
// it, a path both wrote lists both in order, and deletions are recorded.
func TestProvenanceTwoSessions(t *testing.T) {
	e, src := evidenceEngine(t)
	mountedWorld(t, e, src, "prov")
	s1 := runScript(t, e, "prov", "echo one > one.txt; echo a >> d0/f0.txt; sleep 0.05")
	s2 := runScript(t, e, "prov", "echo two > two.txt; echo b >> d0/f0.txt; rm d1/f1.txt")
	prov, err := e.Provenance("prov")
	if err != nil {
		t.Fatal(err)
	}
	check := func(path string, sessions []string, op string) {
		t.Helper()
		ws := prov[path]
		if len(ws) != len(sessions) {
			t.Fatalf("%s: %d writers %+v, want %v", path, len(ws), ws, sessions)
		}
		for i, id := range sessions {
			if ws[i].Session != id {
				t.Errorf("%s: writer %d is %s, want %s", path, i, ws[i].Session, id)
			}
			if ws[i].First.IsZero() || ws[i].Last.Before(ws[i].First) {
				t.Errorf("%s: bad times %+v", path, ws[i])
			}
		}
		if ws[len(ws)-1].Op != op {
			t.Errorf("%s: op %q, want %q", path, ws[len(ws)-1].Op, op)
		}
		if ws[0].Command[0] != "/bin/sh" {
			t.Errorf("%s: command %v", path, ws[0].Command)
		}
	}
	check("one.txt", []string{s1.ID}, OpCreate)
	check("two.txt", []string{s2.ID}, OpCreate)
	check("d0/f0.txt", []string{s1.ID, s2.ID}, OpWrite)
	check("d1/f1.txt", []string{s2.ID}, OpDelete)
	if ws := prov["d0/f0.txt"]; !ws[0].Last.Before(ws[1].First) {
		t.Errorf("d0/f0.txt: first session's last write %v not before the second's first %v", ws[0].Last, ws[1].First)
	}
	// The writes happened while the sessions ran. Write times are when the
	// watcher saw the event, which may come a moment after the command ended.
	if w := prov["two.txt"][0]; w.First.Before(s2.StartedAt.Add(-local.CtimeSlack)) || w.Last.After(s2.EndedAt.Add(local.CtimeSlack)) {
		t.Errorf("two.txt written %v..%v, outside session %v..%v", w.First, w.Last, s2.StartedAt, s2.EndedAt)
	}
	rel, ws, err := e.Blame("prov", filepath.Join(src, "d0", "f0.txt"))
	if err != nil || rel != "d0/f0.txt" || len(ws) != 2 {
		t.Errorf("Blame by absolute path: %q %v %v", rel, ws, err)
	}
	if _, _, err := e.Blame("prov", "/etc/passwd"); err == nil {
		t.Error("Blame of a path outside the source did not fail")
	}
}

// A fork inherits its parent's provenance as of the snapshot: each write
// names the parent World; writes the parent made after the snapshot are
// not the fork's; the fork's own sessions come after; a fork of a fork
// keeps the first World's name.
func TestForkInheritsProvenance(t *testing.T) {
	e, src := evidenceEngine(t)
	mountedWorld(t, e, src, "parent")
	s1 := runScript(t, e, "parent", "echo one > one.txt; echo a >> d0/f0.txt")
	snap, err := e.Snapshot(context.Background(), "parent", SnapshotOptions{Message: "base"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	runScript(t, e, "parent", "echo later > later.txt; echo b >> d0/f0.txt")
	if _, err := e.Fork(context.Background(), "parent", ForkOptions{N: 1, Snap: snap.ID, Prefix: "kid"}); err != nil {
		t.Fatal(err)
	}
	prov, err := e.Provenance("kid-1")
	if err != nil {
		t.Fatal(err)
	}
	if ws := prov["one.txt"]; len(ws) != 1 || ws[0].World != "parent" || ws[0].Session != s1.ID || ws[0].Command[0] != "/bin/sh" {
		t.Errorf("one.txt in the fork: %+v", ws)
	}
	if ws := prov["d0/f0.txt"]; len(ws) != 1 || ws[0].Session != s1.ID || ws[0].Last.After(snap.Time) {
		t.Errorf("d0/f0.txt in the fork (the parent's later write is not the fork's): %+v", ws)
	}
	if ws := prov["later.txt"]; len(ws) != 0 {
		t.Errorf("later.txt, written after the snapshot, is in the fork's provenance: %+v", ws)
	}
	own := runScript(t, e, "kid-1", "echo c >> d0/f0.txt")
	_, ws, err := e.Blame("kid-1", "d0/f0.txt")
	if err != nil || len(ws) != 2 || ws[0].World != "parent" || ws[1].Session != own.ID || ws[1].World != "" {
		t.Errorf("blame in the fork after its own write: %+v %v", ws, err)
	}
	grand, err := e.Fork(context.Background(), "kid-1", ForkOptions{N: 1, Prefix: "grandkid"})
	if err != nil {
		t.Fatal(err)
	}
	_, ws, err = e.Blame(grand[0].Name, "d0/f0.txt")
	if err != nil || len(ws) != 2 || ws[0].World != "parent" || ws[1].World != "kid-1" {
		t.Errorf("blame in a fork of a fork: %+v %v", ws, err)
	}
}

// The watcher captures the base right after the copy-up: a person's edit of
// the source 50 ms after the World wrote the file is merged by apply, not
// overwritten.
func TestBaseCapturedBeforeSourceEdit(t *testing.T) {
	e, src := evidenceEngine(t)
	var lines []string
	for i := range 12 {
		lines = append(lines, "line "+strconv.Itoa(i))
	}
	original := strings.Join(lines, "\n") + "\n"
	writeFile(t, filepath.Join(src, "merge.txt"), original)
	mountedWorld(t, e, src, "fast")
	meta := startScript(t, e, "fast", "sed -i 's/^line 1$/line 1 by the world/' merge.txt; sleep 0.4")
	upperFile := filepath.Join(e.Paths.Upper("fast"), "merge.txt")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if data, err := os.ReadFile(upperFile); err == nil && strings.Contains(string(data), "by the world") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the World never wrote merge.txt")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	edited := strings.Replace(original, "line 10\n", "line 10 by the person\n", 1)
	edit := time.Now()
	writeFile(t, filepath.Join(src, "merge.txt"), edited)
	if _, err := WaitSession(context.Background(), e.SessionDir("fast", meta.ID)); err != nil {
		t.Fatal(err)
	}
	rec, err := e.bases("fast").Get("merge.txt")
	if err != nil || rec == nil {
		t.Fatalf("no base: %v", err)
	}
	if !rec.CapturedAt.Before(edit) || rec.Late {
		t.Errorf("base captured at %v (late %v), the source was edited at %v", rec.CapturedAt, rec.Late, edit)
	}
	res, err := e.Apply(context.Background(), "fast", ApplyOptions{Picks: []Pick{{Path: "merge.txt"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Paths) != 1 || res.Paths[0].Action != "merge" {
		t.Errorf("apply: %+v, want one merge", res.Paths)
	}
	got := readFile(t, filepath.Join(src, "merge.txt"))
	if !strings.Contains(got, "line 1 by the world\n") || !strings.Contains(got, "line 10 by the person\n") {
		t.Errorf("after apply the source is\n%s\nwant both the World's and the person's edit", got)
	}
}

func duBytes(t *testing.T, args ...string) int64 {
	t.Helper()
	out, err := exec.Command("du", args...).Output()
	if err != nil {
		t.Fatalf("du %v: %v", args, err)
	}
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A CPU-bound World and an idle one are told apart, by the cgroup and by the
// /proc fallback, and the upper's size is what du says.
func TestResourcesBusyVsIdle(t *testing.T) {
	for _, mode := range []string{"cgroup", "proc"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "cgroup" && cgroup.V2Root() == "" {
				t.Skip("no writable cgroup v2 hierarchy on this machine")
			}
			if mode == "proc" {
				cgroup.Disabled.Store(true)
				t.Cleanup(func() { cgroup.Disabled.Store(false) })
			}
			e, src := evidenceEngine(t)
			mountedWorld(t, e, src, "busy")
			mountedWorld(t, e, src, "idle")
			runScript(t, e, "idle", "head -c 100000 /dev/zero > blob; ln blob blob-link; rm d2/f0.txt; mkdir -p new/dir; ln -s d0 link2")
			startScript(t, e, "busy", "while :; do :; done")
			startScript(t, e, "idle", "sleep 30")
			rs, err := e.SampleResources(context.Background(), []string{"busy", "idle"}, 600*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			busy, idle := rs[0], rs[1]
			t.Logf("busy %+v\nidle %+v", busy, idle)
			for _, r := range rs {
				if r.Accounting != mode {
					t.Errorf("%s: accounting %q, want %q", r.World, r.Accounting, mode)
				}
				if r.Running != 1 || r.Processes < 1 {
					t.Errorf("%s: %d running sessions, %d processes", r.World, r.Running, r.Processes)
				}
				if r.MemoryBytes <= 0 {
					t.Errorf("%s: memory %d", r.World, r.MemoryBytes)
				}
			}
			// The machine is shared (2 cores, parallel tests; under a load of
			// 15 a busy loop got 14%): a busy loop gets a visible share of a
			// core, an idle sleep next to nothing.
			if busy.CPUPercent < 5 || idle.CPUPercent > 2 || busy.CPUPercent < 4*idle.CPUPercent {
				t.Errorf("cpu: busy %.1f%%, idle %.1f%%", busy.CPUPercent, idle.CPUPercent)
			}
			upper := e.Paths.Upper("idle")
			if want := duBytes(t, "-sb", upper); idle.UpperBytes != want {
				t.Errorf("upper bytes %d, du -sb says %d", idle.UpperBytes, want)
			}
			if want := duBytes(t, "-s", "-B1", upper); idle.UpperDiskBytes != want {
				t.Errorf("upper disk bytes %d, du -s -B1 says %d", idle.UpperDiskBytes, want)
			}
			if idle.UpperFiles < 4 || idle.UpperDirs < 2 {
				t.Errorf("upper files %d dirs %d", idle.UpperFiles, idle.UpperDirs)
			}
		})
	}
}

// The cgroup freezer stops a World's processes and thaws them.
func TestFreezeCgroup(t *testing.T) {
	if cgroup.V2Root() == "" {
		t.Skip("no writable cgroup v2 hierarchy on this machine")
	}
	e, src := evidenceEngine(t)
	mountedWorld(t, e, src, "frz")
	startScript(t, e, "frz", "while :; do :; done")
	w, err := e.World("frz")
	if err != nil {
		t.Fatal(err)
	}
	thaw, ok := e.freezeCgroup(w)
	if !ok {
		t.Fatal("freezeCgroup did not freeze")
	}
	cpu := func() float64 {
		r, err := e.sampleResources(context.Background(), w, false)
		if err != nil {
			t.Fatal(err)
		}
		return r.CPUSeconds
	}
	a := cpu()
	time.Sleep(300 * time.Millisecond)
	if b := cpu(); b-a > 0.02 {
		t.Errorf("frozen World used %.3fs of CPU in 300 ms", b-a)
	}
	thaw()
	a = cpu()
	time.Sleep(300 * time.Millisecond)
	if b := cpu(); b-a < 0.05 {
		t.Errorf("thawed World used only %.3fs of CPU in 300 ms", b-a)
	}
}

// Three forks write different results to one path: compare shows the
// disagreement there and agreement on what they inherited; adopting one
// World's version publishes exactly it; diff --against-world shows the two.
func TestCompareAndAdopt(t *testing.T) {
	e, src := evidenceEngine(t)
	ctx := context.Background()
	m := mountedWorld(t, e, src, "cmp")
	writeFile(t, filepath.Join(m, "common.txt"), "shared by all\n")
	forks, err := e.Fork(ctx, "cmp", ForkOptions{N: 3})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, w := range forks {
		names = append(names, w.Name)
		if err := e.EnsureMounted(ctx, w); err != nil {
			t.Fatal(err)
		}
		content := "result " + strconv.Itoa(i%2) + "\n" // forks 0 and 2 agree
		writeFile(t, filepath.Join(e.Paths.Merged(w.Name), "result.txt"), content)
	}
	cmp, err := e.Compare(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]ComparedPath{}
	for _, p := range cmp.Paths {
		byPath[p.Path] = p
	}
	res := byPath["result.txt"]
	if res.Agree || len(res.Versions) != 2 || len(res.ChangedBy) != 3 {
		t.Fatalf("result.txt: %+v", res)
	}
	if got := strings.Join(res.Versions[0].Worlds, ","); got != names[0]+","+names[2] {
		t.Errorf("result.txt: first version held by %s, want %s and %s", got, names[0], names[2])
	}
	if com := byPath["common.txt"]; !com.Agree || len(com.Versions) != 1 || com.Versions[0].Source {
		t.Errorf("common.txt: %+v", com)
	}
	if _, ok := byPath["d0/f0.txt"]; ok {
		t.Error("an untouched path is listed")
	}
	if cmp.Agreed != 1 || cmp.Disagreed != 1 {
		t.Errorf("agreed %d disagreed %d", cmp.Agreed, cmp.Disagreed)
	}
	if _, err := e.Compare(ctx, []string{names[0]}); err == nil {
		t.Error("compare of one World did not fail")
	}

	fcs, err := e.Diff(ctx, names[0], DiffOptions{AgainstWorld: names[1], Paths: []string{"result.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	patch := Patch(fcs)
	if len(fcs) != 1 || !strings.Contains(patch, "-result 1\n") || !strings.Contains(patch, "+result 0\n") {
		t.Errorf("diff %s --against-world %s:\n%s", names[0], names[1], patch)
	}

	if _, err := e.Apply(ctx, names[1], ApplyOptions{Picks: []Pick{{Path: "result.txt"}}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(src, "result.txt")); got != "result 1\n" {
		t.Errorf("adopted result.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(src, "common.txt")); err == nil {
		t.Error("adopting one path published another")
	}
}

// A local World's sessions see this machine's file system: its $SHELL.
func TestShellArgvLocal(t *testing.T) {
	e, src := testEngine(t)
	if _, err := e.Create(context.Background(), CreateOptions{Name: "sh", Source: src}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHELL", "/bin/zsh")
	if argv, err := e.ShellArgv("sh", "make test"); err != nil || strings.Join(argv, " ") != "/bin/zsh -c make test" {
		t.Errorf("command line: %q %v", argv, err)
	}
	if argv, _ := e.ShellArgv("sh", ""); strings.Join(argv, " ") != "/bin/zsh -i" {
		t.Errorf("interactive: %q", argv)
	}
	t.Setenv("SHELL", "")
	if argv, _ := e.ShellArgv("sh", "ls"); argv[0] != "/bin/sh" {
		t.Errorf("without $SHELL: %q", argv)
	}
	if _, err := e.ShellArgv("nope", "ls"); err == nil {
		t.Error("a missing World gave a shell")
	}
}
