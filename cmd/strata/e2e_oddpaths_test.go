package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay"
)

// Odd content a World can hold: a source symlink replaced by a directory,
// a tree deeper than PATH_MAX, names that are not UTF-8. Each must work end
// to end, and none may block another World's apply.

const deepLevels = 300 // of 20-byte names: about 6300 bytes, past PATH_MAX (4096)

var deepName = strings.Repeat("d", 20)

func deepRel() string {
	parts := make([]string, deepLevels)
	for i := range parts {
		parts[i] = deepName
	}
	return strings.Join(parts, "/")
}

// oddEnv is newEnv plus a source symlink link -> dir, and out -> a
// directory outside the source tree.
func oddEnv(t *testing.T) *env {
	e := newEnv(t)
	must(t, os.MkdirAll(filepath.Join(e.source, "dir"), 0o755))
	writeTestFile(t, filepath.Join(e.source, "dir", "x"), "x in dir\n")
	must(t, os.Symlink("dir", filepath.Join(e.source, "link")))
	outside := filepath.Join(filepath.Dir(e.source), "outside")
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.Symlink(outside, filepath.Join(e.source, "out")))
	return e
}

// symlinkToDirWorld replaces the source's link -> dir with a directory.
func (e *env) symlinkToDirWorld(name string) {
	e.ok("new", name)
	e.ok("exec", name, "--", "sh", "-c", "rm link && mkdir link && echo mine > link/f && rm out && mkdir out && echo mine > out/f")
}

// deepWorld builds the deep tree inside the World one relative step at a
// time, as an agent would (a shell's cd keeps absolute paths and stops at
// PATH_MAX, so perl does the steps).
func (e *env) deepWorld(name string) {
	e.t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		e.t.Skip("perl builds the deep tree one chdir at a time; not installed")
	}
	e.ok("new", name)
	e.ok("exec", name, "--", "perl", "-e",
		`for (1..`+strconv.Itoa(deepLevels)+`) { mkdir "`+deepName+`" or die "mkdir: $!"; chdir "`+deepName+`" or die "chdir: $!" } open F, ">leaf" or die; print F "deep\n"; close F`)
}

// nonUTF8World creates a\xff and a\xfe, two names one lossy decoding would merge.
func (e *env) nonUTF8World(name string) {
	e.ok("new", name)
	e.ok("exec", name, "--", "sh", "-c", `printf 'ff\n' > "$(printf 'a\377')" && printf 'fe\n' > "$(printf 'a\376')"`)
}

type applyJSON struct {
	Paths []struct {
		Path      string `json:"path"`
		PathBytes []byte `json:"path_bytes"`
		Action    string `json:"action"`
	} `json:"paths"`
	Warnings []string `json:"warnings"`
}

func TestE2EOddWorldsDoNotBlockAnotherApply(t *testing.T) {
	t.Parallel()
	e := oddEnv(t)
	e.symlinkToDirWorld("sym")
	e.deepWorld("deep")
	e.nonUTF8World("bytes")
	e.ok("new", "a")
	e.ok("exec", "a", "--", "sh", "-c", "echo from-a >> a.txt")
	var res applyJSON
	must(t, json.Unmarshal([]byte(e.ok("apply", "a", "--json")), &res))
	if len(res.Paths) != 1 || res.Paths[0].Path != "a.txt" || len(res.Warnings) != 0 {
		t.Fatalf("apply a = %+v, want a.txt written and no warnings (the odd Worlds are readable)", res)
	}
	if got := e.readSource("a.txt"); got != "hello\nfrom-a\n" {
		t.Fatalf("source a.txt = %q", got)
	}
	// Nothing went through the source symlinks.
	if _, err := os.Lstat(filepath.Join(e.source, "dir", "f")); err == nil {
		t.Fatal("dir/f appeared in the source: something followed link")
	}
	if ents, _ := os.ReadDir(filepath.Join(filepath.Dir(e.source), "outside")); len(ents) != 0 {
		t.Fatal("something was written outside the source through out")
	}
	// Each odd World can still be removed.
	for _, w := range []string{"sym", "deep", "bytes"} {
		e.ok("rm", w, "--purge")
		if _, err := os.Lstat(filepath.Join(e.home, "worlds", w)); err == nil {
			t.Fatalf("rm --purge %s left its directory", w)
		}
	}
}

func TestE2ESymlinkReplacedByDirectory(t *testing.T) {
	t.Parallel()
	e := oddEnv(t)
	e.symlinkToDirWorld("sym")
	got := map[string]string{}
	for _, c := range e.status("sym").Changes {
		got[c.Path] = c.Kind + "/" + c.Type
	}
	if got["link"] != "type_changed/dir" || got["link/f"] != "added/file" || got["out"] != "type_changed/dir" || got["out/f"] != "added/file" || len(got) != 4 {
		t.Fatalf("status = %v", got)
	}
	if d := e.ok("diff", "sym"); !strings.Contains(d, "+++ b/link/f") || !strings.Contains(d, "+mine") {
		t.Fatalf("diff:\n%s", d)
	}
	e.ok("snap", "sym")
	// Another World's apply captures sym's bases through the link's place,
	// never through the link.
	e.ok("new", "other")
	e.ok("exec", "other", "--", "sh", "-c", "echo other > other.txt")
	e.ok("apply", "other")
	e.ok("apply", "sym")
	st, err := os.Lstat(filepath.Join(e.source, "link"))
	if err != nil || !st.IsDir() {
		t.Fatalf("source link after apply: %v %v, want a directory", st, err)
	}
	if got := e.readSource("link/f"); got != "mine\n" {
		t.Fatalf("source link/f = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(e.source, "dir", "f")); err == nil {
		t.Fatal("dir/f appeared in the source: apply followed the old link")
	}
	if got := e.readSource("dir/x"); got != "x in dir\n" {
		t.Fatalf("the link's target changed: dir/x = %q", got)
	}
	if st, err := os.Lstat(filepath.Join(e.source, "out")); err != nil || !st.IsDir() {
		t.Fatalf("source out after apply: %v %v, want a directory", st, err)
	}
	if got := e.readSource("out/f"); got != "mine\n" {
		t.Fatalf("source out/f = %q", got)
	}
	if ents, err := os.ReadDir(filepath.Join(filepath.Dir(e.source), "outside")); err != nil || len(ents) != 0 {
		t.Fatalf("the directory outside the source was written through the old link: %v %v", ents, err)
	}
	e.ok("rm", "sym")
}

func TestE2EDeeperThanPathMax(t *testing.T) {
	t.Parallel()
	e := oddEnv(t)
	e.deepWorld("deep")
	leaf := deepRel() + "/leaf"
	st := e.status("deep")
	if len(st.Changes) != deepLevels+1 || st.Changes[len(st.Changes)-1].Path != leaf {
		t.Fatalf("status lists %d changes, want %d ending with the leaf", len(st.Changes), deepLevels+1)
	}
	if d := e.ok("diff", "deep"); !strings.Contains(d, "+deep\n") {
		t.Fatalf("diff of the deep World lacks the leaf's line (%d bytes)", len(d))
	}
	var snap struct {
		ID    string `json:"id"`
		Files int    `json:"files"`
		Dirs  int    `json:"dirs"`
	}
	must(t, json.Unmarshal([]byte(e.ok("snap", "deep", "--json")), &snap))
	if snap.Files != 1 || snap.Dirs != deepLevels {
		t.Fatalf("snap: %+v", snap)
	}
	// Lose the tree, roll back: it is all there again.
	e.ok("exec", "deep", "--", "rm", "-rf", deepName)
	if n := len(e.status("deep").Changes); n != 0 {
		t.Fatalf("after rm -rf the World still has %d changes", n)
	}
	e.ok("rollback", "deep", snap.ID)
	if n := len(e.status("deep").Changes); n != deepLevels+1 {
		t.Fatalf("after rollback the World has %d changes, want %d", n, deepLevels+1)
	}
	// Another World's apply is not blocked by the deep one.
	e.ok("new", "a")
	e.ok("exec", "a", "--", "sh", "-c", "echo from-a > a.txt")
	e.ok("apply", "a")
	// The deep World's own apply publishes it (the source's file system can hold it).
	e.ok("apply", "deep")
	data, _, err := overlay.ReadFileBeneath(e.source, leaf)
	if err != nil || string(data) != "deep\n" {
		t.Fatalf("source leaf: %q %v", data, err)
	}
	e.ok("rm", "deep", "--purge")
	if _, err := os.Lstat(filepath.Join(e.home, "worlds", "deep")); err == nil {
		t.Fatal("rm --purge left the deep World's directory")
	}
}

func TestE2ENonUTF8NamesAreBytes(t *testing.T) {
	t.Parallel()
	e := oddEnv(t)
	e.nonUTF8World("bytes")
	var st struct {
		Changes []struct {
			Path       string            `json:"path"`
			PathBytes  []byte            `json:"path_bytes"`
			Provenance []json.RawMessage `json:"provenance"`
		} `json:"changes"`
	}
	must(t, json.Unmarshal([]byte(e.ok("status", "bytes", "--json")), &st))
	if len(st.Changes) != 2 {
		t.Fatalf("status --json: %+v", st)
	}
	seen := map[string]string{}
	for _, c := range st.Changes {
		exact := c.Path // path_bytes, when present, holds the exact bytes (docs/cli.md)
		if c.PathBytes != nil {
			exact = string(c.PathBytes)
		}
		seen[exact] = c.Path
		if len(c.Provenance) != 1 {
			t.Fatalf("%q: provenance %s, want the one session that wrote it", exact, c.Provenance)
		}
	}
	if seen["a\xff"] != `"a\xff"` || seen["a\xfe"] != `"a\xfe"` {
		t.Fatalf("status --json names: %q, want a\\xff and a\\xfe, each with its quoted form", seen)
	}
	// diff and apply take the quoted form status prints.
	if d := e.ok("diff", "bytes", `"a\xff"`); !strings.Contains(d, "+ff") || strings.Contains(d, "+fe") {
		t.Fatalf("diff of \"a\\xff\" only:\n%s", d)
	}
	var res applyJSON
	must(t, json.Unmarshal([]byte(e.ok("apply", "bytes", `"a\xff"`, "--json")), &res))
	if len(res.Paths) != 1 || string(res.Paths[0].PathBytes) != "a\xff" {
		t.Fatalf("apply \"a\\xff\" --json = %+v", res)
	}
	if got := e.readSource("a\xff"); got != "ff\n" {
		t.Fatalf("source a\\xff = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(e.source, "a\xfe")); err == nil {
		t.Fatal("a\\xfe was published without being picked")
	}
	// Snapshot, lose a name, roll back: the exact bytes come back.
	snap := struct {
		ID string `json:"id"`
	}{}
	must(t, json.Unmarshal([]byte(e.ok("snap", "bytes", "--json")), &snap))
	e.ok("exec", "bytes", "--", "sh", "-c", `rm "$(printf 'a\376')"`)
	e.ok("rollback", "bytes", snap.ID)
	var dropped struct {
		Dropped []string `json:"dropped"`
	}
	must(t, json.Unmarshal([]byte(e.ok("apply", "bytes", "--drop-applied", "--json")), &dropped))
	// a\xff was published already (the source holds it): only a\xfe is
	// written and dropped, named in its quoted form.
	if len(dropped.Dropped) != 1 || dropped.Dropped[0] != `"a\xfe"` {
		t.Fatalf("dropped = %q, want [\"a\\xfe\"]", dropped.Dropped)
	}
	if got := e.readSource("a\xfe"); got != "fe\n" {
		t.Fatalf("source a\\xfe after rollback and apply = %q", got)
	}
	names, err := os.ReadDir(e.source)
	must(t, err)
	for _, d := range names {
		if strings.Contains(d.Name(), "\ufffd") {
			t.Fatalf("a replacement-character name reached the source: %q", d.Name())
		}
	}
}

// A World whose changes cannot be read at all (its upper damaged) is a
// warning in another World's apply, an event in the activity log, and can
// still be removed with --purge.
func TestE2EBrokenWorldIsAWarning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "broken")
	e.ok("exec", "broken", "--", "sh", "-c", "echo mine > a.txt")
	_ = exec.Command("umount", filepath.Join(e.home, "worlds", "broken", "merged")).Run()
	upper := filepath.Join(e.home, "worlds", "broken", "upper")
	must(t, os.RemoveAll(upper))
	writeTestFile(t, upper, "not a directory")

	e.ok("new", "a")
	e.ok("exec", "a", "--", "sh", "-c", "echo from-a > keep.txt")
	out, errs, code := e.run("apply", "a")
	if code != 0 || !strings.Contains(errs, `strata: warning: world "broken"`) || !strings.Contains(out, "keep.txt") {
		t.Fatalf("apply a: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if got := e.readSource("keep.txt"); got != "from-a\n" {
		t.Fatalf("source keep.txt = %q", got)
	}
	e.ok("exec", "a", "--", "sh", "-c", "echo again > keep.txt")
	var res applyJSON
	must(t, json.Unmarshal([]byte(e.ok("apply", "a", "--json")), &res))
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], `"broken"`) {
		t.Fatalf("apply --json warnings = %q", res.Warnings)
	}
	if ev := e.ok("events", "--json", "--world", "broken"); !strings.Contains(ev, `"base.capture_failed"`) {
		t.Fatalf("events of broken:\n%s", ev)
	}
	e.fails(1, "--purge", "rm", "broken")
	e.ok("rm", "broken", "--purge")
}
