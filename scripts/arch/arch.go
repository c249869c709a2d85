// Package arch holds strata's architecture rules as code: `make arch` (and
// `make test`) fail when a change breaks one of them. The rules are the
// seams docs/design.md describes:
//
//   - only the runtimes branch on a World's backend (local, cube), and
//     isolation levels are never compared with string literals;
//   - only overlay's dialect code spells the whiteout and overlay xattr names;
//   - overlay's parts import one way (root <- mount, store <- publish);
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
	"regexp"
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

// RuntimeFile reports whether a module-relative path belongs to a runtime:
// it equals one of runtimePaths or lies under one given with a trailing "/",
// or starts with one given with a trailing "_" (a file-name prefix such as
// "engine/cube_").
func RuntimeFile(path string, runtimePaths []string) bool {
	for _, r := range runtimePaths {
		switch {
		case path == r:
			return true
		case strings.HasSuffix(r, "/") || strings.HasSuffix(r, "_"):
			if strings.HasPrefix(path, r) {
				return true
			}
		}
	}
	return false
}

// BackendBranches reports, in files outside the runtimes, every comparison
// with a backend constant (`w.Backend == engine.RuntimeCube`), every switch
// case on one, every nil check of a World's `.Cube` field, and every
// comparison of an isolation level with a string literal (levels are typed
// constants, parsed in one place).
func BackendBranches(files []File, runtimePaths []string) []Violation {
	const rule = "backend branch outside a runtime"
	var out []Violation
	for _, f := range files {
		if RuntimeFile(f.Path, runtimePaths) {
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
				if selName(n.X) == "Isolation" && isStringLit(n.Y) || selName(n.Y) == "Isolation" && isStringLit(n.X) {
					out = append(out, Violation{rule, f.pos(n.Pos()), "compares an isolation level with a string literal"})
				}
			case *ast.SwitchStmt:
				for _, st := range n.Body.List {
					for _, e := range st.(*ast.CaseClause).List {
						if name := identName(e); slices.Contains(backendNames, name) {
							out = append(out, Violation{rule, f.pos(e.Pos()), "switch case " + name})
						}
						if n.Tag != nil && selName(n.Tag) == "Isolation" && isStringLit(e) {
							out = append(out, Violation{rule, f.pos(e.Pos()), "switches on an isolation level with string literals"})
						}
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

func isStringLit(e ast.Expr) bool {
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.STRING {
		return false
	}
	v, _ := strconv.Unquote(l.Value)
	return v != ""
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "nil"
}

// overlayWord matches, in one whitespace-separated word of a literal, an
// on-disk name of an overlay dialect: whiteout and opaque markers (.wh.*),
// unionfs-fuse's meta tree and hidden names, fuse-overlayfs's and the
// kernel's overlay xattrs.
var overlayWord = regexp.MustCompile(`\.wh\.|_HIDDEN~|\.fuse_hidden|(trusted|user)\.overlay\.|user\.fuseoverlayfs|(^|/)\.unionfs(-fuse)?($|/)`)

// WhiteoutNames reports string literals spelling a whiteout marker, the
// unionfs meta tree or an overlay xattr name in any file outside
// dialectFiles (module-relative paths; a trailing "/" exempts a directory).
func WhiteoutNames(files []File, dialectFiles []string) []Violation {
	const rule = "overlay dialect name outside overlay's dialect code"
	var out []Violation
	for _, f := range files {
		if RuntimeFile(f.Path, dialectFiles) {
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
			for _, w := range strings.Fields(s) {
				if overlayWord.MatchString(w) {
					out = append(out, Violation{rule, f.pos(lit.Pos()), fmt.Sprintf("literal %q", w)})
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

// BackendImports reports every non-test file that imports a backend's own
// client package (client, e.g. the cube client) outside the paths allowed
// to (allowed: runtimePaths-style entries: the runtime's package, the
// client itself, and the engine option that injects it). A runtime's
// client calls belong in its runtime package, not in the engine.
func BackendImports(files []File, client string, allowed []string) []Violation {
	const rule = "backend client imported outside its runtime"
	var out []Violation
	for _, f := range files {
		if RuntimeFile(f.Path, allowed) {
			continue
		}
		for _, imp := range f.AST.Imports {
			if p, err := strconv.Unquote(imp.Path.Value); err == nil && p == client {
				out = append(out, Violation{rule, f.pos(imp.Pos()), "imports " + p})
			}
		}
	}
	return out
}

// ImportsOneWay reports every import inside the module that allowed does not
// list: allowed maps a package (import path) to the module packages it may
// import; packages allowed does not mention are not checked. It keeps
// overlay's parts layered the way docs/design.md draws them (the vocabulary
// at the root, store, mount and publish above it, publish above store), so
// that a newcomer reading one part never has to read the ones above it.
func ImportsOneWay(files []File, allowed map[string][]string) []Violation {
	const rule = "import against the layering"
	var out []Violation
	for _, f := range files {
		ok, checked := allowed[f.Pkg]
		if !checked {
			continue
		}
		for _, im := range f.AST.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil || !under(p, []string{Module}) || slices.Contains(ok, p) {
				continue
			}
			out = append(out, Violation{rule, f.pos(im.Pos()), f.Pkg + " imports " + p})
		}
	}
	return out
}

// RuntimeImportsEngine reports every non-test file of a runtime package
// (runtimePkgs: "engine/NAME/" entries) that imports the engine itself
// (Module + "/engine"): a runtime reaches the engine only through the Host
// interface the engine implements, so the engine can import it.
func RuntimeImportsEngine(files []File, runtimePkgs []string) []Violation {
	const rule = "runtime package imports the engine"
	var out []Violation
	for _, f := range files {
		if !RuntimeFile(f.Path, runtimePkgs) {
			continue
		}
		for _, imp := range f.AST.Imports {
			if p, err := strconv.Unquote(imp.Path.Value); err == nil && p == Module+"/engine" {
				out = append(out, Violation{rule, f.pos(imp.Pos()), "imports " + p + " (use its Host interface)"})
			}
		}
	}
	return out
}
