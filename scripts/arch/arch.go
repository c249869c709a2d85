// Package arch holds strata's architecture rules as code: `make arch` (and
// `make test`) fail when a change breaks one of them. The rules are the
// seams docs/design.md describes:
//
//   - only the runtime packages branch on a World's backend (local, cube);
//   - only overlay's dialect code spells the whiteout and overlay xattr names;
//   - the core (engine, overlay, cube, diffview and their subpackages) imports
//     no UI package, directly or through a dependency.
//
// Each rule is a function over parsed Go files, so its own tests can feed it
// a violation and see it fail.
package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Module is strata's module path.
const Module = "github.com/stratahq/strata"

// Violation is one broken rule at one place.
type Violation struct {
	Rule string
	Pos  string // file:line
	What string
}

func (v Violation) String() string { return fmt.Sprintf("%s: %s: %s", v.Pos, v.Rule, v.What) }

// File is one parsed, non-test Go file with its package's import path.
type File struct {
	Pkg  string // import path, e.g. github.com/stratahq/strata/engine
	Path string // relative to the module root
	Fset *token.FileSet
	AST  *ast.File
}

// LoadModule parses every non-test Go file under root, skipping third_party,
// testdata and hidden directories.
func LoadModule(root string) ([]File, error) {
	var files []File
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			name := d.Name()
			// scripts/arch spells the names it looks for.
			if rel != "." && (name == "third_party" || name == "testdata" || strings.HasPrefix(name, ".") || name == "dist" || name == "bin" || filepath.ToSlash(rel) == "scripts/arch") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", rel, err)
		}
		pkg := Module
		if dir := filepath.ToSlash(filepath.Dir(rel)); dir != "." {
			pkg += "/" + dir
		}
		files = append(files, File{Pkg: pkg, Path: filepath.ToSlash(rel), Fset: fset, AST: f})
		return nil
	})
	return files, err
}

// ParseSource parses one in-memory file as if it lived at path in package pkg
// (for the rules' own tests).
func ParseSource(pkg, path, src string) (File, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return File{}, err
	}
	return File{Pkg: pkg, Path: path, Fset: fset, AST: f}, nil
}

func (f File) pos(p token.Pos) string {
	return fmt.Sprintf("%s:%d", f.Path, f.Fset.Position(p).Line)
}

func under(pkg string, prefixes []string) bool {
	for _, p := range prefixes {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// backendNames are the identifiers whose comparison is a branch on a World's
// runtime: the backend constants and the cube-only World fields.
var backendNames = []string{"RuntimeLocal", "RuntimeCube", "BackendLocal", "BackendCube"}

// BackendBranches reports, in files outside the runtime packages, every
// comparison with a backend constant (`w.Backend == engine.RuntimeCube`), every
// switch on a `.Backend` or `.Runtime` field with backend cases, and every
// nil check of a World's `.Cube` field.
func BackendBranches(files []File, runtimePkgs []string) []Violation {
	const rule = "backend branch outside a runtime package"
	var out []Violation
	for _, f := range files {
		if under(f.Pkg, runtimePkgs) {
			continue
		}
		ast.Inspect(f.AST, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					return true
				}
				for _, side := range []ast.Expr{n.X, n.Y} {
					if name := identName(side); slices.Contains(backendNames, name) {
						out = append(out, Violation{rule, f.pos(n.Pos()), "compares with " + name})
						return true
					}
				}
				if isNil(n.Y) && selName(n.X) == "Cube" || isNil(n.X) && selName(n.Y) == "Cube" {
					out = append(out, Violation{rule, f.pos(n.Pos()), "nil check of a World's Cube field"})
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if name := identName(e); slices.Contains(backendNames, name) {
						out = append(out, Violation{rule, f.pos(e.Pos()), "switch case " + name})
					}
				}
			}
			return true
		})
	}
	return out
}

func identName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

func selName(e ast.Expr) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		return s.Sel.Name
	}
	return ""
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "nil"
}

// overlayWords are the on-disk names of the overlay dialects: whiteout and
// opaque markers and the overlay xattrs.
var overlayWords = []string{
	".wh.", ".wh..wh..opq", "overlay.opaque", "overlay.whiteout", "overlay.redirect",
	"overlay.metacopy", "overlay.origin", "overlay.impure", "overlay.nlink", "overlay.upper",
	"trusted.overlay", "user.overlay",
}

// WhiteoutNames reports string literals spelling a whiteout or overlay xattr
// name in any file that is not one of dialectFiles (module-relative paths).
func WhiteoutNames(files []File, dialectFiles []string) []Violation {
	const rule = "overlay dialect name outside overlay's dialect code"
	var out []Violation
	for _, f := range files {
		if slices.Contains(dialectFiles, f.Path) {
			continue
		}
		ast.Inspect(f.AST, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, w := range overlayWords {
				if strings.Contains(s, w) {
					out = append(out, Violation{rule, f.pos(lit.Pos()), fmt.Sprintf("literal %q", s)})
					break
				}
			}
			return true
		})
	}
	return out
}

// uiPkgs are the packages the core must not reach.
var uiPkgs = []string{
	"charm.land",
	"github.com/charmbracelet",
	Module + "/third_party",
	Module + "/tui",
	Module + "/panes",
	Module + "/keymap",
	Module + "/themes",
}

// UIImports reports, for every core package, each UI package it depends on
// (deps maps a package to its transitive dependencies, as `go list -deps`
// gives them).
func UIImports(deps map[string][]string, corePkgs []string) []Violation {
	const rule = "core package depends on a UI package"
	var out []Violation
	pkgs := make([]string, 0, len(deps))
	for p := range deps {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		if !under(p, corePkgs) {
			continue
		}
		for _, d := range deps[p] {
			for _, ui := range uiPkgs {
				if d == ui || strings.HasPrefix(d, ui+"/") || strings.HasPrefix(d, ui+".") {
					out = append(out, Violation{rule, p, "depends on " + d})
				}
			}
		}
	}
	return out
}
