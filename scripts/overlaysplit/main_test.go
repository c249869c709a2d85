package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// exported returns the exported top-level identifiers declared by the
// non-test files of the package in dir.
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					out[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no exported identifiers in %s", dir)
	}
	return out
}

// TestTableSaysWhereEachIdentifierLives checks the rewrite table against the
// tree: every moved identifier is declared in the package the table names
// and nowhere else among overlay's parts, and the root keeps no alias of it
// (a newcomer finds each thing in one place).
func TestTableSaysWhereEachIdentifierLives(t *testing.T) {
	parts := map[string]map[string]bool{"overlay": exported(t, "../../overlay")}
	for _, p := range []string{"mount", "publish", "store"} {
		parts[p] = exported(t, filepath.Join("../../overlay", p))
	}
	for name, pkg := range moved {
		if !parts[pkg][name] {
			t.Errorf("table: %s is in overlay/%s, but overlay/%s does not declare it", name, pkg, pkg)
		}
		for other, decls := range parts {
			if other != pkg && decls[name] {
				t.Errorf("%s is declared in overlay/%s and in %s: one place only", name, pkg, other)
			}
		}
	}
	for other, decls := range parts {
		for name := range decls {
			if other != "overlay" && parts["overlay"][name] {
				t.Errorf("%s is declared in the root overlay and in overlay/%s", name, other)
			}
		}
	}
}

func TestRewriteQualifiesMovedIdentifiers(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{
			"mixed: overlay stays, the parts are added",
			`package engine

import (
	"fmt"

	"github.com/stratahq/strata/overlay"
)

func f(l overlay.Layers) error {
	var ce *overlay.ContentError
	_, err := overlay.Publish(nil, "", nil, overlay.PublishOptions{})
	m, _ := overlay.Probe(nil, "")
	_ = m
	fmt.Println(ce, overlay.QuotePath("x"))
	return err
}
`,
			`package engine

import (
	"fmt"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
	"github.com/stratahq/strata/overlay/publish"
	"github.com/stratahq/strata/overlay/store"
)

func f(l overlay.Layers) error {
	var ce *store.ContentError
	_, err := publish.Publish(nil, "", nil, publish.PublishOptions{})
	m, _ := mount.Probe(nil, "")
	_ = m
	fmt.Println(ce, overlay.QuotePath("x"))
	return err
}
`,
		},
		{
			"only moved names: the overlay import goes; an aliased import is followed",
			`package x

import ov "github.com/stratahq/strata/overlay"

var s *ov.Store
`,
			`package x

import "github.com/stratahq/strata/overlay/store"

var s *store.Store
`,
		},
		{
			"a merge kept the old import block over rewritten code: the imports follow the code",
			`package engine

import (
	"fmt"

	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/overlay"
)

func f() { fmt.Println(session.X, mount.Probe, store.OpenStore) }
`,
			`package engine

import (
	"fmt"

	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/overlay/mount"
	"github.com/stratahq/strata/overlay/store"
)

func f() { fmt.Println(session.X, mount.Probe, store.OpenStore) }
`,
		},
		{
			"no overlay import at all: the missing part is added after strata's imports",
			`package engine

import (
	"fmt"

	"github.com/stratahq/strata/fsx"
)

func f() { fmt.Println(fsx.HumanBytes(1), publish.Publish) }
`,
			`package engine

import (
	"fmt"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay/publish"
)

func f() { fmt.Println(fsx.HumanBytes(1), publish.Publish) }
`,
		},
		{
			"a variable named like a part is not a package when its field is not a moved name",
			`package engine

import "github.com/stratahq/strata/overlay/store"

func f(s *store.Store) { store := s; _ = store.Root }
`,
			"",
		},
		{
			"already split: nothing changes",
			`package x

import "github.com/stratahq/strata/overlay/store"

var s *store.Store
`,
			"",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Rewrite("x.go", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if string(got) != want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, want)
			}
			again, err := Rewrite("x.go", got)
			if err != nil || string(again) != string(got) {
				t.Fatalf("not idempotent: %v\n%s", err, again)
			}
		})
	}
}
