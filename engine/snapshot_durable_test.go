package engine

import (
	"bufio"
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay/store"
)

// syscallSpan is one traced fsync or rename: when it started and ended
// (seconds), and the path it acted on (the fd's path for an fsync, the
// destination for a rename; a temporary name for a staged file).
type syscallSpan struct {
	call       string
	path, from string
	start, end float64
}

var (
	straceLine    = regexp.MustCompile(`^(\d+)\s+(\d+\.\d+) (.*)$`)
	straceCall    = regexp.MustCompile(`^(fsync|fdatasync|syncfs|rename|renameat2?)\((.*?)(\) += (-?\d+).*<(\d+\.\d+)>| <unfinished \.\.\.>)$`)
	straceResumed = regexp.MustCompile(`^<\.\.\. (\w+) resumed>.*= (-?\d+).*<(\d+\.\d+)>$`)
	straceFdPath  = regexp.MustCompile(`^\d+<(.*)>$`)
	straceStr     = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
)

// parseStrace reads `strace -f -ttt -T -y` output of fsyncs and renames.
func parseStrace(t *testing.T, path string) []syscallSpan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pending := map[string]*syscallSpan{} // pid -> unfinished call
	var out []syscallSpan
	args := func(sp *syscallSpan, a string) {
		if strs := straceStr.FindAllStringSubmatch(a, -1); len(strs) > 0 {
			sp.from, sp.path = strs[0][1], strs[len(strs)-1][1]
			return
		}
		if m := straceFdPath.FindStringSubmatch(strings.TrimSpace(a)); m != nil {
			sp.path = m[1]
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := straceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, ts, rest := m[1], m[2], m[3]
		at, _ := strconv.ParseFloat(ts, 64)
		if c := straceCall.FindStringSubmatch(rest); c != nil {
			sp := &syscallSpan{call: c[1], start: at}
			args(sp, c[2])
			if c[4] == "" {
				pending[pid] = sp
				continue
			}
			if c[4] != "0" {
				continue // a failed call makes nothing durable
			}
			d, _ := strconv.ParseFloat(c[5], 64)
			sp.end = at + d
			out = append(out, *sp)
			continue
		}
		if r := straceResumed.FindStringSubmatch(rest); r != nil {
			sp := pending[pid]
			delete(pending, pid)
			if sp == nil || r[2] != "0" {
				continue
			}
			sp.end = at
			out = append(out, *sp)
		}
	}
	return out
}

// A snapshot is made durable in three rounds of parallel fsyncs, and every
// rename comes after everything it makes reachable is on disk: the manifest
// only once every new object, its fan-out directory and the manifest's own
// content are synced; the timeline only once the manifest's rename (the
// snapshots directory) and the timeline's content are synced; then the
// World's directory. The snapshot runs in a child under strace, so this is
// what the kernel was asked, in the order it was asked. It was five serial
// rounds (objects, manifest, snapshots dir, timeline, World dir): the chain
// check fails on that code; the order checks guard the parallel version.
func TestSnapshotDurabilityOrder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the snapshot harness mounts kernel overlays: run as root")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("no strace")
	}
	durabilityRun(t, strace)
}

// durabilityRun takes one snapshot under strace, which holds every fsync
// back 100 ms (so fsyncs the code overlaps overlap, whatever the scheduler
// does), and checks the order of its fsyncs and renames and how many serial
// rounds they take.
func durabilityRun(t *testing.T, strace string) {
	cw := crashSetup(t, t.TempDir(), false)
	st, err := cw.e.store()
	if err != nil {
		t.Fatal(err)
	}
	before := map[store.ObjectID]bool{}
	if err := st.Walk(func(id store.ObjectID) error { before[id] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "strace.out")
	cmd := exec.Command(strace, "-f", "-ttt", "-T", "-y", "-o", out,
		"-e", "trace=fsync,fdatasync,syncfs,rename,renameat,renameat2", "-e", "inject=fsync,fdatasync,syncfs:delay_enter=100000",
		testExe(t), "-test.run=^TestSnapshotCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashOpEnv+"=snap", crashRootEnv+"="+cw.e.Paths.Root, crashAtEnv+"=0", crashSnapEnv+"="+cw.s1)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("snapshot under strace: %v: %s", err, b)
	}
	tl, err := cw.e.Timeline("w")
	if err != nil || len(tl.Snapshots) != 2 {
		t.Fatalf("timeline after the snapshot: %v, %v", tl, err)
	}
	snap := tl.Snapshots[1].ID
	m, err := store.ReadManifest(cw.e.manifestPath(snap))
	if err != nil {
		t.Fatal(err)
	}
	newObjs := map[string]bool{} // object paths this snapshot added
	for _, en := range m.Entries {
		if en.Object != "" && !before[en.Object] {
			newObjs[st.Path(en.Object)] = true
		}
	}
	if len(newObjs) == 0 {
		t.Fatal("the snapshot added no object: nothing to check")
	}
	spans := parseStrace(t, out)
	manifest := cw.e.manifestPath(snap)
	timeline := cw.e.timelinePath("w")
	find := func(call, path string) syscallSpan {
		t.Helper()
		for _, s := range spans {
			if strings.HasPrefix(s.call, call) && s.path == path {
				return s
			}
		}
		t.Fatalf("no %s of %s in the trace:\n%v", call, path, spans)
		return syscallSpan{}
	}
	mRename, tRename := find("rename", manifest), find("rename", timeline)
	syncfs := false
	synced := map[string]float64{} // path -> end of its fsync that ended first
	for _, s := range spans {
		switch {
		case s.call == "syncfs":
			if s.end <= mRename.start {
				syncfs = true
			}
		case strings.HasPrefix(s.call, "f"):
			if e, ok := synced[s.path]; !ok || s.end < e {
				synced[s.path] = s.end
			}
		}
	}
	syncedBefore := func(path string, by syscallSpan, what string) {
		t.Helper()
		e, ok := synced[path]
		if !ok {
			t.Errorf("%s (%s) is never fsynced", what, path)
		} else if e > by.start {
			t.Errorf("%s (%s) fsync ends at %.6f, after the rename of %s starts (%.6f)", what, path, e, by.path, by.start)
		}
	}
	if !syncfs {
		for p := range newObjs {
			syncedBefore(p, mRename, "new object")
			syncedBefore(filepath.Dir(p), mRename, "new object's directory")
		}
	}
	syncedBefore(mRename.from, mRename, "the manifest's content")
	syncedBefore(filepath.Dir(manifest), tRename, "the snapshots directory (the manifest's rename)")
	syncedBefore(tRename.from, tRename, "the timeline's content")
	if mRename.end > tRename.start {
		t.Errorf("the timeline is renamed (%.6f) before the manifest's rename ends (%.6f)", tRename.start, mRename.end)
	}
	if e, ok := synced[filepath.Dir(timeline)]; !ok || e < tRename.end {
		// The World directory's fsync that counts is the one after the rename.
		last := 0.0
		for _, s := range spans {
			if strings.HasPrefix(s.call, "f") && s.path == filepath.Dir(timeline) && s.start >= tRename.end {
				last = s.end
			}
		}
		if last == 0 {
			t.Errorf("the World directory (%s) is not fsynced after the timeline's rename", filepath.Dir(timeline))
		}
	}
	// The longest chain of the snapshot's fsyncs each starting after the
	// previous one ended: its serial rounds. The new objects' own fsyncs
	// (four at a time) are a chain of their own; everything after them
	// must take at most two more rounds.
	objs := map[string]bool{}
	for p := range newObjs {
		objs[p], objs[filepath.Dir(p)] = true, true
	}
	mine := map[string]bool{mRename.from: true, filepath.Dir(manifest): true, tRename.from: true, filepath.Dir(timeline): true}
	chainOf := func(in func(syscallSpan) bool) int {
		var fs []syscallSpan
		for _, s := range spans {
			if (s.call == "syncfs" || strings.HasPrefix(s.call, "f")) && in(s) {
				fs = append(fs, s)
			}
		}
		slices.SortFunc(fs, func(a, b syscallSpan) int { return cmp.Compare(a.start, b.start) })
		longest := make([]int, len(fs))
		chain := 0
		for i := range fs {
			longest[i] = 1
			for j := range i {
				if fs[j].end <= fs[i].start {
					longest[i] = max(longest[i], longest[j]+1)
				}
			}
			chain = max(chain, longest[i])
		}
		return chain
	}
	objChain := chainOf(func(s syscallSpan) bool { return s.call == "syncfs" || objs[s.path] })
	chain := chainOf(func(s syscallSpan) bool { return s.call == "syncfs" || objs[s.path] || mine[s.path] })
	t.Logf("%d new objects; the objects' fsyncs take %d serial rounds, the whole snapshot %d", len(newObjs), objChain, chain)
	if want := max(objChain, 1) + 2; chain > want {
		t.Errorf("the snapshot's fsyncs take %d serial rounds, want at most %d (the objects' %d with the manifest's alongside, then the snapshots dir with the timeline, then the World dir)", chain, want, objChain)
		for _, s := range spans {
			if s.call == "syncfs" || strings.HasPrefix(s.call, "f") && (objs[s.path] || mine[s.path]) {
				t.Logf("%s %s %.6f-%.6f", s.call, s.path, s.start, s.end)
			}
		}
	}
}
