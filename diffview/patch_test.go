package diffview

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo is a scratch git work tree for `git apply` checks.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	requireGit(t)
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q")
	return r
}

func (r *gitRepo) git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+r.dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("git %v: %v: %s", args, err, stderr.String())
	}
	return string(out), nil
}

func (r *gitRepo) write(path, content string, mode os.FileMode) {
	r.t.Helper()
	p := filepath.Join(r.dir, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		r.t.Fatal(err)
	}
}

func (r *gitRepo) symlink(path, target string) {
	r.t.Helper()
	if err := os.Symlink(target, filepath.Join(r.dir, path)); err != nil {
		r.t.Fatal(err)
	}
}

// apply checks and applies a patch in the work tree.
func (r *gitRepo) apply(patch string, flags ...string) error {
	p := filepath.Join(r.t.TempDir(), "change.patch")
	if err := os.WriteFile(p, []byte(patch), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.git(append(append([]string{"apply", "--check"}, flags...), p)...); err != nil {
		return err
	}
	_, err := r.git(append(append([]string{"apply"}, flags...), p)...)
	return err
}

func (r *gitRepo) read(path string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, path))
	if err != nil {
		r.t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func (r *gitRepo) mode(path string) os.FileMode {
	r.t.Helper()
	fi, err := os.Lstat(filepath.Join(r.dir, path))
	if err != nil {
		r.t.Fatalf("lstat %s: %v", path, err)
	}
	return fi.Mode()
}

func (r *gitRepo) exists(path string) bool {
	_, err := os.Lstat(filepath.Join(r.dir, path))
	return err == nil
}

func TestUnifiedPatchFormat(t *testing.T) {
	fd := Diff("a\nb\n", "a\nc", Options{})
	got := UnifiedPatch(PatchFile{OldPath: "dir/f.txt", NewPath: "dir/f.txt", OldMode: ModeFile, NewMode: ModeExecutable, Diff: fd})
	want := "diff --git a/dir/f.txt b/dir/f.txt\nold mode 100644\nnew mode 100755\n--- a/dir/f.txt\n+++ b/dir/f.txt\n" +
		"@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"
	if got != want {
		t.Fatalf("patch:\n%s\nwant:\n%s", got, want)
	}
	got = UnifiedPatch(PatchFile{NewPath: "n", NewMode: ModeFile, Diff: Diff("", "x\n", Options{})})
	if !strings.Contains(got, "new file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n") {
		t.Fatalf("new file patch:\n%s", got)
	}
}

func TestQuotePathMatchesGit(t *testing.T) {
	r := newGitRepo(t)
	names := []string{"plain.txt", "sp ace.txt", "tab\there", "quote\"d", `back\slash`, "ünïcödé.txt", "new\nline", "日本.txt", "bell\a"}
	for _, n := range names {
		r.write(n, "x\n", 0o644)
	}
	if _, err := r.git("add", "-A"); err != nil {
		t.Fatal(err)
	}
	out, err := r.git("-c", "core.quotePath=true", "ls-files")
	if err != nil {
		t.Fatal(err)
	}
	gitNames := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		gitNames[l] = true
	}
	for _, n := range names {
		if q := QuotePath(n); !gitNames[q] {
			t.Errorf("QuotePath(%q) = %s, not among git's names %q", n, q, out)
		}
	}
}

func TestUnifiedPatchAppliesWithGit(t *testing.T) {
	r := newGitRepo(t)
	type change struct {
		path, newPath      string
		old, new           string
		oldMode, newMode   uint32
		oldLink, newLink   string // symlink targets instead of content
		wantGone, wantLink bool
	}
	threeOld, threeNew := threeHunks()
	changes := []change{
		{path: "three.txt", old: threeOld, new: threeNew, oldMode: ModeFile, newMode: ModeFile},
		{path: "added.txt", new: "hello\nworld\n", newMode: ModeFile},
		{path: "added-empty.txt", new: "", newMode: ModeFile},
		{path: "deleted.txt", old: "bye\n", oldMode: ModeFile, wantGone: true},
		{path: "deleted-empty.txt", old: "", oldMode: ModeFile, wantGone: true},
		{path: "mode-only.sh", old: "echo\n", new: "echo\n", oldMode: ModeFile, newMode: ModeExecutable},
		{path: "mode-and-text.sh", old: "echo a\n", new: "echo b\n", oldMode: ModeExecutable, newMode: ModeFile},
		{path: "no-eol-added.txt", old: "a\nb", new: "a\nb\n", oldMode: ModeFile, newMode: ModeFile},
		{path: "no-eol-removed.txt", old: "a\nb\n", new: "a\nb", oldMode: ModeFile, newMode: ModeFile},
		{path: "no-eol-both.txt", old: "x\ny", new: "X\ny", oldMode: ModeFile, newMode: ModeFile},
		{path: "sp ace/file name.txt", old: "1\n", new: "2\n", oldMode: ModeFile, newMode: ModeFile},
		{path: "tab\tquote\"back\\slash.txt", old: "1\n", new: "2\n", oldMode: ModeFile, newMode: ModeFile},
		{path: "ünï/日本.txt", old: "1\n", new: "2\n", oldMode: ModeFile, newMode: ModeFile},
		{path: "new\nline.txt", new: "x\n", newMode: ModeFile},
		{path: "link-added", newLink: "three.txt", newMode: ModeSymlink, wantLink: true},
		{path: "link-changed", oldLink: "a", newLink: "b/c", oldMode: ModeSymlink, newMode: ModeSymlink, wantLink: true},
		{path: "link-deleted", oldLink: "x", oldMode: ModeSymlink, wantGone: true},
		{path: "old-name.txt", newPath: "new-name.txt", old: "keep\nthis\n", new: "keep\nthat\n", oldMode: ModeFile, newMode: ModeFile},
	}
	var patch strings.Builder
	for _, c := range changes {
		if c.oldMode == ModeSymlink {
			r.symlink(c.path, c.oldLink)
		} else if c.oldMode != 0 {
			r.write(c.path, c.old, os.FileMode(c.oldMode&0o777))
		}
		oldText, newText := c.old, c.new
		if c.oldMode == ModeSymlink {
			oldText = c.oldLink
		}
		if c.newMode == ModeSymlink {
			newText = c.newLink
		}
		patch.WriteString(UnifiedPatch(PatchFile{
			OldPath: c.path, NewPath: c.newPath, OldMode: c.oldMode, NewMode: c.newMode,
			Diff: Diff(oldText, newText, Options{}),
		}))
	}
	if err := r.apply(patch.String()); err != nil {
		t.Fatalf("git apply: %v\npatch:\n%s", err, patch.String())
	}
	for _, c := range changes {
		path := c.path
		if c.newPath != "" {
			path = c.newPath
			if r.exists(c.path) {
				t.Errorf("%s: renamed file still at its old path", c.path)
			}
		}
		switch {
		case c.wantGone:
			if r.exists(path) {
				t.Errorf("%q still exists", path)
			}
		case c.wantLink:
			target, err := os.Readlink(filepath.Join(r.dir, path))
			if err != nil || target != c.newLink {
				t.Errorf("%q: link %q, %v; want %q", path, target, err, c.newLink)
			}
		default:
			if got := r.read(path); got != c.new {
				t.Errorf("%q = %q, want %q", path, got, c.new)
			}
			if perm := r.mode(path).Perm(); uint32(perm) != c.newMode&0o777 {
				t.Errorf("%q mode %o, want %o", path, perm, c.newMode&0o777)
			}
		}
	}
}

func TestUnifiedPatchTypeChangeAsTwoEntries(t *testing.T) {
	r := newGitRepo(t)
	r.write("thing", "was a file\n", 0o644)
	patch := UnifiedPatch(PatchFile{OldPath: "thing", OldMode: ModeFile, Diff: Diff("was a file\n", "", Options{})}) +
		UnifiedPatch(PatchFile{NewPath: "thing", NewMode: ModeSymlink, Diff: Diff("", "target", Options{})})
	if err := r.apply(patch); err != nil {
		t.Fatalf("git apply: %v\n%s", err, patch)
	}
	if target, err := os.Readlink(filepath.Join(r.dir, "thing")); err != nil || target != "target" {
		t.Fatalf("thing -> %q, %v", target, err)
	}
}

// TestUnifiedPatchBinaryIsRejectedByGit documents a limit: a summarised
// binary change is written as "Binary files ... differ", which git apply
// refuses (it needs a full binary patch), so nothing is half-applied.
func TestUnifiedPatchBinaryIsRejectedByGit(t *testing.T) {
	r := newGitRepo(t)
	r.write("blob.bin", "\x00\x01old", 0o644)
	fd := Diff("\x00\x01old", "\x00\x01new", Options{})
	patch := UnifiedPatch(PatchFile{OldPath: "blob.bin", NewPath: "blob.bin", OldMode: ModeFile, NewMode: ModeFile, Diff: fd})
	if !strings.Contains(patch, "Binary files a/blob.bin and b/blob.bin differ\n") {
		t.Fatalf("patch:\n%s", patch)
	}
	if err := r.apply(patch); err == nil {
		t.Fatal("git apply accepted a binary patch without content")
	}
	if got := r.read("blob.bin"); got != "\x00\x01old" {
		t.Fatal("rejected binary patch changed the file")
	}
}

// TestUnifiedPatchRandomWithGit: many random edits, one patch covering
// many files, applied by git; and the picked-hunks content (Apply) agrees
// with git applying a patch of only those hunks. Zero-context hunks need
// `git apply --unidiff-zero`, as with any zero-context patch.
func TestUnifiedPatchRandomWithGit(t *testing.T) {
	for _, ctx := range []int{-1, 1, 3} {
		t.Run(fmt.Sprintf("context %d", ctx), func(t *testing.T) { randomPatchesWithGit(t, ctx) })
	}
}

func randomPatchesWithGit(t *testing.T, ctx int) {
	r := newGitRepo(t)
	var patch strings.Builder
	want := map[string]string{}
	for seed := uint64(1); seed <= 60; seed++ {
		g := newTextGen(seed, 6)
		oldLines := g.lines(g.rng.IntN(80))
		old := g.maybeDropFinalNewline(join(oldLines))
		nw := g.maybeDropFinalNewline(join(g.edit(splitLines(old), 0, len(splitLines(old)), 1+g.rng.IntN(8))))
		fd := Diff(old, nw, Options{Context: ctx})

		// Pick a random subset of hunks; the expected file is Apply's
		// result, and the patch carries only the picked hunks.
		sel := NewSelection(fd, false)
		var picked []int
		for i := range fd.Hunks {
			if g.rng.IntN(2) == 0 {
				_ = sel.PickHunk(i)
				picked = append(picked, i)
			}
		}
		expect, err := fd.Apply(old, sel)
		if err != nil {
			t.Fatal(err)
		}
		partial, err := fd.Subset(picked)
		if err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("f%03d.txt", seed)
		r.write(path, old, 0o644)
		want[path] = expect
		patch.WriteString(UnifiedPatch(PatchFile{OldPath: path, NewPath: path, OldMode: ModeFile, NewMode: ModeFile, Diff: partial}))
	}
	var flags []string
	if ctx < 0 {
		flags = []string{"--unidiff-zero"}
	}
	if err := r.apply(patch.String(), flags...); err != nil {
		t.Fatalf("git apply: %v", err)
	}
	for path, w := range want {
		if got := r.read(path); got != w {
			t.Errorf("%s: git applied %q, Apply says %q", path, got, w)
		}
	}
}
