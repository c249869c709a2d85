package overlay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

func TestIgnoreMatch(t *testing.T) {
	cases := []struct {
		patterns []string
		path     string
		isDir    bool
		want     bool
	}{
		{[]string{".git/"}, ".git", true, true},
		{[]string{".git/"}, ".git/HEAD", false, true},
		{[]string{".git/"}, "sub/.git/objects/ab", false, true},
		{[]string{".git/"}, ".git", false, false}, // a file named .git (a submodule link) is not a dir
		{[]string{".git/"}, ".gitignore", false, false},
		{[]string{"*.o"}, "a/b/c.o", false, true},
		{[]string{"*.o"}, "a/b/c.oo", false, false},
		{[]string{"/build"}, "build", true, true},
		{[]string{"/build"}, "sub/build", true, false},
		{[]string{"build/"}, "sub/build/x.txt", false, true},
		{[]string{"doc/*.txt"}, "doc/a.txt", false, true},
		{[]string{"doc/*.txt"}, "doc/sub/a.txt", false, false},
		{[]string{"doc/*.txt"}, "x/doc/a.txt", false, false}, // an inner slash anchors
		{[]string{"**/logs"}, "a/b/logs", true, true},
		{[]string{"**/logs"}, "logs", true, true},
		{[]string{"logs/**"}, "logs/a/b", false, true},
		{[]string{"logs/**"}, "logs", true, false},
		{[]string{"a/**/b"}, "a/b", false, true},
		{[]string{"a/**/b"}, "a/x/y/b", false, true},
		{[]string{"a/**/b"}, "a/x/y/bb", false, false},
		{[]string{"?.c"}, "x.c", false, true},
		{[]string{"?.c"}, "xy.c", false, false},
		{[]string{"[ab].c"}, "b.c", false, true},
		{[]string{"[!ab].c"}, "b.c", false, false},
		{[]string{"[!ab].c"}, "z.c", false, true},
		{[]string{"[a-c]x"}, "bx", false, true},
		{[]string{"*.log", "!keep.log"}, "keep.log", false, false},
		{[]string{"*.log", "!keep.log"}, "other.log", false, true},
		{[]string{"out/", "!out/keep"}, "out/keep", false, true}, // cannot re-include under an ignored dir
		{[]string{"# comment", "", "x"}, "x", false, true},
		{[]string{`\#hash`}, "#hash", false, true},
		{[]string{`\!bang`}, "!bang", false, true},
		{[]string{"sp ace"}, "dir/sp ace", false, true},
		{[]string{"*"}, "new\nline", false, true},
		{[]string{"\xff*"}, "\xffbyte", false, true},
		{[]string{"-*"}, "-dash", false, true},
	}
	for _, c := range cases {
		ig, err := NewIgnore(c.patterns...)
		if err != nil {
			t.Fatalf("NewIgnore(%q): %v", c.patterns, err)
		}
		if got := ig.Match(c.path, c.isDir); got != c.want {
			t.Errorf("%q.Match(%q, dir=%v) = %v, want %v", c.patterns, c.path, c.isDir, got, c.want)
		}
	}
	var nilIgnore *Ignore
	if nilIgnore.Match("x", false) {
		t.Error("a nil Ignore matched")
	}
	if _, err := NewIgnore("/"); err == nil {
		t.Error(`NewIgnore("/") accepted an empty pattern`)
	}
}

// TestReadChangesIgnore checks that ignored paths (and all below an ignored
// dir) leave the change set by default and come back marked with
// IncludeIgnored, for additions and for deletions.
func TestReadChangesIgnore(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for whiteout devices")
	}
	dir := t.TempDir()
	l := Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower"), Dialect: DialectKernel}
	overlaytest.Build(t, l.Lower, `
file .git/HEAD 0644 "ref: main"
file build/old.o 0644 "obj"
file src/a.c 0644 "a"
file src/gen/x.o 0644 "x"
`)
	overlaytest.Build(t, l.Upper, `
dir .git 0755
file .git/index 0644 "index"
file .git/HEAD 0644 "ref: other"
whiteout build
file src/a.c 0644 "a changed"
file src/b.o 0644 "b"
whiteout src/gen
file keep.log 0644 "keep"
file drop.log 0644 "drop"
`)
	ig, err := NewIgnore(".git/", "build/", "*.o", "*.log", "!keep.log")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ReadChanges(context.Background(), l, ReadOptions{Ignore: ig})
	if err != nil {
		t.Fatal(err)
	}
	want := `A file 0644 4 "keep.log"
M file 0644 9 "src/a.c"
D dir 0755 0 "src/gen" whiteout
`
	if got := formatChanges(cs); got != want {
		t.Errorf("with ignores:\n%s\nwant:\n%s", got, want)
	}
	cs, err = ReadChanges(context.Background(), l, ReadOptions{Ignore: ig, IncludeIgnored: true})
	if err != nil {
		t.Fatal(err)
	}
	want = `M file 0644 10 ".git/HEAD" ignored
A file 0644 5 ".git/index" ignored
D dir 0755 0 "build" whiteout ignored
D file 0644 3 "build/old.o" whiteout ignored
A file 0644 4 "drop.log" ignored
A file 0644 4 "keep.log"
M file 0644 9 "src/a.c"
A file 0644 1 "src/b.o" ignored
D dir 0755 0 "src/gen" whiteout
D file 0644 1 "src/gen/x.o" whiteout ignored
`
	if got := formatChanges(cs); got != want {
		t.Errorf("with IncludeIgnored:\n%s\nwant:\n%s", got, want)
	}
	// The default set ignores .git only.
	cs, err = ReadChanges(context.Background(), l, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := formatChanges(cs); strings.Contains(got, ".git") || !strings.Contains(got, `"drop.log"`) {
		t.Errorf("default ignores:\n%s", got)
	}
	if got := DefaultIgnore().Patterns(); len(got) != 1 || got[0] != ".git/" {
		t.Errorf("DefaultIgnore().Patterns() = %q", got)
	}
}
