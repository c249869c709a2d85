package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

type pathWriteJSON struct {
	Session string    `json:"session"`
	Command []string  `json:"command"`
	Op      string    `json:"op"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
}

// Two sessions in one World: blame names the right session for each path,
// a path both wrote lists both in order, and status --json carries it.
func TestE2EBlame(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo 1 > first.txt; echo x >> a.txt")
	e.ok("exec", "w", "--", "sh", "-c", "echo 2 > second.txt; echo y >> a.txt")
	var sessions []struct {
		ID   string   `json:"id"`
		Argv []string `json:"argv"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &sessions))
	if len(sessions) != 2 {
		t.Fatalf("%d sessions", len(sessions))
	}
	s1, s2 := sessions[0].ID, sessions[1].ID
	blame := func(path string) []pathWriteJSON {
		var out struct {
			Path   string          `json:"path"`
			Writes []pathWriteJSON `json:"writes"`
		}
		must(t, json.Unmarshal([]byte(e.ok("blame", "w", path, "--json")), &out))
		return out.Writes
	}
	for path, want := range map[string][]string{"first.txt": {s1}, "second.txt": {s2}, "a.txt": {s1, s2}} {
		ws := blame(path)
		var got []string
		for _, w := range ws {
			got = append(got, w.Session)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("blame %s: %v, want %v", path, got, want)
		}
	}
	if ws := blame("a.txt"); len(ws) == 2 && (ws[0].Op != "write" || !ws[0].Last.Before(ws[1].First)) {
		t.Errorf("blame a.txt: %+v", ws)
	}
	if ws := blame("first.txt"); len(ws) == 1 && (ws[0].Op != "create" || ws[0].Command[2] != "echo 1 > first.txt; echo x >> a.txt") {
		t.Errorf("blame first.txt: %+v", ws)
	}
	if ws := blame("keep.txt"); len(ws) != 0 {
		t.Errorf("blame of an untouched path: %+v", ws)
	}
	text := e.ok("blame", "w", filepath.Join(e.source, "a.txt"))
	if !strings.Contains(text, s1) || !strings.Contains(text, s2) || strings.Index(text, s1) > strings.Index(text, s2) {
		t.Errorf("blame text:\n%s", text)
	}
	var st struct {
		Changes []struct {
			Path       string          `json:"path"`
			Provenance []pathWriteJSON `json:"provenance"`
		} `json:"changes"`
	}
	must(t, json.Unmarshal([]byte(e.ok("status", "w", "--json")), &st))
	for _, c := range st.Changes {
		if c.Path == "a.txt" && len(c.Provenance) != 2 || c.Path == "second.txt" && (len(c.Provenance) != 1 || c.Provenance[0].Session != s2) {
			t.Errorf("status --json %s provenance: %+v", c.Path, c.Provenance)
		}
	}
	e.fails(2, "missing", "blame", "w")
}

type resourcesJSON struct {
	World          string  `json:"world"`
	Accounting     string  `json:"accounting"`
	Running        int     `json:"running_sessions"`
	Processes      int     `json:"processes"`
	CPUPercent     float64 `json:"cpu_percent"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	UpperBytes     int64   `json:"upper_bytes"`
	UpperDiskBytes int64   `json:"upper_disk_bytes"`
}

func du(t *testing.T, args ...string) int64 {
	t.Helper()
	out, err := exec.Command("du", args...).Output()
	must(t, err)
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	must(t, err)
	return n
}

// A CPU-bound World and an idle one: top --json tells them apart, and the
// upper sizes match du; the live table redraws in place.
func TestE2ETop(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "busy")
	e.ok("new", "idle")
	e.ok("exec", "idle", "--", "sh", "-c", "head -c 50000 /dev/urandom > blob; rm sub/b.txt; mkdir -p d/e; echo f > d/e/f")
	e.ok("exec", "busy", "--detach", "--", "sh", "-c", "while :; do :; done")
	e.ok("exec", "idle", "--detach", "--", "sleep", "30")
	var rs []resourcesJSON
	must(t, json.Unmarshal([]byte(e.ok("top", "--json", "--interval", "600ms")), &rs))
	by := map[string]resourcesJSON{}
	for _, r := range rs {
		by[r.World] = r
	}
	busy, idle := by["busy"], by["idle"]
	t.Logf("busy %+v idle %+v", busy, idle)
	if busy.Running != 1 || idle.Running != 1 || busy.Processes < 1 || idle.Processes < 1 {
		t.Errorf("sessions or processes missing: busy %+v idle %+v", busy, idle)
	}
	if busy.CPUPercent < 20 || idle.CPUPercent > 5 || busy.CPUPercent < 4*idle.CPUPercent {
		t.Errorf("cpu: busy %.1f%%, idle %.1f%%", busy.CPUPercent, idle.CPUPercent)
	}
	upper := filepath.Join(e.home, "worlds", "idle", "upper")
	if want := du(t, "-sb", upper); idle.UpperBytes != want {
		t.Errorf("upper_bytes %d, du -sb %d", idle.UpperBytes, want)
	}
	if want := du(t, "-s", "-B1", upper); idle.UpperDiskBytes != want {
		t.Errorf("upper_disk_bytes %d, du -s -B1 %d", idle.UpperDiskBytes, want)
	}
	live := e.onTerminal("top", "--count", "2", "--interval", "200ms", "busy", "idle")
	if strings.Count(live, "\x1b[H") != 3 || strings.Contains(live, "\x1b[2J\x1b[H") && strings.Count(live, "\x1b[2J") != 1 {
		t.Errorf("live table does not redraw in place: %q", live)
	}
	if !strings.Contains(live, "busy") || !strings.Contains(live, "CPU%") {
		t.Errorf("live table: %q", live)
	}
}

type compareJSON struct {
	Paths []struct {
		Path      string   `json:"path"`
		ChangedBy []string `json:"changed_by"`
		Agree     bool     `json:"agree"`
		Versions  []struct {
			Worlds []string `json:"worlds"`
			Hash   string   `json:"hash"`
		} `json:"versions"`
	} `json:"paths"`
	Agreed    int `json:"agreed"`
	Disagreed int `json:"disagreed"`
}

// Fan-out of a script over 3 forks, each writing its own result: the summary
// lists all three with their exit statuses; compare shows the disagreement
// on the shared path and agreement on the inherited one; adopting one
// World's version publishes exactly it; diff --against-world shows the two.
func TestE2EForkFanOutCompareAdopt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "t")
	e.ok("exec", "t", "--", "sh", "-c", "echo inherited > common.txt")
	script := `n=$(uname -n); echo "result of $n" > result.txt; case $n in *-3) exit 3;; esac`
	out, errs, code := e.run("fork", "t", "-n", "3", "--", "sh", "-c", script)
	if code != 1 {
		t.Fatalf("fork fan-out: exit %d (want 1: one World failed)\n%s\n%s", code, out, errs)
	}
	summary := out[strings.Index(out, "WORLD"):]
	for _, want := range []string{"t-1 ", "t-2 ", "t-3 "} {
		line := ""
		for l := range strings.SplitSeq(summary, "\n") {
			if strings.HasPrefix(l, want) {
				line = l
			}
		}
		wantExit := "0"
		if want == "t-3 " {
			wantExit = "3"
		}
		if f := strings.Fields(line); len(f) < 4 || f[1] != wantExit || !strings.Contains(line, "result.txt") {
			t.Errorf("summary line for %s: %q\n%s", want, line, summary)
		}
	}

	var cmp compareJSON
	must(t, json.Unmarshal([]byte(e.ok("compare", "t-1", "t-2", "t-3", "--json")), &cmp))
	seen := map[string]bool{}
	for _, p := range cmp.Paths {
		seen[p.Path] = true
		switch p.Path {
		case "result.txt":
			if p.Agree || len(p.Versions) != 3 || len(p.ChangedBy) != 3 {
				t.Errorf("result.txt: %+v", p)
			}
		case "common.txt":
			if !p.Agree || len(p.Versions) != 1 || len(p.Versions[0].Worlds) != 3 {
				t.Errorf("common.txt: %+v", p)
			}
		}
	}
	if !seen["result.txt"] || !seen["common.txt"] || seen["a.txt"] || cmp.Agreed != 1 || cmp.Disagreed != 1 {
		t.Errorf("compare: %+v", cmp)
	}
	text := e.ok("compare", "t-1", "t-2", "t-3")
	if !strings.Contains(text, "≠ result.txt") || !strings.Contains(text, "= common.txt") || !strings.Contains(text, "1 agree, 1 disagree") {
		t.Errorf("compare text:\n%s", text)
	}

	diff := e.ok("diff", "t-1", "--against-world", "t-2", "result.txt")
	if !strings.Contains(diff, "-result of t-2\n") || !strings.Contains(diff, "+result of t-1\n") {
		t.Errorf("diff --against-world:\n%s", diff)
	}

	e.ok("apply", "t-2", "result.txt")
	if got := e.readSource("result.txt"); got != "result of t-2\n" {
		t.Errorf("adopted result.txt = %q", got)
	}
	if got := e.readSource("common.txt"); !strings.HasPrefix(got, "<") {
		t.Errorf("adopting result.txt also published common.txt: %q", got)
	}
}

// strata events -f, started first, sees a scenario run from other processes,
// in order. (It was serial while the engine could log session.ended before
// session.started; engine/local now logs them in order.)
func TestE2EEventsFollow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "pre")
	follow := e.cmd("events", "-f", "--json")
	stdout, err := follow.StdoutPipe()
	must(t, err)
	must(t, follow.Start())
	t.Cleanup(func() { _ = follow.Process.Kill(); _ = follow.Wait() })
	lines := make(chan map[string]any, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				lines <- ev
			}
		}
		close(lines)
	}()
	next := func() map[string]any {
		select {
		case ev, ok := <-lines:
			if !ok {
				t.Fatal("strata events -f ended")
			}
			return ev
		case <-time.After(30 * time.Second):
			t.Fatal("strata events -f printed nothing for 30 s")
		}
		return nil
	}
	if ev := next(); ev["type"] != "world.created" || ev["world"] != "pre" {
		t.Fatalf("first event %v", ev)
	}

	e.ok("new", "sc")
	e.ok("exec", "sc", "--", "sh", "-c", "echo v > v.txt")
	e.ok("snap", "sc", "-m", "one")
	e.ok("apply", "sc")
	e.ok("rm", "sc", "--force")
	want := []string{"world.created", "session.started", "session.ended", "snapshot.taken", "apply.done", "world.removed"}
	var got []string
	for len(got) < len(want) {
		ev := next()
		if ev["world"] != "sc" {
			continue
		}
		got = append(got, ev["type"].(string))
		if ev["type"] == "session.ended" {
			if d, _ := ev["detail"].(map[string]any); d["exit_code"] != float64(0) || d["paths_written"] != float64(1) {
				t.Errorf("session.ended detail: %v", d)
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("events:\n got %v\nwant %v", got, want)
	}
}
