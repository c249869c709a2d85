package fsx

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// byteUnitLiteral matches a string literal that formats a number with a
// byte unit, or lists the units: the sign of a second HumanBytes. (Prose
// such as "longer than 4 KiB" is fine.)
var byteUnitLiteral = regexp.MustCompile(`%[-+ #0-9.]*[fdgv] ?[KMGTPE]iB|%ciB|KMGTPE|^" ?[KMGTPE]iB"$`)

// TestHelpersLiveInFsx fails when a non-test file outside fsx grows its own
// mode-bits conversion (a function spelling both fs.ModeSetuid and the unix
// setuid bit) or its own byte formatting (a byte-unit literal): each has one
// implementation, here.
func TestHelpersLiveInFsx(t *testing.T) {
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
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "third_party" || rel == "fsx" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			var goSetuid, unixSetuid bool
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					goSetuid = goSetuid || n.Sel.Name == "ModeSetuid"
					unixSetuid = unixSetuid || n.Sel.Name == "S_ISUID"
				case *ast.BasicLit:
					if n.Kind == token.INT && (n.Value == "0o4000" || n.Value == "04000") {
						unixSetuid = true
					}
					if n.Kind == token.STRING && byteUnitLiteral.MatchString(n.Value) {
						t.Errorf("%s: %s prints byte units itself; use fsx.HumanBytes", fset.Position(n.Pos()), fn.Name.Name)
					}
				}
				return true
			})
			if goSetuid && unixSetuid {
				t.Errorf("%s: %s converts mode bits itself; use fsx.UnixMode / fsx.FileMode", fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
