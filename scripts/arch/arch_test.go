package arch

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// The files allowed to branch on a World's backend: the seam, the kinds and
// the runtimes themselves, each a package of its own ("engine/NAME/").
// A new runtime is a new entry here, not new branches elsewhere.
var runtimePaths = []string{
	"engine/world/kinds.go",
	"engine/runtime.go",
	"engine/local/",
	"engine/cuberun/",
}

// Who may import the cube client: the cube runtime, the client's own tree,
// and engine.go (Options.Cube injects a client).
var cubeClientImporters = []string{
	"engine/cuberun/",
	"cube/",
	"engine/engine.go",
}

// The files that own the overlay dialects' on-disk names. The overlaytest
// builder writes uppers of every dialect by hand on purpose.
var dialectFiles = []string{
	"overlay/dialect.go",
	"overlay/overlaytest/",
}

// overlay's layering: the vocabulary at the root imports no other part;
// mount and store import only the root (and fsx); publish also uses store.
var overlayLayers = map[string][]string{
	Module + "/overlay":         {Module + "/fsx"},
	Module + "/overlay/mount":   {Module + "/fsx", Module + "/overlay"},
	Module + "/overlay/store":   {Module + "/fsx", Module + "/overlay"},
	Module + "/overlay/publish": {Module + "/fsx", Module + "/overlay", Module + "/overlay/store"},
}

// The core: no UI package, directly or indirectly.
var corePkgs = []string{
	Module + "/engine",
	Module + "/overlay",
	Module + "/cube",
	Module + "/diffview",
}

func load(t *testing.T) []File {
	t.Helper()
	files, err := LoadModule("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("loaded only %d files from the module; wrong root?", len(files))
	}
	return files
}

func report(t *testing.T, vs []Violation) {
	t.Helper()
	for _, v := range vs {
		t.Error(v)
	}
}

func TestNoBackendBranchOutsideRuntimes(t *testing.T) {
	report(t, BackendBranches(load(t), runtimePaths))
}

// The runtime packages: each reaches the engine only through its Host.
var runtimePkgs = []string{"engine/local/", "engine/cuberun/"}

func TestRuntimesDoNotImportEngine(t *testing.T) {
	report(t, RuntimeImportsEngine(load(t), runtimePkgs))
}

func TestRuntimeEngineImportRuleCatchesImports(t *testing.T) {
	src := "package local\nimport (\n\t\"context\"\n\t\"github.com/stratahq/strata/engine\"\n)\n"
	for _, path := range []string{"engine/local/runtime.go", "engine/cuberun/session.go"} {
		if vs := RuntimeImportsEngine(parse(t, Module+"/engine/local", path, src), runtimePkgs); len(vs) != 1 {
			t.Errorf("%s: want 1 violation, got %v", path, vs)
		}
	}
	// The engine's own files and other packages may import it.
	for _, path := range []string{"engine/local_host.go", "cmd/strata/main.go"} {
		if vs := RuntimeImportsEngine(parse(t, Module+"/engine", path, src), runtimePkgs); len(vs) != 0 {
			t.Errorf("%s may import the engine: %v", path, vs)
		}
	}
}

func TestCubeClientOnlyInCubeRuntime(t *testing.T) {
	report(t, BackendImports(load(t), Module+"/cube", cubeClientImporters))
}

func TestBackendImportRuleCatchesImports(t *testing.T) {
	src := "package engine\nimport (\n\t\"context\"\n\tc \"github.com/stratahq/strata/cube\"\n)\n"
	// The engine calling the cube client itself (as apply_capture.go and
	// doctor.go did before the cube runtime had a package) is a violation.
	for _, path := range []string{"engine/apply_capture.go", "engine/doctor.go", "engine/cube_runtime.go", "tui/model.go"} {
		if vs := BackendImports(parse(t, Module+"/engine", path, src), Module+"/cube", cubeClientImporters); len(vs) != 1 {
			t.Errorf("%s: want 1 violation, got %v", path, vs)
		}
	}
	for _, path := range []string{"engine/cuberun/session.go", "engine/engine.go", "cube/cubetest/fake.go"} {
		if vs := BackendImports(parse(t, Module+"/engine", path, src), Module+"/cube", cubeClientImporters); len(vs) != 0 {
			t.Errorf("%s may import the cube client: %v", path, vs)
		}
	}
}

func TestWhiteoutNamesOnlyInDialects(t *testing.T) {
	report(t, WhiteoutNames(load(t), dialectFiles))
}

func TestOverlayPartsImportOneWay(t *testing.T) {
	files := load(t)
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.Pkg] = true
	}
	for p := range overlayLayers {
		if !seen[p] {
			t.Fatalf("no files loaded for %s: the layering table names a package that moved", p)
		}
	}
	report(t, ImportsOneWay(files, overlayLayers))
}

func TestCoreImportsNoUI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	for _, p := range corePkgs {
		if _, ok := deps[p]; !ok {
			t.Fatalf("go list did not list core package %s", p)
		}
	}
	report(t, UIImports(deps, corePkgs))
}

// The rules themselves: each must catch what it is for, and pass clean code.

func parse(t *testing.T, pkg, path, src string) []File {
	t.Helper()
	f, err := ParseSource(pkg, path, src)
	if err != nil {
		t.Fatal(err)
	}
	return []File{f}
}

func TestBackendRuleCatchesBranches(t *testing.T) {
	src := `package engine
func f(w *World) {
	if w.Backend == RuntimeCube { }
	if w.Cube != nil { }
	switch w.Backend { case world.RuntimeLocal: }
	if w.Name == "x" { }
	if w.Isolation != "tree" { }
	switch o.Isolation { case "strict": case IsolationTree: }
}`
	vs := BackendBranches(parse(t, Module+"/engine", "engine/x.go", src), runtimePaths)
	if len(vs) != 5 {
		t.Fatalf("want 5 violations (==, nil check, case, isolation literal ==, isolation literal case), got %d: %v", len(vs), vs)
	}
	for _, path := range []string{"engine/cuberun/session.go", "engine/local/runtime.go", "engine/local/session.go"} {
		if vs := BackendBranches(parse(t, Module+"/engine", path, src), runtimePaths); len(vs) != 0 {
			t.Fatalf("runtime file %s may branch: %v", path, vs)
		}
	}
	// The local runtime is a package now: the engine's side of it (its
	// Host, its old file name) is the engine, and may not branch.
	for _, path := range []string{"engine/local_host.go", "engine/local_runtime.go", "engine/exec.go"} {
		if vs := BackendBranches(parse(t, Module+"/engine", path, src), runtimePaths); len(vs) != 5 {
			t.Fatalf("engine file %s: want 5 violations, got %v", path, vs)
		}
	}
	if !RuntimeFile("engine/local/init.go", []string{"engine/local/"}) || RuntimeFile("engine/localx.go", []string{"engine/local/"}) {
		t.Fatal("a runtime directory entry must cover its files and nothing else")
	}
	// The engine's own cube glue (cube_host.go) and the files the cube
	// runtime left are not runtime files any more.
	for _, path := range []string{"engine/cube_host.go", "engine/cube_runtime.go", "engine/session/meta.go"} {
		if RuntimeFile(path, runtimePaths) {
			t.Fatalf("%s is listed as a runtime file", path)
		}
	}
}

func TestWhiteoutRuleCatchesLiterals(t *testing.T) {
	src := "package engine\nconst a = \".wh.\"\nvar b = \"trusted.overlay.opaque\"\nvar c = `user.overlay.redirect`\nvar d = \"plain fuse.unionfs mount\"\n"
	vs := WhiteoutNames(parse(t, Module+"/engine", "engine/watch.go", src), dialectFiles)
	if len(vs) != 3 {
		t.Fatalf("want 3 violations, got %d: %v", len(vs), vs)
	}
	if vs := WhiteoutNames(parse(t, Module+"/overlay", "overlay/x.go", "package overlay\nvar u = \"_HIDDEN~\"\nvar f = \".fuse_hidden0001\"\n"), dialectFiles); len(vs) != 2 {
		t.Fatalf("want the unionfs and fuse markers caught, got %v", vs)
	}
	if vs := WhiteoutNames(parse(t, Module+"/overlay", dialectFiles[0], src), dialectFiles); len(vs) != 0 {
		t.Fatalf("the dialect file may spell them: %v", vs)
	}
}

func TestUIRuleCatchesTransitiveImports(t *testing.T) {
	deps := map[string][]string{
		Module + "/engine":         {"fmt", Module + "/overlay"},
		Module + "/engine/local":   {"fmt", Module + "/panes", "charm.land/lipgloss/v2"},
		Module + "/overlay":        {"os"},
		Module + "/diffview":       {Module + "/third_party/bubbletea"},
		Module + "/tui":            {"charm.land/lipgloss/v2"},
		Module + "/engine_helpers": {"charm.land/lipgloss/v2"}, // not under engine/
	}
	vs := UIImports(deps, corePkgs)
	if len(vs) != 3 {
		t.Fatalf("want 3 violations (engine/local x2, diffview), got %d: %v", len(vs), vs)
	}
}

func TestImportRuleCatchesUpwardImports(t *testing.T) {
	src := "package store\nimport (\n\t\"fmt\"\n\t\"github.com/stratahq/strata/overlay\"\n\t\"github.com/stratahq/strata/overlay/publish\"\n\t\"github.com/stratahq/strata/overlay/mount\"\n)\n"
	vs := ImportsOneWay(parse(t, Module+"/overlay/store", "overlay/store/x.go", src), overlayLayers)
	if len(vs) != 2 {
		t.Fatalf("want 2 violations (store importing publish and mount), got %d: %v", len(vs), vs)
	}
	root := "package overlay\nimport \"github.com/stratahq/strata/overlay/store\"\n"
	if vs := ImportsOneWay(parse(t, Module+"/overlay", "overlay/x.go", root), overlayLayers); len(vs) != 1 {
		t.Fatalf("the root importing a part must be caught, got %v", vs)
	}
	if vs := ImportsOneWay(parse(t, Module+"/engine", "engine/x.go", src), overlayLayers); len(vs) != 0 {
		t.Fatalf("packages outside the table are not checked: %v", vs)
	}
}
