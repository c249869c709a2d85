package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runtimeFiles are the only files that may know which runtime a World has:
// the seam and its implementations.
func runtimeFile(rel string) bool {
	switch rel {
	case "engine/world/kinds.go", "engine/runtime.go", "engine/local_runtime.go":
		return true
	}
	return strings.HasPrefix(rel, "engine/cube_")
}

// TestArchOneSeamPerRuntime fails when code outside the runtime
// implementations branches on a World's runtime (a comparison with or a case
// of RuntimeLocal/RuntimeCube, or, in the engine, a w.Cube nil guard), or
// compares an isolation level with a string literal instead of its typed
// constant. Adding a runtime or a level must not mean hunting for branches.
func TestArchOneSeamPerRuntime(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	runtimeConsts := map[string]bool{}
	for _, r := range Runtimes() {
		runtimeConsts["Runtime"+strings.ToUpper(string(r[:1]))+string(r[1:])] = true
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "third_party" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || runtimeFile(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		inEngine := strings.HasPrefix(rel, "engine/")
		report := func(n ast.Node, what string) {
			t.Errorf("%s: %s; runtimes belong behind the seam (engine/runtime.go), isolation levels are parsed in engine/kinds.go", fset.Position(n.Pos()), what)
		}
		isRuntimeConst := func(x ast.Expr) bool {
			switch x := x.(type) {
			case *ast.Ident:
				return runtimeConsts[x.Name]
			case *ast.SelectorExpr:
				return runtimeConsts[x.Sel.Name]
			}
			return false
		}
		isSel := func(x ast.Expr, name string) bool {
			s, ok := x.(*ast.SelectorExpr)
			return ok && s.Sel.Name == name
		}
		isNil := func(x ast.Expr) bool { id, ok := x.(*ast.Ident); return ok && id.Name == "nil" }
		isStringLit := func(x ast.Expr) bool {
			l, ok := x.(*ast.BasicLit)
			if !ok || l.Kind != token.STRING {
				return false
			}
			s, _ := strconv.Unquote(l.Value)
			return s != ""
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					return true
				}
				switch {
				case isRuntimeConst(n.X) || isRuntimeConst(n.Y):
					report(n, "branches on the runtime")
				case inEngine && (isSel(n.X, "Cube") && isNil(n.Y) || isSel(n.Y, "Cube") && isNil(n.X)):
					report(n, "guards on w.Cube")
				case (isSel(n.X, "Isolation") && isStringLit(n.Y)) || (isSel(n.Y, "Isolation") && isStringLit(n.X)):
					report(n, "compares an isolation with a string literal")
				}
			case *ast.SwitchStmt:
				if n.Tag == nil {
					return true
				}
				for _, s := range n.Body.List {
					for _, x := range s.(*ast.CaseClause).List {
						if isRuntimeConst(x) {
							report(x, "switches on the runtime")
						}
						if isSel(n.Tag, "Isolation") && isStringLit(x) {
							report(x, "switches on an isolation with string literals")
						}
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
	if checked < 50 {
		t.Fatalf("checked only %d files under %s", checked, root)
	}
}
