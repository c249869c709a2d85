package overlay

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCaptureAndChangesShareOneVocabulary feeds the change reader (what the
// reviewer sees) and capture (what a snapshot freezes and a rollback
// restores) uppers whose markers the two used to read differently: each
// case must mean the same to both, or a rollback would silently resurrect or
// delete what the diff showed.
func TestCaptureAndChangesShareOneVocabulary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for whiteout devices and trusted xattrs")
	}
	cases := []struct {
		name       string
		d          Dialect
		upper      string
		oldDeleted bool // d/old reads deleted (d opaque) in the World
		absent     string
	}{
		// the kernel ignores fuse-overlayfs's fallback xattr: d stays merged.
		{"kernel ignores fuse opaque xattr", DialectKernel, "dir d\nxattr d user.fuseoverlayfs.opaque y\nfile d/new 0644 n", false, ""},
		// a char .wh..opq is an opaque marker wherever .wh. names are markers.
		{"oci char opaque marker", DialectOCI, "dir d\nchar d/.wh..opq 0 0 0000\nfile d/new 0644 n", true, "d/.wh..opq"},
		{"oci file opaque marker", DialectOCI, "dir d\nfile d/.wh..opq 0644\nfile d/new 0644 n", true, "d/.opq"},
		// an open-but-deleted FUSE leftover is never the World's file.
		{"fuse hidden leftover", DialectKernel, "dir d\nfile d/.fuse_hidden0000001 0644 x\nfile d/new 0644 n", false, "d/.fuse_hidden0000001"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := resolveLayers(t, tc.d, "file d/old 0644 old\n", tc.upper)
			cs, err := ReadChanges(context.Background(), l, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			changed := map[string]Kind{}
			for _, c := range cs.Changes {
				changed[c.Path] = c.Kind
			}
			if got := changed["d/old"] == Deleted; got != tc.oldDeleted {
				t.Errorf("change reader: d/old deleted = %v, want %v (changes %v)", got, tc.oldDeleted, changed)
			}
			m, _, err := CaptureUpper(context.Background(), snaptStore(t), l.Upper, tc.d, nil)
			if err != nil {
				t.Fatal(err)
			}
			e := m.Lookup("d")
			if e == nil || e.Kind != EntryDir {
				t.Fatalf("capture: d = %+v, want a dir", e)
			}
			if e.Opaque != tc.oldDeleted {
				t.Errorf("capture: d opaque = %v, change reader: d/old deleted = %v; they must agree", e.Opaque, tc.oldDeleted)
			}
			if tc.absent != "" {
				if _, ok := changed[tc.absent]; ok {
					t.Errorf("change reader reports marker %q as a change", tc.absent)
				}
				if e := m.Lookup(tc.absent); e != nil {
					t.Errorf("capture freezes marker %q as %+v", tc.absent, e)
				}
			}
		})
	}
}

// TestClassifyUpperEntryMatchesChangeReader checks the watcher's classifier
// against the change reader on each dialect's markers.
func TestClassifyUpperEntryMatchesChangeReader(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for whiteout devices and trusted xattrs")
	}
	cases := []struct {
		d     Dialect
		upper string
		rel   string
		want  UpperMark
	}{
		{DialectKernel, "whiteout d/old", "d/old", UpperMark{Marker: MarkerWhiteout, Target: "d/old"}},
		{DialectKernel, "file d/old 0644\nxattr d/old trusted.overlay.whiteout \"\"", "d/old", UpperMark{Marker: MarkerWhiteout, Target: "d/old"}},
		{DialectKernel, "file d/.wh.old 0644", "d/.wh.old", UpperMark{Marker: MarkerPlain, Target: "d/.wh.old"}},
		{DialectOCI, "file d/.wh.old 0644", "d/.wh.old", UpperMark{Marker: MarkerWhiteout, Target: "d/old"}},
		{DialectFuseOverlayfs, "file d/.wh..wh..opq 0644", "d/.wh..wh..opq", UpperMark{Marker: MarkerOpaque}},
		{DialectOCI, "file .wh..wh.aufs 0644", ".wh..wh.aufs", UpperMark{Marker: MarkerSkip}},
		{DialectUnionfs, "whiteout d/old", "d/old", UpperMark{Marker: MarkerPlain, Target: "d/old"}},
		{DialectUnionfs, "file .unionfs-fuse/d/old_HIDDEN~ 0644", ".unionfs-fuse/d/old_HIDDEN~", UpperMark{Marker: MarkerWhiteout, Target: "d/old"}},
		{DialectUnionfs, "dir .unionfs/d", ".unionfs/d", UpperMark{Marker: MarkerSkip}},
		{DialectKernel, "file d/.fuse_hidden01 0644", "d/.fuse_hidden01", UpperMark{Marker: MarkerSkip}},
	}
	for _, tc := range cases {
		l := resolveLayers(t, tc.d, "file d/old 0644 old\n", tc.upper)
		got, err := ClassifyUpperEntry(tc.d, l.Upper, tc.rel)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.d, tc.rel, err)
		}
		if got.Marker != tc.want.Marker || got.Target != tc.want.Target {
			t.Errorf("%s %q = %+v, want %+v", tc.d, tc.rel, got, tc.want)
		}
		if tc.want.Marker == MarkerWhiteout {
			cs, err := ReadChanges(context.Background(), l, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, c := range cs.Changes {
				found = found || (c.Path == tc.want.Target && c.Kind == Deleted)
			}
			if !found {
				t.Errorf("%s %q: watcher says deletes %q, change reader does not: %+v", tc.d, tc.rel, tc.want.Target, cs.Changes)
			}
		}
	}
	if _, err := ClassifyUpperEntry(DialectKernel, t.TempDir(), "gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("vanished entry: err = %v, want not-exist", err)
	}
}

// vocabularyLiteral matches string literals that spell an overlay marker or
// xattr name: they belong in the dialect code alone.
var vocabularyLiteral = regexp.MustCompile(`\.wh\.|_HIDDEN~|\.fuse_hidden|(trusted|user)\.overlay\.|user\.fuseoverlayfs|(^|/)\.unionfs(-fuse)?($|/)`)

// dialectFiles hold the layer vocabulary; no other non-test Go file of the
// module may spell it. Tests and the overlaytest builder spell uppers by
// hand on purpose, so they are exempt.
var dialectFiles = map[string]bool{"overlay/dialect.go": true}

// TestLayerVocabularyOnlyInDialect fails when a whiteout name, an opaque
// marker, the unionfs meta tree or an overlay xattr name is written as a
// string literal outside the dialect code.
func TestLayerVocabularyOnlyInDialect(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel != "." && strings.HasPrefix(d.Name(), "."), rel == "third_party", rel == "overlay/overlaytest", d.Name() == "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || dialectFiles[rel] {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				s = lit.Value
			}
			for _, line := range strings.Split(s, "\n") {
				for _, word := range strings.Fields(line) {
					if vocabularyLiteral.MatchString(word) {
						t.Errorf("%s: layer vocabulary %q spelled outside %v; ask the overlay dialect instead", fset.Position(lit.Pos()), word, dialectFiles)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
