package mount

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
)

// scriptedLower is the lower tree the scripted operations start from.
const scriptedLower = `
file mod.txt 0644 "original\n"
file app.txt 0644 "line 1\n"
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
symlink link mod.txt
symlink dangling nowhere
file f2d 0644 "was a file"
file d2f/x 0644 "inside a dir that becomes a file"
file nest/a/b/deep 0644 "deep"
file nest/a/b/c/deeper 0644 "deeper"
file nest/a/keep 0644 "kept"
file "lower odd\nname" 0644 "odd lower"
file "-dash-lower" 0644 "dash"
`

// scriptedSteps are the operations a World typically performs, each touching
// the lower tree of scriptedLower in a different way.
var scriptedSteps = []overlaytest.Step{
	{What: "rewrite a file", Do: func(m func(string) string) error { return overlaytest.Write(m("mod.txt"), "rewritten\n") }},
	{What: "append to a file", Do: func(m func(string) string) error { return overlaytest.Append(m("app.txt"), "line 2\n") }},
	{What: "create a file", Do: func(m func(string) string) error { return overlaytest.Write(m("new.txt"), "brand new") }},
	{What: "delete a file", Do: func(m func(string) string) error { return os.Remove(m("del.txt")) }},
	{What: "delete a dir tree", Do: func(m func(string) string) error { return os.RemoveAll(m("tree")) }},
	{What: "delete a dir and recreate it", Do: func(m func(string) string) error {
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
	{What: "rename a file", Do: func(m func(string) string) error { return overlaytest.Move(m("ren.txt"), m("renamed.txt")) }},
	{What: "rename a dir", Do: func(m func(string) string) error { return overlaytest.Move(m("rendir"), m("moveddir")) }},
	{What: "chmod a file", Do: func(m func(string) string) error { return os.Chmod(m("chm.sh"), 0o755) }},
	{What: "create a symlink", Do: func(m func(string) string) error { return os.Symlink("new.txt", m("newlink")) }},
	{What: "retarget a symlink", Do: func(m func(string) string) error {
		if err := os.Remove(m("link")); err != nil {
			return err
		}
		return os.Symlink("app.txt", m("link"))
	}},
	{What: "turn a file into a dir", Do: func(m func(string) string) error {
		if err := os.Remove(m("f2d")); err != nil {
			return err
		}
		if err := os.Mkdir(m("f2d"), 0o755); err != nil {
			return err
		}
		return overlaytest.Write(m("f2d/inner"), "inner")
	}},
	{What: "turn a dir into a file", Do: func(m func(string) string) error {
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
	{What: "odd names", Do: func(m func(string) string) error {
		for _, name := range []string{"sp ace.txt", "new\nline", "bad\xffbyte", "-dash"} {
			if err := overlaytest.Write(m(name), "odd: "+name); err != nil {
				return err
			}
		}
		return os.Remove(m("lower odd\nname"))
	}},
	{What: "create an empty dir", Do: func(m func(string) string) error { return os.Mkdir(m("emptydir"), 0o750) }},
	{What: "create a dir with a file", Do: func(m func(string) string) error {
		if err := os.MkdirAll(m("newdir/sub"), 0o755); err != nil {
			return err
		}
		return overlaytest.Write(m("newdir/sub/f"), "nested new")
	}},
}

// copyTreeCpA copies src to dst keeping modes, symlinks and xattrs.
func copyTreeCpA(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", "--", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
}

// changeLines renders the parts of a change set the scripted test pins down:
// kind, type and path, and whether the change lies under a replaced dir.
func changeLines(cs *overlay.ChangeSet) []string {
	lines := make([]string, len(cs.Changes))
	for i, c := range cs.Changes {
		lines[i] = fmt.Sprintf("%s %s %q", c.Kind.Letter(), c.Type, c.Path)
		if c.Opaque {
			lines[i] += " opaque"
		}
	}
	return lines
}

// scriptedChanges is the change set scriptedSteps make of scriptedLower, in
// path order. It is the same for every backend: fuse-overlayfs marks the new
// dirs it makes (emptydir, f2d, moveddir, newdir) opaque and unionfs-fuse
// records deletions in .unionfs-fuse, but neither may show in the result.
var scriptedChanges = []string{
	`A file "-dash"`,
	`M file "app.txt"`,
	`A file "bad\xffbyte"`,
	`M file "chm.sh"`,
	`T file "d2f"`,
	`D file "d2f/x"`,
	`D file "del.txt"`,
	`A dir "emptydir"`,
	`T dir "f2d"`,
	`A file "f2d/inner"`,
	`M symlink "link"`,
	`D file "lower odd\nname"`,
	`M file "mod.txt"`,
	`A dir "moveddir"`,
	`A dir "moveddir/in"`,
	`A file "moveddir/in/y"`,
	`A file "moveddir/x"`,
	`D dir "nest/a/b/c"`,
	`D file "nest/a/b/c/deeper"`,
	`D file "nest/a/b/deep"`,
	`A file "new\nline"`,
	`A file "new.txt"`,
	`A dir "newdir"`,
	`A dir "newdir/sub"`,
	`A file "newdir/sub/f"`,
	`A symlink "newlink"`,
	`M dir "re" opaque`,
	`A file "re/fresh" opaque`,
	`M file "re/keep" opaque`,
	`D file "re/old" opaque`,
	`D dir "re/olddir" opaque`,
	`D file "ren.txt"`,
	`A file "renamed.txt"`,
	`D dir "rendir"`,
	`D dir "rendir/in"`,
	`D file "rendir/in/y"`,
	`D file "rendir/x"`,
	`A file "sp ace.txt"`,
	`D dir "tree"`,
	`D file "tree/a"`,
	`D dir "tree/sub"`,
	`D file "tree/sub/b"`,
	`D dir "tree/sub/empty"`,
}

// TestScriptedRoundTripEachBackend is the proof that the change set of a real
// mount is right: the scripted operations run on the mount, the merged view is
// recorded while mounted, and after unmounting (1) ReadChanges lists exactly
// the expected changes and (2) replaying them onto a copy of the lower yields
// the recorded view. The same operations on a plain copy of the lower check
// the backend itself.
func TestScriptedRoundTripEachBackend(t *testing.T) {
	for _, b := range probeOrder {
		t.Run(string(b), func(t *testing.T) {
			skipWithoutBackend(t, b)
			ctx := context.Background()
			s := scratchLayers(t, b, "round trip")
			overlaytest.Build(t, s.Lower, scriptedLower)
			lowerBefore := overlaytest.Record(t, s.Lower)

			plain := filepath.Join(t.TempDir(), "plain")
			copyTreeCpA(t, s.Lower, plain)
			overlaytest.RunSteps(t, plain, scriptedSteps)
			wantView := overlaytest.Record(t, plain)

			mountForTest(t, s)
			overlaytest.RunSteps(t, s.Target, scriptedSteps)
			merged := overlaytest.Record(t, s.Target)
			if err := Unmount(ctx, s.Target); err != nil {
				t.Fatal(err)
			}
			if diff := overlaytest.DiffTrees(wantView, merged); diff != nil {
				t.Errorf("%s merged view differs from the same operations on a plain copy:\n%s", b, strings.Join(diff, "\n"))
			}
			if diff := overlaytest.DiffTrees(lowerBefore, overlaytest.Record(t, s.Lower)); diff != nil {
				t.Fatalf("the mount changed the lower:\n%s", strings.Join(diff, "\n"))
			}

			layers := overlay.Layers{Upper: s.Upper, Lower: s.Lower, Dialect: b.Dialect()}
			cs, err := overlay.ReadChanges(ctx, layers, overlay.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := changeLines(cs); !slices.Equal(got, scriptedChanges) {
				t.Errorf("change set of %s differs (-want +got):\n%s", b, lineDiff(scriptedChanges, got))
				for _, c := range cs.Changes {
					t.Log(c)
				}
			}
			auto, err := overlay.ReadChanges(ctx, overlay.Layers{Upper: s.Upper, Lower: s.Lower}, overlay.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if auto.Dialect != b.Dialect() {
				t.Errorf("dialect detected as %q, want %q", auto.Dialect, b.Dialect())
			}

			replayed := filepath.Join(t.TempDir(), "replayed")
			copyTreeCpA(t, s.Lower, replayed)
			if err := overlay.ApplyChangeSet(ctx, cs, layers, replayed); err != nil {
				t.Fatal(err)
			}
			if diff := overlaytest.DiffTrees(merged, overlaytest.Record(t, replayed)); diff != nil {
				t.Errorf("replaying the change set does not reproduce the merged view (merged vs replayed):\n%s", strings.Join(diff, "\n"))
			}
		})
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got []string) string {
	inWant := map[string]bool{}
	for _, l := range want {
		inWant[l] = true
	}
	inGot := map[string]bool{}
	for _, l := range got {
		inGot[l] = true
	}
	var b strings.Builder
	for _, l := range want {
		if !inGot[l] {
			b.WriteString("-" + l + "\n")
		}
	}
	for _, l := range got {
		if !inWant[l] {
			b.WriteString("+" + l + "\n")
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order or duplicates)"
	}
	return b.String()
}
