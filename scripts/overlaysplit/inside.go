package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// renamed maps the unexported identifiers the split exported (they cross a
// seam now) to their new name and the package that declares it.
var renamed = map[string][2]string{
	"anchorAt":            {"AnchorAt", "overlay"},
	"anchorDir":           {"AnchorDir", "overlay"},
	"classifyName":        {"ClassifyName", "overlay"},
	"classifyXattr":       {"ClassifyXattr", "overlay"},
	"closeFd":             {"CloseFd", "overlay"},
	"closeQuiet":          {"CloseQuiet", "overlay"},
	"copySparse":          {"CopySparse", "store"},
	"deletionMarkers":     {"DeletionMarkers", "overlay"},
	"errShrank":           {"ErrShrank", "store"},
	"fdPath":              {"FdPath", "overlay"},
	"files":               {"Files", "overlay"},
	"fsyncPath":           {"FsyncPath", "fsx"},
	"isOpaqueValue":       {"IsOpaqueValue", "overlay"},
	"isOverlayXattr":      {"IsOverlayXattr", "overlay"},
	"isWhiteoutDev":       {"IsWhiteoutDev", "overlay"},
	"joinRel":             {"JoinRel", "overlay"},
	"metaDir":             {"MetaDir", "overlay"},
	"mknodWhiteout":       {"MknodWhiteout", "overlay"},
	"nodes":               {"Nodes", "overlay"},
	"opaqueSpelling":      {"OpaqueSpelling", "overlay"},
	"opaqueSpellingFor":   {"OpaqueSpellingFor", "overlay"},
	"opaqueValue":         {"OpaqueValue", "overlay"},
	"openBeneathFd":       {"OpenBeneathFd", "overlay"},
	"openParentBeneath":   {"OpenParentBeneath", "overlay"},
	"openRootFd":          {"OpenRootFd", "overlay"},
	"openSourceFile":      {"OpenSourceFile", "overlay"},
	"openat2Missing":      {"Openat2Missing", "overlay"},
	"openatRetry":         {"OpenatRetry", "overlay"},
	"readlinkat":          {"Readlinkat", "overlay"},
	"rules":               {"Rules", "overlay"},
	"rulesFor":            {"RulesFor", "overlay"},
	"shortHash":           {"ShortHash", "store"},
	"shortPathBeneath":    {"ShortPathBeneath", "overlay"},
	"splitRel":            {"SplitRel", "overlay"},
	"unionfsHiddenPath":   {"UnionfsHiddenPath", "overlay"},
	"unionfsHiddenTarget": {"UnionfsHiddenTarget", "overlay"},
	"unionfsMetaDirs":     {"UnionfsMetaDirs", "overlay"},
	"unionfsMetaRoot":     {"UnionfsMetaRoot", "overlay"},
	"upperDeletes":        {"UpperDeletes", "overlay"},
	"upperOpaque":         {"UpperOpaque", "overlay"},
	"whiteoutSpelling":    {"WhiteoutSpelling", "overlay"},
	"xattrs":              {"Xattrs", "overlay"},
}

// renamedMembers are the methods and fields the split exported.
var renamedMembers = map[string]string{
	"classifyName": "ClassifyName", "classifyXattr": "ClassifyXattr", "isWhiteoutDev": "IsWhiteoutDev",
	"files": "Files", "metaDir": "MetaDir", "nodes": "Nodes", "xattrs": "Xattrs",
}

// layers says which of overlay's packages each may import (scripts/arch
// holds the same rule).
var layers = map[string][]string{
	"overlay": {"fsx"},
	"mount":   {"fsx", "overlay"},
	"store":   {"fsx", "overlay"},
	"publish": {"fsx", "overlay", "store"},
}

func importPath(pkg string) string {
	switch pkg {
	case "overlay":
		return overlayPath
	case "fsx":
		return strings.TrimSuffix(overlayPath, "/overlay") + "/fsx"
	}
	return overlayPath + "/" + pkg
}

var noMember = regexp.MustCompile(`has no field or method (\w+)`)

// FixInside repairs, in overlay's package pkg ("overlay" for the root, or
// "mount", "store", "publish"; overlayDir is the module's overlay
// directory), code written before the split: a package clause that still says
// overlay, bare references to identifiers that now live in another part or
// in the root, and the old names of the helpers the split exported. files
// overrides or adds file contents by base name (nil: as on disk). It returns
// the rewritten files and notes on what it could not fix (a file that needs
// a part its package may not import belongs in that part).
func FixInside(overlayDir, pkg string, files map[string][]byte) (map[string][]byte, []string, error) {
	if _, ok := layers[pkg]; !ok {
		return nil, nil, fmt.Errorf("%s is not overlay or one of its parts", pkg)
	}
	dir := overlayDir
	if pkg != "overlay" {
		dir = filepath.Join(overlayDir, pkg)
	}
	srcs := map[string][]byte{}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		srcs[filepath.Base(p)] = b
	}
	for n, b := range files {
		srcs[n] = b
	}
	rootExports := map[string]bool{}
	if pkg != "overlay" {
		var err error
		if rootExports, err = exportedIn(overlayDir); err != nil {
			return nil, nil, err
		}
	}
	if err != nil {
		return nil, nil, err
	}
	// One file set and importer for every pass: the imported packages do
	// not change while pkg is repaired, and checking them from source is
	// the slow part.
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	changed := map[string][]byte{}
	var notes []string
	for range 8 {
		edits, n, err := fixPass(fset, imp, dir, pkg, srcs, rootExports)
		if err != nil {
			return nil, nil, err
		}
		notes = n
		if len(edits) == 0 {
			break
		}
		for name, b := range edits {
			srcs[name] = b
			changed[name] = b
		}
	}
	return changed, notes, nil
}

// exportedIn lists the exported top-level names of the package in dir.
func exportedIn(dir string) (map[string]bool, error) {
	out := map[string]bool{}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for name, obj := range topLevel(f) {
			if obj {
				out[name] = true
			}
		}
	}
	return out, nil
}

func topLevel(f *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				out[d.Name.Name] = d.Name.IsExported()
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out[s.Name.Name] = s.Name.IsExported()
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out[n.Name] = n.IsExported()
					}
				}
			}
		}
	}
	return out
}

func fixPass(fset *token.FileSet, imp types.Importer, dir, pkg string, srcs map[string][]byte, rootExports map[string]bool) (map[string][]byte, []string, error) {
	names := make([]string, 0, len(srcs))
	for n := range srcs {
		names = append(names, n)
	}
	sort.Strings(names)
	var files []*ast.File
	byName := map[string]*ast.File{}
	edits := map[string][]edit{}
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), srcs[n], parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, fmt.Errorf("parse %s: %w", n, err)
		}
		if strings.HasSuffix(f.Name.Name, "_test") {
			continue
		}
		if f.Name.Name != pkg {
			edits[n] = append(edits[n], edit{fset.Position(f.Name.Pos()).Offset, fset.Position(f.Name.End()).Offset, pkg})
		}
		files = append(files, f)
		byName[n] = f
	}
	if len(edits) > 0 { // package clauses first: the checker needs one package
		return apply(srcs, edits)
	}
	var typeErrs []types.Error
	conf := types.Config{
		Importer: imp,
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) {
				typeErrs = append(typeErrs, te)
			}
		},
	}
	_, _ = conf.Check(importPath(pkg), fset, files, nil)
	need := map[string]map[string]bool{}
	var notes []string
	for _, te := range typeErrs {
		pos := te.Fset.Position(te.Pos)
		file := filepath.Base(pos.Filename)
		src := srcs[file]
		if name, ok := strings.CutPrefix(te.Msg, "undefined: "); ok {
			newName, home := "", ""
			switch {
			case renamed[name][0] != "":
				newName, home = renamed[name][0], renamed[name][1]
			case moved[name] != "":
				newName, home = name, moved[name]
			case rootExports[name]:
				newName, home = name, "overlay"
			default:
				continue
			}
			text := newName
			if home != pkg {
				if !slices.Contains(layers[pkg], home) {
					notes = append(notes, fmt.Sprintf("%s:%d: %s lives in %s, which %s may not import: move %s to overlay/%s", pos.Filename, pos.Line, name, importPath(home), importPath(pkg), file, home))
					continue
				}
				text = home + "." + newName
				if need[file] == nil {
					need[file] = map[string]bool{}
				}
				need[file][home] = true
			}
			edits[file] = append(edits[file], edit{pos.Offset, pos.Offset + len(name), text})
			continue
		}
		if m := noMember.FindStringSubmatch(te.Msg); m != nil {
			if newName, ok := renamedMembers[m[1]]; ok {
				off := pos.Offset
				if i := strings.Index(string(src[off:]), m[1]); i >= 0 {
					edits[file] = append(edits[file], edit{off + i, off + i + len(m[1]), newName})
				}
			}
		}
	}
	for file, homes := range need {
		f := byName[file]
		var lines []string
		for h := range homes {
			if !hasImport(f, importPath(h)) {
				lines = append(lines, "\t"+strconv.Quote(importPath(h)))
			}
		}
		if len(lines) == 0 {
			continue
		}
		sort.Strings(lines)
		ins := strings.Join(lines, "\n")
		var imp *ast.GenDecl
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
				imp = g
			}
		}
		switch {
		case imp == nil:
			off := fset.Position(f.Name.End()).Offset
			edits[file] = append(edits[file], edit{off, off, "\n\nimport (\n" + ins + "\n)"})
		case imp.Lparen.IsValid():
			// Join the last group when it is strata's own, else start one.
			off := fset.Position(imp.Rparen).Offset
			sep := "\n"
			if last := imp.Specs[len(imp.Specs)-1].(*ast.ImportSpec); strings.HasPrefix(last.Path.Value, `"`+strings.TrimSuffix(overlayPath, "overlay")) {
				sep = ""
			}
			edits[file] = append(edits[file], edit{off, off, sep + ins + "\n"})
		default:
			off := fset.Position(imp.End()).Offset
			edits[file] = append(edits[file], edit{off, off, "\nimport (\n" + ins + "\n)"})
		}
	}
	out, _, err := apply(srcs, edits)
	return out, notes, err
}

func apply(srcs map[string][]byte, edits map[string][]edit) (map[string][]byte, []string, error) {
	out := map[string][]byte{}
	for file, es := range edits {
		b, err := applyEdits(srcs[file], es)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		out[file] = b
	}
	return out, nil, nil
}
