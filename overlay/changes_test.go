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
	"syscall"
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

type csStep struct {
	what string
	do   func(m func(string) string) error
}

func csWrite(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

func csAppend(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// csMove renames like mv(1): without redirect_dir a lower dir cannot be
// renamed through an overlay (EXDEV), so it is copied and removed.
func csMove(src, dst string) error {
	err := os.Rename(src, dst)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	if out, err := exec.Command("cp", "-a", "--", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %w: %s", src, dst, err, out)
	}
	return os.RemoveAll(src)
}

// csSteps are the operations of issue 2's proof, each touching csLower in a
// different way.
var csSteps = []csStep{
	{"rewrite", func(m func(string) string) error { return csWrite(m("mod.txt"), "rewritten\n") }},
	{"append", func(m func(string) string) error { return csAppend(m("app.txt"), "line 2\n") }},
	{"no-op copy-up", func(m func(string) string) error { return csWrite(m("same.txt"), "rewritten with the same bytes") }},
	{"create", func(m func(string) string) error { return csWrite(m("new.txt"), "brand new") }},
	{"delete file", func(m func(string) string) error { return os.Remove(m("del.txt")) }},
	{"delete tree", func(m func(string) string) error { return os.RemoveAll(m("tree")) }},
	{"delete and recreate dir", func(m func(string) string) error {
		if err := os.RemoveAll(m("re")); err != nil {
			return err
		}
		if err := os.Mkdir(m("re"), 0o755); err != nil {
			return err
		}
		if err := csWrite(m("re/keep"), "keep, new version"); err != nil {
			return err
		}
		return csWrite(m("re/fresh"), "fresh")
	}},
	{"rename file", func(m func(string) string) error { return csMove(m("ren.txt"), m("renamed.txt")) }},
	{"rename dir", func(m func(string) string) error { return csMove(m("rendir"), m("moveddir")) }},
	{"chmod file", func(m func(string) string) error { return os.Chmod(m("chm.sh"), 0o755) }},
	{"chmod dir", func(m func(string) string) error { return os.Chmod(m("chmdir"), 0o700) }},
	{"symlink create", func(m func(string) string) error { return os.Symlink("new.txt", m("newlink")) }},
	{"symlink retarget", func(m func(string) string) error {
		if err := os.Remove(m("link")); err != nil {
			return err
		}
		return os.Symlink("app.txt", m("link"))
	}},
	{"file to dir", func(m func(string) string) error {
		if err := os.Remove(m("f2d")); err != nil {
			return err
		}
		if err := os.Mkdir(m("f2d"), 0o755); err != nil {
			return err
		}
		return csWrite(m("f2d/inner"), "inner")
	}},
	{"dir to file", func(m func(string) string) error {
		if err := os.RemoveAll(m("d2f")); err != nil {
			return err
		}
		return csWrite(m("d2f"), "now a file")
	}},
	{"nested deletes", func(m func(string) string) error {
		if err := os.Remove(m("nest/a/b/deep")); err != nil {
			return err
		}
		return os.RemoveAll(m("nest/a/b/c"))
	}},
	{"deep modify", func(m func(string) string) error { return csAppend(m("deep/x/y/z/touched"), "two") }},
	{"odd names", func(m func(string) string) error {
		for _, name := range []string{"sp ace.txt", "new\nline", "bad\xffbyte", "-dash", "sp ace/new one"} {
			if err := csWrite(m(name), "odd: "+name); err != nil {
				return err
			}
		}
		return os.Remove(m("lower odd\nname"))
	}},
	{"empty dir", func(m func(string) string) error { return os.Mkdir(m("emptydir"), 0o750) }},
	{"new nested dir", func(m func(string) string) error {
		if err := os.MkdirAll(m("newdir/sub"), 0o755); err != nil {
			return err
		}
		return csWrite(m("newdir/sub/f"), "nested new")
	}},
}

// csRedirectSteps exercise kernel redirect_dir=on and metacopy=on.
var csRedirectSteps = []csStep{
	{"rename dir in place", func(m func(string) string) error { return os.Rename(m("rendir"), m("moveddir")) }},
	{"move subdir elsewhere", func(m func(string) string) error { return os.Rename(m("moveddir/in"), m("nest/in-moved")) }},
	{"modify inside moved dir", func(m func(string) string) error { return csAppend(m("moveddir/x"), " changed") }},
	{"chmod metacopy", func(m func(string) string) error { return os.Chmod(m("chm.sh"), 0o700) }},
	{"rename metacopy file", func(m func(string) string) error { return os.Rename(m("chm.sh"), m("moved.sh")) }},
	{"chmod only", func(m func(string) string) error { return os.Chmod(m("mod.txt"), 0o600) }},
	{"delete in moved dir", func(m func(string) string) error { return os.Remove(m("nest/in-moved/y")) }},
}

// csBackend mounts one real overlay implementation.
type csBackend struct {
	name    string // corpus case dir: testdata/overlay/<dialect>/<name>
	dialect Dialect
	bin     string
	steps   []csStep
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
			m := func(p string) string { return filepath.Join(merged, p) }
			for _, s := range b.steps {
				if err := s.do(m); err != nil {
					t.Fatalf("%s: %v", s.what, err)
				}
			}
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
