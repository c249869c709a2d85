package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests share one importer: checking overlay's packages from source is
// the slow part, and the imported packages do not change.
var (
	fset         = token.NewFileSet()
	testImporter = importer.ForCompiler(fset, "source", nil)
)

// typeErrors type-checks overlay's package pkg as on disk with files laid
// over it, and returns what the checker says.
func typeErrors(t *testing.T, pkg string, files map[string][]byte) []string {
	t.Helper()
	dir := "../../overlay"
	if pkg != "overlay" {
		dir = filepath.Join(dir, pkg)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(p)] = b
	}
	for n, b := range files {
		srcs[n] = b
	}
	var asts []*ast.File
	for n, b := range srcs {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), b, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		asts = append(asts, f)
	}
	var errs []string
	conf := types.Config{Importer: testImporter, Error: func(err error) { errs = append(errs, err.Error()) }}
	_, _ = conf.Check(importPath(pkg), fset, asts, nil)
	return errs
}

// TestFixInsideRepairsPreSplitCode feeds each part a file written the way
// code was before the split (what a branch merged afterwards brings: package
// overlay, bare names from what are now other packages, the old helper
// names): it does not compile as it is, and compiles after FixInside.
func TestFixInsideRepairsPreSplitCode(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks overlay from source")
	}
	cases := []struct {
		pkg, src string
		want     []string // in the repaired file
	}{
		{"mount", `package overlay

import "testing"

func TestMergedLater(t *testing.T) {
	s := MountSpec{Backend: BackendKernel, Lower: "/l"}
	if s.Backend.Dialect() != DialectKernel {
		t.Fatal(s)
	}
}
`, []string{"package mount", "Backend: overlay.BackendKernel", "!= overlay.DialectKernel", `"github.com/stratahq/strata/overlay"`, "s := MountSpec{"}},
		{"publish", `package overlay

func mergedLater(m *Manifest, fd int) string {
	closeFd(fd)
	ce := &ContentError{Path: "p"}
	return shortHash(ce.Path) + m.Root.Path
}
`, []string{"package publish", "m *store.Manifest", "overlay.CloseFd(fd)", "&store.ContentError{", "store.ShortHash(ce.Path)", `"github.com/stratahq/strata/overlay/store"`}},
		{"store", `package overlay

func mergedLater(d Dialect) (bool, error) {
	r, err := rulesFor(d)
	if err != nil {
		return false, err
	}
	m, _ := r.classifyName(".wh.x", false)
	return m == MarkerPlain || r.isWhiteoutDev(0, 0), fsyncPath("/")
}
`, []string{"package store", "d overlay.Dialect", "overlay.RulesFor(d)", "r.ClassifyName(", "overlay.MarkerPlain", "r.IsWhiteoutDev(", "fsx.FsyncPath(", `"github.com/stratahq/strata/fsx"`}},
	}
	for _, tc := range cases {
		t.Run(tc.pkg, func(t *testing.T) {
			in := map[string][]byte{"merged_later.go": []byte(tc.src)}
			if errs := typeErrors(t, tc.pkg, in); len(errs) == 0 {
				t.Fatal("the pre-split file compiles as it is: the case tests nothing")
			}
			out, notes, err := FixInside("../../overlay", tc.pkg, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(notes) != 0 {
				t.Fatalf("notes: %v", notes)
			}
			got := string(out["merged_later.go"])
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("repaired file lacks %q:\n%s", w, got)
				}
			}
			if errs := typeErrors(t, tc.pkg, out); len(errs) != 0 {
				t.Fatalf("still does not compile: %v\n%s", errs, got)
			}
		})
	}
}

// A root file that needs a part cannot import it: the fix says where the
// file belongs instead of writing an import cycle.
func TestFixInsideSaysWhereAFileBelongs(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks overlay from source")
	}
	in := map[string][]byte{"merged_later.go": []byte("package overlay\n\nvar m *Manifest\n")}
	out, notes, err := FixInside("../../overlay", "overlay", in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "move merged_later.go to overlay/store") {
		t.Fatalf("want one note to move the file to overlay/store and no rewrite, got %v %v", notes, out)
	}
}
