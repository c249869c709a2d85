package overlay

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay/overlaytest"
)

var updateCorpus = flag.Bool("update-overlay-corpus", false, "rewrite testdata/overlay corpora from the real tools")

const corpusRoot = "../testdata/overlay"

// csLower is the lower tree the corpus operations start from.
const csLower = `
file mod.txt 0644 "original\n"
file app.txt 0644 "line 1\n"
file same.txt 0644 "rewritten with the same bytes"
file del.txt 0644 "delete me"
file tree/a 0644 "a"
file tree/sub/b 0600 "b"
dir tree/sub/empty 0700
file re/old 0644 "old content"
file re/keep 0644 "keep, old version"
dir re/olddir
file ren.txt 0644 "rename me"
file rendir/x 0644 "x"
file rendir/in/y 0640 "y"
file chm.sh 0644 "#!/bin/sh\n"
dir chmdir 0755
file chmdir/f 0644 "f"
symlink link mod.txt
symlink dangling nowhere
file f2d 0644 "was a file"
file d2f/x 0644 "inside a dir that becomes a file"
file nest/a/b/deep 0644 "deep"
file nest/a/b/c/deeper 0644 "deeper"
file nest/a/keep 0644 "kept"
file deep/x/y/z/touched 0644 "one"
file "lower odd\nname" 0644 "odd lower"
file "-dash-lower" 0644 "dash"
file "sp ace/in side" 0644 "spaced"
`

// csSteps are the operations of issue 2's proof, each touching csLower in a
// different way.
var csSteps = []overlaytest.Step{
	{What: "rewrite", Do: func(m func(string) string) error { return overlaytest.Write(m("mod.txt"), "rewritten\n") }},
	{What: "append", Do: func(m func(string) string) error { return overlaytest.Append(m("app.txt"), "line 2\n") }},
	{What: "no-op copy-up", Do: func(m func(string) string) error {
		return overlaytest.Write(m("same.txt"), "rewritten with the same bytes")
	}},
	{What: "create", Do: func(m func(string) string) error { return overlaytest.Write(m("new.txt"), "brand new") }},
	{What: "delete file", Do: func(m func(string) string) error { return os.Remove(m("del.txt")) }},
	{What: "delete tree", Do: func(m func(string) string) error { return os.RemoveAll(m("tree")) }},
	{What: "delete and recreate dir", Do: func(m func(string) string) error {
		if err := os.RemoveAll(m("re")); err != nil {
			return err
		}
		if err := os.Mkdir(m("re"), 0o755); err != nil {
			return err
		}
		if err := overlaytest.Write(m("re/keep"), "keep, new version"); err != nil {
			return err
		}
		return overlaytest.Write(m("re/fresh"), "fresh")
	}},
	{What: "rename file", Do: func(m func(string) string) error { return overlaytest.Move(m("ren.txt"), m("renamed.txt")) }},
	{What: "rename dir", Do: func(m func(string) string) error { return overlaytest.Move(m("rendir"), m("moveddir")) }},
	{What: "chmod file", Do: func(m func(string) string) error { return os.Chmod(m("chm.sh"), 0o755) }},
	{What: "chmod dir", Do: func(m func(string) string) error { return os.Chmod(m("chmdir"), 0o700) }},
	{What: "symlink create", Do: func(m func(string) string) error { return os.Symlink("new.txt", m("newlink")) }},
	{What: "symlink retarget", Do: func(m func(string) string) error {
		if err := os.Remove(m("link")); err != nil {
			return err
		}
		return os.Symlink("app.txt", m("link"))
	}},
	{What: "file to dir", Do: func(m func(string) string) error {
		if err := os.Remove(m("f2d")); err != nil {
			return err
		}
		if err := os.Mkdir(m("f2d"), 0o755); err != nil {
			return err
		}
		return overlaytest.Write(m("f2d/inner"), "inner")
	}},
	{What: "dir to file", Do: func(m func(string) string) error {
		if err := os.RemoveAll(m("d2f")); err != nil {
			return err
		}
		return overlaytest.Write(m("d2f"), "now a file")
	}},
	{What: "nested deletes", Do: func(m func(string) string) error {
		if err := os.Remove(m("nest/a/b/deep")); err != nil {
			return err
		}
		return os.RemoveAll(m("nest/a/b/c"))
	}},
	{What: "deep modify", Do: func(m func(string) string) error { return overlaytest.Append(m("deep/x/y/z/touched"), "two") }},
	{What: "odd names", Do: func(m func(string) string) error {
		for _, name := range []string{"sp ace.txt", "new\nline", "bad\xffbyte", "-dash", "sp ace/new one"} {
			if err := overlaytest.Write(m(name), "odd: "+name); err != nil {
				return err
			}
		}
		return os.Remove(m("lower odd\nname"))
	}},
	{What: "empty dir", Do: func(m func(string) string) error { return os.Mkdir(m("emptydir"), 0o750) }},
	{What: "new nested dir", Do: func(m func(string) string) error {
		if err := os.MkdirAll(m("newdir/sub"), 0o755); err != nil {
			return err
		}
		return overlaytest.Write(m("newdir/sub/f"), "nested new")
	}},
}

// csRedirectSteps exercise kernel redirect_dir=on and metacopy=on.
var csRedirectSteps = []overlaytest.Step{
	{What: "rename dir in place", Do: func(m func(string) string) error { return os.Rename(m("rendir"), m("moveddir")) }},
	{What: "move subdir elsewhere", Do: func(m func(string) string) error { return os.Rename(m("moveddir/in"), m("nest/in-moved")) }},
	{What: "modify inside moved dir", Do: func(m func(string) string) error { return overlaytest.Append(m("moveddir/x"), " changed") }},
	{What: "chmod metacopy", Do: func(m func(string) string) error { return os.Chmod(m("chm.sh"), 0o700) }},
	{What: "rename metacopy file", Do: func(m func(string) string) error { return os.Rename(m("chm.sh"), m("moved.sh")) }},
	{What: "chmod only", Do: func(m func(string) string) error { return os.Chmod(m("mod.txt"), 0o600) }},
	{What: "delete in moved dir", Do: func(m func(string) string) error { return os.Remove(m("nest/in-moved/y")) }},
}

// csBackend mounts one real overlay implementation.
type csBackend struct {
	name    string // corpus case dir: testdata/overlay/<dialect>/<name>
	dialect Dialect
	bin     string
	steps   []overlaytest.Step
	mount   func(lower, upper, work, merged string) *exec.Cmd
	umount  func(merged string) *exec.Cmd
}

var csBackends = []csBackend{
	{
		name: "ops", dialect: DialectKernel, bin: "mount", steps: csSteps,
		mount: func(lower, upper, work, merged string) *exec.Cmd {
			return exec.Command("mount", "-t", "overlay", "overlay", "-o",
				"lowerdir="+lower+",upperdir="+upper+",workdir="+work, merged)
		},
		umount: func(merged string) *exec.Cmd { return exec.Command("umount", merged) },
	},
	{
		name: "userxattr", dialect: DialectKernel, bin: "mount", steps: csSteps,
		mount: func(lower, upper, work, merged string) *exec.Cmd {
			return exec.Command("mount", "-t", "overlay", "overlay", "-o",
				"lowerdir="+lower+",upperdir="+upper+",workdir="+work+",userxattr", merged)
		},
		umount: func(merged string) *exec.Cmd { return exec.Command("umount", merged) },
	},
	{
		name: "redirect", dialect: DialectKernel, bin: "mount", steps: csRedirectSteps,
		mount: func(lower, upper, work, merged string) *exec.Cmd {
			return exec.Command("mount", "-t", "overlay", "overlay", "-o",
				"lowerdir="+lower+",upperdir="+upper+",workdir="+work+",redirect_dir=on,metacopy=on", merged)
		},
		umount: func(merged string) *exec.Cmd { return exec.Command("umount", merged) },
	},
	{
		name: "ops", dialect: DialectFuseOverlayfs, bin: "fuse-overlayfs", steps: csSteps,
		mount: func(lower, upper, work, merged string) *exec.Cmd {
			return exec.Command("fuse-overlayfs", "-o", "lowerdir="+lower+",upperdir="+upper+",workdir="+work, merged)
		},
		umount: func(merged string) *exec.Cmd { return exec.Command("fusermount3", "-u", merged) },
	},
	{
		name: "ops", dialect: DialectUnionfs, bin: "unionfs", steps: csSteps,
		mount: func(lower, upper, work, merged string) *exec.Cmd {
			return exec.Command("unionfs", "-o", "cow,hide_meta_files", upper+"=RW:"+lower+"=RO", merged)
		},
		umount: func(merged string) *exec.Cmd { return exec.Command("fusermount3", "-u", merged) },
	},
}

// csMount mounts b and returns after the mount shows up; cleanup unmounts
// (lazily if need be) so a failed test leaves no mount behind.
func csMount(t *testing.T, b csBackend, lower, upper, work, merged string) (unmount func()) {
	t.Helper()
	if out, err := b.mount(lower, upper, work, merged).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v: %s", b.bin, err, out)
	}
	mounted := true
	unmount = func() {
		if !mounted {
			return
		}
		var err error
		var out []byte
		for i := 0; i < 50; i++ {
			if out, err = b.umount(merged).CombinedOutput(); err == nil {
				mounted = false
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = exec.Command("umount", "-l", merged).Run()
		mounted = false
		t.Errorf("unmount %s: %v: %s", merged, err, out)
	}
	t.Cleanup(unmount)
	return unmount
}

// recordView records the World's view through Layers alone, the way a
// reviewer's diff reads it when the mount is down.
func recordView(t testing.TB, l Layers) overlaytest.Tree {
	t.Helper()
	tree := overlaytest.Tree{}
	var walk func(dir string)
	walk = func(dir string) {
		entries, err := l.ReadDir(dir)
		if err != nil {
			t.Fatalf("read dir %q of the view: %v", dir, err)
		}
		for i, e := range entries {
			if i > 0 && entries[i-1].Name >= e.Name {
				t.Errorf("ReadDir(%q) not sorted or duplicated at %q", dir, e.Name)
			}
			st, err := l.Stat(e.Path)
			if err != nil || st.Type != e.Type || st.Mode != e.Mode {
				t.Errorf("Stat(%q) = %+v, %v; ReadDir said %+v", e.Path, st, err, e)
			}
			switch e.Type {
			case TypeFile:
				data, err := l.ReadFile(e.Path)
				if err != nil {
					t.Fatalf("read %q of the view: %v", e.Path, err)
				}
				tree[e.Path] = overlaytest.FileNode(e.Mode, data)
			case TypeDir:
				tree[e.Path] = overlaytest.DirNode(e.Mode)
				walk(e.Path)
			case TypeSymlink:
				target, err := l.Readlink(e.Path)
				if err != nil || target != e.Target {
					t.Errorf("Readlink(%q) = %q, %v; ReadDir said %q", e.Path, target, err, e.Target)
				}
				tree[e.Path] = overlaytest.SymlinkNode(e.Target)
			default:
				tree[e.Path] = overlaytest.OtherNode(e.Mode)
			}
		}
	}
	walk("")
	return tree
}

// checkReplay applies cs to a copy of l.Lower and compares the result with want.
func checkReplay(t testing.TB, l Layers, cs *ChangeSet, want overlaytest.Tree) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "replay")
	if out, err := exec.Command("cp", "-a", "--", l.Lower, dst).CombinedOutput(); err != nil {
		t.Fatalf("copy lower: %v: %s", err, out)
	}
	if err := ApplyChangeSet(context.Background(), cs, l, dst); err != nil {
		t.Fatalf("ApplyChangeSet: %v", err)
	}
	if diff := overlaytest.DiffTrees(want, overlaytest.Record(t, dst)); diff != nil {
		t.Errorf("lower + change set differs from the view (want first):\n%s", strings.Join(diff, "\n"))
	}
}

func formatChanges(cs *ChangeSet) string {
	var b strings.Builder
	for _, c := range cs.Changes {
		b.WriteString(c.String() + "\n")
	}
	return b.String()
}

func checkInvariants(t testing.TB, cs *ChangeSet) {
	t.Helper()
	r, err := RulesFor(cs.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs.Changes {
		if i > 0 && cs.Changes[i-1].Path >= c.Path {
			t.Errorf("changes not sorted or duplicated at %q", c.Path)
		}
		base := c.Path[strings.LastIndexByte(c.Path, '/')+1:]
		if c.Path == "" || (r.whNames && strings.HasPrefix(base, ".wh.")) || strings.HasPrefix(base, ".fuse_hidden") ||
			(r.unionfs && (strings.HasPrefix(c.Path, unionfsMetaOld) || strings.HasSuffix(base, unionfsHidden))) {
			t.Errorf("marker reported as a change: %v", c)
		}
		if c.Kind == 0 || c.Type == 0 {
			t.Errorf("change without kind or type: %v", c)
		}
	}
}

// TestRealBackends mounts every available backend, runs the scripted
// operations on the merged view, unmounts, and checks that the change set
// equals the corpus's expected one and that replaying it on a copy of the
// lower reproduces the merged view exactly; Layers must read the same view.
// With -update-overlay-corpus it rewrites the corpus from the real tool.
func TestRealBackends(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount overlays")
	}
	for _, b := range csBackends {
		t.Run(string(b.dialect)+"/"+b.name, func(t *testing.T) {
			if _, err := exec.LookPath(b.bin); err != nil {
				t.Skipf("%s not installed", b.bin)
			}
			if b.dialect != DialectKernel {
				if _, err := os.Stat("/dev/fuse"); err != nil {
					t.Skip("no /dev/fuse")
				}
			}
			dir := t.TempDir()
			lower, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
			for _, d := range []string{lower, upper, work, merged} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			overlaytest.Build(t, lower, csLower)
			unmount := csMount(t, b, lower, upper, work, merged)
			overlaytest.RunSteps(t, merged, b.steps)
			view := overlaytest.Record(t, merged)
			unmount()

			l := Layers{Upper: upper, Lower: lower, Dialect: b.dialect}
			cs, err := ReadChanges(context.Background(), l, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, cs)
			got := formatChanges(cs)
			detected, err := DetectDialect(upper)
			if err != nil || detected != b.dialect {
				t.Errorf("DetectDialect = %q, %v; want %q", detected, err, b.dialect)
			}
			caseDir := filepath.Join(corpusRoot, string(b.dialect), b.name)
			if *updateCorpus {
				writeCorpus(t, caseDir, b.dialect, overlaytest.Dump(t, lower), overlaytest.Dump(t, upper), got)
			}
			want, err := os.ReadFile(filepath.Join(caseDir, "expected.txt"))
			if err != nil {
				t.Fatalf("read expected (run with -update-overlay-corpus to make it): %v", err)
			}
			if got != string(want) {
				t.Errorf("change set differs from %s/expected.txt\n got:\n%s\nwant:\n%s", caseDir, got, want)
			}
			checkReplay(t, l, cs, view)
			if diff := overlaytest.DiffTrees(view, recordView(t, l)); diff != nil {
				t.Errorf("Layers view differs from the mounted view (mounted first):\n%s", strings.Join(diff, "\n"))
			}
		})
	}
}

func writeCorpus(t *testing.T, dir string, d Dialect, lower, upper, expected string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	layers := "# dialect: " + string(d) + "\n[lower]\n" + lower + "[upper]\n" + upper
	if err := os.WriteFile(filepath.Join(dir, "layers.txt"), []byte(layers), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expected.txt"), []byte(expected), 0o644); err != nil {
		t.Fatal(err)
	}
}

// splitLayers splits a layers.txt into its detected dialect and the lower
// and upper specs.
func splitLayers(text string) (dialect Dialect, lower, upper string, err error) {
	var cur *strings.Builder
	var lo, up strings.Builder
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "# dialect:"):
			dialect = Dialect(strings.TrimSpace(strings.TrimPrefix(line, "# dialect:")))
		case line == "[lower]":
			cur = &lo
		case line == "[upper]":
			cur = &up
		case cur != nil:
			cur.WriteString(line + "\n")
		case strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#"):
			return "", "", "", fmt.Errorf("line %q outside [lower] and [upper]", line)
		}
	}
	return dialect, lo.String(), up.String(), nil
}

// TestCorpora materialises every testdata/overlay/<dialect>/<case> (device
// Nodes and trusted xattrs need root) and checks detection, the change set
// against expected.txt, replay, and the Layers view against the replay.
func TestCorpora(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(corpusRoot, "*", "*", "layers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 5 {
		t.Fatalf("found %d corpora under %s, want one per dialect at least", len(cases), corpusRoot)
	}
	sort.Strings(cases)
	for _, layersFile := range cases {
		caseDir := filepath.Dir(layersFile)
		dialect := Dialect(filepath.Base(filepath.Dir(caseDir)))
		t.Run(string(dialect)+"/"+filepath.Base(caseDir), func(t *testing.T) {
			text, err := os.ReadFile(layersFile)
			if err != nil {
				t.Fatal(err)
			}
			detect, lowerSpec, upperSpec, err := splitLayers(string(text))
			if err != nil {
				t.Fatal(err)
			}
			if os.Geteuid() != 0 && (strings.Contains(upperSpec, "whiteout ") || strings.Contains(upperSpec, "trusted.")) {
				t.Skip("needs root for device nodes and trusted xattrs")
			}
			dir := t.TempDir()
			l := Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower"), Dialect: dialect}
			for _, d := range []string{l.Upper, l.Lower} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			overlaytest.Build(t, l.Lower, lowerSpec)
			overlaytest.Build(t, l.Upper, upperSpec)
			if detect != "" {
				if got, err := DetectDialect(l.Upper); err != nil || got != detect {
					t.Errorf("DetectDialect = %q, %v; want %q", got, err, detect)
				}
			}
			cs, err := ReadChanges(context.Background(), l, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, cs)
			expectedFile := filepath.Join(caseDir, "expected.txt")
			if _, err := os.Stat(expectedFile); errors.Is(err, os.ErrNotExist) && *updateCorpus {
				// A new hand-written corpus: record what the reader says, for review.
				if err := os.WriteFile(expectedFile, []byte(formatChanges(cs)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(expectedFile)
			if err != nil {
				t.Fatal(err)
			}
			if got := formatChanges(cs); got != string(want) {
				t.Errorf("change set differs from expected.txt\n got:\n%s\nwant:\n%s", got, want)
			}
			checkReplay(t, l, cs, recordView(t, l))
		})
	}
}

// TestReadChangesNoOpCopyUps checks that copy-ups equal to the lower are no
// change (file, dir, symlink, fifo), that SkipCompare trades that for speed,
// and that an upper dir named work is an ordinary entry.
func TestReadChangesNoOpCopyUps(t *testing.T) {
	dir := t.TempDir()
	l := Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower"), Dialect: DialectKernel}
	overlaytest.Build(t, l.Lower, `
file same 0644 "same"
file samesize 0644 "aaaa"
dir d 0750
file d/f 0640 "f"
symlink s target
fifo p 0644
`)
	overlaytest.Build(t, l.Upper, `
file same 0644 "same"
file samesize 0644 "bbbb"
dir d 0750
file d/f 0640 "f"
symlink s target
fifo p 0644
dir work/work 0000
`)
	cs, err := ReadChanges(context.Background(), l, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `M file 0644 4 "samesize"
A dir 0755 0 "work"
A dir 0000 0 "work/work"
`
	if got := formatChanges(cs); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	cs, err = ReadChanges(context.Background(), l, ReadOptions{SkipCompare: true})
	if err != nil {
		t.Fatal(err)
	}
	want = `M file 0640 1 "d/f"
M file 0644 4 "same"
M file 0644 4 "samesize"
A dir 0755 0 "work"
A dir 0000 0 "work/work"
`
	if got := formatChanges(cs); got != want {
		t.Errorf("SkipCompare got:\n%s\nwant:\n%s", got, want)
	}
	checkReplay(t, l, cs, recordView(t, l))

	if _, err := ReadChanges(cancelledCtx(), l, ReadOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadChanges with a cancelled context = %v", err)
	}
	if _, err := ReadChanges(context.Background(), Layers{Upper: filepath.Join(dir, "none"), Lower: l.Lower, Dialect: DialectKernel}, ReadOptions{}); err == nil {
		t.Error("ReadChanges of a missing upper succeeded")
	}
	if _, err := ReadChanges(context.Background(), Layers{Upper: l.Upper, Lower: filepath.Join(dir, "none"), Dialect: DialectKernel}, ReadOptions{}); err == nil {
		t.Error("ReadChanges of a missing lower succeeded")
	}
}
