package world

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseMount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Tree
	}{
		{"/src/game", Tree{Name: "game", Path: "/src/game", Mode: TreeOverlay}},
		{"g2=/src/game", Tree{Name: "g2", Path: "/src/game", Mode: TreeOverlay}},
		{"/src/tools:readonly", Tree{Name: "tools", Path: "/src/tools", Mode: TreeReadOnly}},
		{"ddc=/var/cache/ddc:shared", Tree{Name: "ddc", Path: "/var/cache/ddc", Mode: TreeShared}},
		{"/src/UnrealEngine/", Tree{Name: "unrealengine", Path: "/src/UnrealEngine/", Mode: TreeOverlay}},
		// '=' after a '/' is part of the path, not a name.
		{"/src/a=b", Tree{Name: "a=b", Path: "/src/a=b", Mode: TreeOverlay}},
	} {
		got, err := ParseMount(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMount(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "=/x", "g=", "/x:rw", "g=/x:"} {
		if _, err := ParseMount(bad); !errors.Is(err, ErrInvalidMount) {
			t.Errorf("ParseMount(%q) = %v, want ErrInvalidMount", bad, err)
		}
	}
}

func TestCheckTreesRefusesOverlapsAndBadNames(t *testing.T) {
	ok := []Tree{{Name: "game", Path: "/src/game", Mode: TreeOverlay}, {Name: "ddc", Path: "/var/ddc", Mode: TreeShared}}
	if err := CheckTrees("/src/engine", ok); err != nil {
		t.Fatal(err)
	}
	for name, trees := range map[string][]Tree{
		"inside the source":  {{Name: "sub", Path: "/src/engine/Plugins", Mode: TreeOverlay}},
		"over the source":    {{Name: "all", Path: "/src", Mode: TreeReadOnly}},
		"inside another":     {{Name: "game", Path: "/src/game", Mode: TreeOverlay}, {Name: "content", Path: "/src/game/Content", Mode: TreeOverlay}},
		"same twice":         {{Name: "a", Path: "/src/game", Mode: TreeOverlay}, {Name: "b", Path: "/src/game", Mode: TreeShared}},
		"duplicate name":     {{Name: "game", Path: "/src/game", Mode: TreeOverlay}, {Name: "game", Path: "/src/game2", Mode: TreeOverlay}},
		"the main name":      {{Name: "main", Path: "/src/game", Mode: TreeOverlay}},
		"an invalid name":    {{Name: "Game", Path: "/src/game", Mode: TreeOverlay}},
		"a relative path":    {{Name: "game", Path: "src/game", Mode: TreeOverlay}},
		"an unclean path":    {{Name: "game", Path: "/src/x/../game", Mode: TreeOverlay}},
		"an unknown mode":    {{Name: "game", Path: "/src/game", Mode: "rw"}},
		"the root over all":  {{Name: "root", Path: "/", Mode: TreeReadOnly}},
		"a name with slash":  {{Name: "a/b", Path: "/src/game", Mode: TreeOverlay}},
		"a name with colons": {{Name: "a:b", Path: "/src/game", Mode: TreeOverlay}},
	} {
		if err := CheckTrees("/src/engine", trees); !errors.Is(err, ErrInvalidMount) {
			t.Errorf("%s: CheckTrees = %v, want ErrInvalidMount", name, err)
		}
	}
}

// A world.toml written before trees existed reads as a World with one tree,
// and writes back without a trees table.
func TestOldWorldFileHasOneTree(t *testing.T) {
	p := Paths{Root: t.TempDir()}
	if err := os.MkdirAll(p.World("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := "id = \"w-1\"\nname = \"old\"\nsource = \"/src/app\"\nbackend = \"local\"\nmount_backend = \"kernel\"\ndialect = \"kernel\"\nisolation = \"sandbox\"\nstate = \"ready\"\ncreated = 2026-01-02T03:04:05Z\n"
	if err := os.WriteFile(p.WorldFile("old"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Read(p, "old")
	if err != nil {
		t.Fatal(err)
	}
	if w.HasTrees() || !reflect.DeepEqual(w.TreeNames(), []string{MainTree}) {
		t.Fatalf("old World has trees %v", w.TreeNames())
	}
	if got := p.UpperOf(w); got != p.Upper("old") {
		t.Fatalf("old World's upper moved: %s", got)
	}
	if v, err := w.TreeView(MainTree); err != nil || v != w {
		t.Fatalf("TreeView(main) = %v, %v", v, err)
	}
	if err := Write(p, w); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p.WorldFile("old"))
	if string(data) == "" || strings.Contains(string(data), "trees") {
		t.Fatalf("rewritten world.toml mentions trees:\n%s", data)
	}
}

func TestTreesRoundTripAndViews(t *testing.T) {
	p := Paths{Root: t.TempDir()}
	if err := os.MkdirAll(p.World("ue"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := &World{ID: "w-2", Name: "ue", Source: "/src/engine", Backend: RuntimeLocal, State: StateReady, Trees: []Tree{
		{Name: "game", Path: "/src/game", Mode: TreeOverlay},
		{Name: "tools", Path: "/src/tools", Mode: TreeReadOnly},
		{Name: "ddc", Path: "/var/ddc", Mode: TreeShared},
	}}
	if err := Write(p, w); err != nil {
		t.Fatal(err)
	}
	r, err := Read(p, "ue")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Trees, w.Trees) {
		t.Fatalf("trees = %+v", r.Trees)
	}
	if got := r.TreeNames(); !reflect.DeepEqual(got, []string{"main", "game"}) {
		t.Fatalf("overlay trees = %v", got)
	}
	v, err := r.TreeView("game")
	if err != nil {
		t.Fatal(err)
	}
	if v.Source != "/src/game" || v.Name != "ue" || p.UpperOf(v) != filepath.Join(p.World("ue"), "trees", "game", "upper") || v.Layers(p).Lower != "/src/game" {
		t.Fatalf("view = %+v, upper %s", v, p.UpperOf(v))
	}
	if r.Source != "/src/engine" {
		t.Fatal("TreeView changed the World")
	}
	for _, n := range []string{"tools", "ddc", "nope"} {
		if _, err := r.TreeView(n); err == nil {
			t.Errorf("TreeView(%s) has layers", n)
		}
	}
	for in, want := range map[string][2]string{"game:Content/a": {"game", "Content/a"}, "main:x": {"main", "x"}, "x/y": {"main", "x/y"}, "odd:name": {"main", "odd:name"}, "tools:x": {"tools", "x"}} {
		tr, rel := r.SplitTreePath(in)
		if tr != want[0] || rel != want[1] {
			t.Errorf("SplitTreePath(%q) = %s, %s", in, tr, rel)
		}
	}
	// A hand-edited world.toml with overlapping trees is broken, not used.
	r.Trees = append(r.Trees, Tree{Name: "content", Path: "/src/game/Content", Mode: TreeOverlay})
	if err := Write(p, r); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p, "ue"); !errors.Is(err, ErrWorldBroken) {
		t.Fatalf("overlapping trees read as %v", err)
	}
}

// A path holding ':' or '=' is reachable; a name holding '/' is refused
// as a name, not read as a path.
func TestParseMountRedteam(t *testing.T) {
	if tr, err := ParseMount("/src/a:b:overlay"); err != nil || tr.Path != "/src/a:b" || tr.Name != "a:b" {
		t.Errorf("ParseMount(/src/a:b:overlay) = %+v, %v", tr, err)
	}
	if _, err := ParseMount("/src/a:b"); err == nil || !strings.Contains(err.Error(), "PATH:overlay") {
		t.Errorf("ParseMount(/src/a:b) = %v, want the hint to spell out the mode", err)
	}
	if tr, err := ParseMount("/src/x=y"); err != nil || tr.Path != "/src/x=y" {
		t.Errorf("ParseMount(/src/x=y) = %+v, %v", tr, err)
	}
	for _, s := range []string{"../x=/src/game", "a/b=/src/game", "/x=/src/game"} {
		if _, err := ParseMount(s); !errors.Is(err, ErrInvalidMount) || !strings.Contains(err.Error(), "holds '/'") {
			t.Errorf("ParseMount(%s) = %v", s, err)
		}
	}
}
