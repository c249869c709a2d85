// Command overlaysplit rewrites Go files that still say overlay.X for an
// identifier that issue 13's split moved out of the root overlay package:
// overlay.Publish becomes publish.Publish, overlay.OpenStore becomes
// store.OpenStore, overlay.Mount becomes mount.Mount, and the imports follow
// (the overlay import is dropped when nothing else uses it). Identifiers that
// stayed in overlay (dialects, change sets, layers, safe paths) are left as
// they are. It is idempotent: run it on code merged from branches written
// before the split.
//
//	go run ./scripts/overlaysplit [-n] [-inside DIR] [PATH ...]   (default: the whole module)
//
// First, inside overlay's own packages (-inside, default "overlay"; run it
// from the module root), it repairs code merged from before the split: a
// file in overlay/store still saying package overlay, a bare Manifest in
// overlay/publish that is now store.Manifest, a bare Dialect in a part that
// is now overlay.Dialect, the old names of helpers the split exported
// (closeFd is overlay.CloseFd). It finds them as the type checker does, so
// the packages must otherwise compile; a file that needs a part its package
// may not import is reported with where it belongs (git mv it, run again).
//
// A PATH is a file or a directory (walked, skipping testdata, third_party and
// hidden dirs). -n lists what would change without writing. A file that
// declares a name equal to a new package (a variable called store, say) is
// rewritten anyway and the compiler points at the shadowing; rename the
// variable.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

const overlayPath = "github.com/stratahq/strata/overlay"

// moved maps every exported identifier that left the root overlay package
// to the subpackage that now declares it (overlay/NAME).
var moved = map[string]string{
	// overlay/mount
	"ErrNoBackend":       "mount",
	"ErrUnsupportedPath": "mount",
	"ForceUnmount":       "mount",
	"InUserNamespace":    "mount",
	"Mount":              "mount",
	"MountError":         "mount",
	"MountRecord":        "mount",
	"MountRecordName":    "mount",
	"MountSpec":          "mount",
	"MountedAt":          "mount",
	"PickBackend":        "mount",
	"Probe":              "mount",
	"ProbeOptions":       "mount",
	"ProbeResult":        "mount",
	"ProbeWith":          "mount",
	"ReadMountRecord":    "mount",
	"Unmount":            "mount",
	"WriteMountRecord":   "mount",
	// overlay/publish
	"CorruptJournalError": "publish",
	"ErrForeignRoot":      "publish",
	"ErrIncomplete":       "publish",
	"ErrUnverified":       "publish",
	"InspectJournals":     "publish",
	"JournalInfo":         "publish",
	"JournalRepair":       "publish",
	"LockRoot":            "publish",
	"OpDelete":            "publish",
	"OpKind":              "publish",
	"OpMkdir":             "publish",
	"OpRmdir":             "publish",
	"OpSymlink":           "publish",
	"OpWrite":             "publish",
	"PendingJournals":     "publish",
	"Publish":             "publish",
	"PublishOp":           "publish",
	"PublishOptions":      "publish",
	"PublishPathError":    "publish",
	"PublishResult":       "publish",
	"Recover":             "publish",
	"RecoveryReport":      "publish",
	"RepairJournals":      "publish",
	"RepairOptions":       "publish",
	"RootLockPath":        "publish",
	"StaleError":          "publish",
	"StalePath":           "publish",
	"SyncFS":              "publish",
	"SyncMode":            "publish",
	"SyncPerFile":         "publish",
	// overlay/store
	"CaptureOptions":         "store",
	"CaptureStats":           "store",
	"CaptureUpper":           "store",
	"CaptureUpperWith":       "store",
	"CarryBuildState":        "store",
	"CloneCopyRange":         "store",
	"CloneFile":              "store",
	"CloneMethod":            "store",
	"ClonePlain":             "store",
	"CloneReflink":           "store",
	"ContentError":           "store",
	"CopySparse":             "store",
	"CorruptManifestError":   "store",
	"CorruptObjectError":     "store",
	"DecodeManifest":         "store",
	"DefaultGCGrace":         "store",
	"DeltaAdded":             "store",
	"DeltaContent":           "store",
	"DeltaKind":              "store",
	"DeltaMode":              "store",
	"DeltaOpaque":            "store",
	"DeltaOwner":             "store",
	"DeltaRemoved":           "store",
	"DeltaTarget":            "store",
	"DeltaType":              "store",
	"DeltaXattrs":            "store",
	"DiffManifests":          "store",
	"EncodeManifest":         "store",
	"EntryDir":               "store",
	"EntryFile":              "store",
	"EntryKind":              "store",
	"EntryOther":             "store",
	"EntrySymlink":           "store",
	"EntryWhiteout":          "store",
	"ErrContentChanged":      "store",
	"ErrFileChanged":         "store",
	"ErrShrank":              "store",
	"ErrUnsupportedUpper":    "store",
	"HashFile":               "store",
	"LoadStatCache":          "store",
	"Manifest":               "store",
	"ManifestDelta":          "store",
	"ManifestEntry":          "store",
	"ManifestVersion":        "store",
	"NewStatCache":           "store",
	"ObjectID":               "store",
	"OpenStore":              "store",
	"ParseObjectID":          "store",
	"ReadManifest":           "store",
	"ReflinkSupport":         "store",
	"ReflinkSupported":       "store",
	"RemoveRestoreLeftovers": "store",
	"RestoreOptions":         "store",
	"RestorePaths":           "store",
	"RestorePathsWith":       "store",
	"RestoreUpper":           "store",
	"RestoreUpperWith":       "store",
	"SameFS":                 "store",
	"ShortHash":              "store",
	"StageUpper":             "store",
	"StagedUpper":            "store",
	"StatCache":              "store",
	"Store":                  "store",
	"StoreLock":              "store",
	"TouchPaths":             "store",
	"TouchRestored":          "store",
	"WriteManifest":          "store",
}

func main() {
	dry := flag.Bool("n", false, "list the files that would change, write nothing")
	inside := flag.String("inside", "overlay", "the module's overlay dir, whose own packages are repaired first (\"\" skips that)")
	flag.Parse()
	paths := flag.Args()
	if len(paths) == 0 {
		paths = []string{"."}
	}
	changed, failed := 0, false
	if *inside != "" {
		for _, pkg := range []string{"overlay", "mount", "store", "publish"} {
			out, notes, err := FixInside(*inside, pkg, nil)
			if err != nil {
				fmt.Fprintf(os.Stderr, "overlaysplit: %s: %v\n", pkg, err)
				os.Exit(1)
			}
			for _, n := range notes {
				fmt.Fprintln(os.Stderr, "overlaysplit:", n)
				failed = true
			}
			dir := *inside
			if pkg != "overlay" {
				dir = filepath.Join(dir, pkg)
			}
			for name, b := range out {
				changed++
				fmt.Println(filepath.Join(dir, name))
				if !*dry {
					if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
						fmt.Fprintf(os.Stderr, "overlaysplit: %v\n", err)
						os.Exit(1)
					}
				}
			}
		}
	}
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				n := d.Name()
				if p != root && (n == "testdata" || n == "third_party" || strings.HasPrefix(n, ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") {
				return nil
			}
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out, err := Rewrite(p, src)
			if err != nil {
				fmt.Fprintf(os.Stderr, "overlaysplit: %v\n", err)
				failed = true
				return nil
			}
			if bytes.Equal(out, src) {
				return nil
			}
			changed++
			fmt.Println(p)
			if *dry {
				return nil
			}
			return os.WriteFile(p, out, 0o644)
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "overlaysplit: %v\n", err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "overlaysplit: %d file(s) rewritten\n", changed)
	if failed {
		os.Exit(1)
	}
}

// Rewrite returns src with every reference to a moved identifier through the
// overlay import qualified by its new package, and the imports adjusted: the
// new packages are added (also when the code already says store.X but a
// merge kept only the old import block), and the overlay import is dropped
// when nothing uses it any more.
func Rewrite(name string, src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	local := ""
	var ovImport *ast.ImportSpec
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == overlayPath {
			ovImport = im
			local = "overlay"
			if im.Name != nil {
				local = im.Name.Name
			}
		}
	}
	if local == "_" || local == "." {
		return src, nil
	}
	var edits []edit
	need := map[string]bool{}
	stillOverlay := false
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		pkg, isMoved := moved[sel.Sel.Name]
		switch {
		case ovImport != nil && x.Name == local && isMoved:
			need[pkg] = true
			edits = append(edits, edit{fset.Position(x.Pos()).Offset, fset.Position(x.End()).Offset, pkg})
		case ovImport != nil && x.Name == local:
			stillOverlay = true
		case isMoved && x.Name == pkg && f.Name.Name != pkg:
			need[pkg] = true // already rewritten; the import may be missing
		}
		return true
	})
	var lines []string
	for p := range need {
		if !hasImport(f, overlayPath+"/"+p) {
			lines = append(lines, strconv.Quote(overlayPath+"/"+p))
		}
	}
	sort.Strings(lines)
	dropOverlay := ovImport != nil && !stillOverlay
	if len(edits) == 0 && len(lines) == 0 && !dropOverlay {
		return src, nil
	}
	edits = append(edits, importEdits(fset, f, ovImport, dropOverlay, lines)...)
	out, err := applyEdits(src, edits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// importEdits adds the import lines (quoted paths) after the overlay import,
// in its place when drop is set, or, without one, after the last of strata's
// own imports (a new group when there is none).
func importEdits(fset *token.FileSet, f *ast.File, ov *ast.ImportSpec, drop bool, lines []string) []edit {
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	block := strings.Join(lines, "\n\t")
	var decl *ast.GenDecl
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT && (ov == nil || slices.Contains(g.Specs, ast.Spec(ov))) {
			decl = g
		}
	}
	switch {
	case ov != nil && !decl.Lparen.IsValid(): // import "…/overlay"
		if !drop {
			return []edit{{off(decl.End()), off(decl.End()), "\nimport (\n\t" + block + "\n)"}}
		}
		if len(lines) == 0 {
			return []edit{{off(decl.Pos()), off(decl.End()), ""}}
		}
		if len(lines) == 1 {
			return []edit{{off(decl.Pos()), off(decl.End()), "import " + block}}
		}
		return []edit{{off(decl.Pos()), off(decl.End()), "import (\n\t" + block + "\n)"}}
	case ov != nil && drop:
		return []edit{{off(ov.Pos()), off(ov.End()), block}}
	case ov != nil:
		if len(lines) == 0 {
			return nil
		}
		return []edit{{off(ov.End()), off(ov.End()), "\n\t" + block}}
	case len(lines) == 0:
		return nil
	case decl == nil:
		return []edit{{off(f.Name.End()), off(f.Name.End()), "\n\nimport (\n\t" + block + "\n)"}}
	case !decl.Lparen.IsValid():
		return []edit{{off(decl.End()), off(decl.End()), "\nimport (\n\t" + block + "\n)"}}
	}
	var lastOurs *ast.ImportSpec
	for _, s := range decl.Specs {
		if im := s.(*ast.ImportSpec); strings.HasPrefix(im.Path.Value, `"`+strings.TrimSuffix(overlayPath, "overlay")) {
			lastOurs = im
		}
	}
	if lastOurs != nil {
		return []edit{{off(lastOurs.End()), off(lastOurs.End()), "\n\t" + block}}
	}
	return []edit{{off(decl.Rparen), off(decl.Rparen), "\n\t" + block + "\n"}}
}

// edit replaces src[off:end] with text.
type edit struct {
	off, end int
	text     string
}

// applyEdits applies edits (skipping one that overlaps a later one: a
// second pass sees it again) and formats the result.
func applyEdits(src []byte, edits []edit) ([]byte, error) {
	edits = slices.Clone(edits)
	slices.SortFunc(edits, func(a, b edit) int { return b.off - a.off })
	out := slices.Clone(src)
	last := len(out) + 1
	for _, e := range edits {
		if e.end > last {
			continue
		}
		out = slices.Concat(out[:e.off], []byte(e.text), out[e.end:])
		last = e.off
	}
	formatted, err := format.Source(out)
	if err != nil {
		return nil, fmt.Errorf("format after the rewrite: %w", err)
	}
	return formatted, nil
}

func hasImport(f *ast.File, path string) bool {
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == path {
			return true
		}
	}
	return false
}
