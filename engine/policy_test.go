package engine

import (
	"errors"
	"testing"
)

func policyWorld() (*World, string) {
	return &World{Name: "w", Source: "/src/app"}, "/state/worlds/w/merged"
}

// A path argument names the same World path from the source, from a
// subdirectory of it, from the merged view and as an absolute path in
// either; nothing outside the tree gets through, however it is spelled.
func TestResolvePath(t *testing.T) {
	w, merged := policyWorld()
	for _, tc := range []struct {
		cwd, arg, want string
	}{
		{"/src/app", "x.go", "x.go"},
		{"/src/app", "./src/x.go", "src/x.go"},
		{"/src/app", "src//x.go", "src/x.go"},
		{"/src/app/src", "x.go", "src/x.go"},               // git-like: relative to where you stand
		{"/src/app/src", "../README", "README"},            // climbing inside the tree is fine
		{"/src/app/src/deep", "../../a", "a"},              //
		{"/elsewhere", "src/x.go", "src/x.go"},             // outside the tree: from the root
		{"/state/worlds/w/merged/src", "x.go", "src/x.go"}, // inside the World's view
		{"/src/app/src", "/src/app/lib/y.go", "lib/y.go"},
		{"/tmp", "/state/worlds/w/merged/lib/y.go", "lib/y.go"},
		{"", "-y", "-y"}, // a name that looks like a flag is a name
		{"/src/app", "a\nb", "a\nb"},
		{"/src/application", "x", "x"}, // a sibling with the same prefix is not inside
	} {
		got, err := ResolvePath(w, merged, tc.cwd, tc.arg)
		if err != nil || got != tc.want {
			t.Errorf("ResolvePath(cwd %q, %q) = %q, %v; want %q", tc.cwd, tc.arg, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ cwd, arg string }{
		{"/src/app", ".."},
		{"/src/app", "../app2/x"},
		{"/src/app/src", "../../etc/passwd"},
		{"/elsewhere", "../x"},
		{"/src/app", "/etc/passwd"},
		{"/src/app", "/src/application/x"}, // prefix, not parent
		{"/src/app", "/src/app"},           // the root is not a path in it
		{"/src/app", "."},
		{"/src/app/src", ".."},
		{"/src/app", "/state/worlds/w/merged/../../other/merged/x"},
		{"/src/app", ""},
	} {
		got, err := ResolvePath(w, merged, tc.cwd, tc.arg)
		if !errors.Is(err, ErrPathOutside) {
			t.Errorf("ResolvePath(cwd %q, %q) = %q, %v; want ErrPathOutside", tc.cwd, tc.arg, got, err)
		}
	}
}

func TestDefaultWorkDir(t *testing.T) {
	w, merged := policyWorld()
	for _, tc := range []struct {
		cwd, dir, want string
	}{
		{"/src/app", "", "/src/app"},
		{"/src/app/src/deep", "", "/src/app/src/deep"},
		{"/state/worlds/w/merged/src", "", "/src/app/src"}, // the view maps to where sessions see it
		{"/home/me", "", "/src/app"},
		{"/src/application", "", "/src/app"},
		{"/src/app/src", "lib", "/src/app/src/lib"},
		{"/home/me", "lib", "/src/app/lib"},
		{"/home/me", "/state/worlds/w/merged/lib", "/src/app/lib"},
		{"/home/me", "/opt/tools", "/opt/tools"}, // left to the session to use or refuse
	} {
		got, err := DefaultWorkDir(w, merged, tc.cwd, tc.dir)
		if err != nil || got != tc.want {
			t.Errorf("DefaultWorkDir(cwd %q, dir %q) = %q, %v; want %q", tc.cwd, tc.dir, got, err, tc.want)
		}
	}
	if got, err := DefaultWorkDir(w, merged, "/src/app", "../.."); !errors.Is(err, ErrPathOutside) {
		t.Errorf("DefaultWorkDir(--cwd ../..) = %q, %v; want ErrPathOutside", got, err)
	}
}

func TestCheckCreateResources(t *testing.T) {
	local := &Config{Backend: "local"}
	cube := &Config{Backend: "cube"}
	for _, tc := range []struct {
		cfg *Config
		o   CreateOptions
		ok  bool
	}{
		{local, CreateOptions{Name: "a"}, true},
		{local, CreateOptions{Name: "a", Template: "t"}, true},
		{cube, CreateOptions{Name: "a", CPU: 1000}, true},
		{local, CreateOptions{Name: "a", Backend: RuntimeCube, MemoryMB: 512}, true},
		{local, CreateOptions{Name: "a", CPU: 1000}, false},                       // a local World has no sandbox to size
		{cube, CreateOptions{Name: "a", Backend: RuntimeLocal, DiskMB: 1}, false}, // asked for local explicitly
		{cube, CreateOptions{Name: "a", Template: "t", CPU: 1}, false},            // both
		{cube, CreateOptions{Name: "a", CPU: -1}, false},                          // negative
		{nil, CreateOptions{Name: "a", MemoryMB: 1}, false},                       // no config: local
	} {
		err := CheckCreateResources(tc.cfg, tc.o)
		if (err == nil) != tc.ok {
			t.Errorf("CheckCreateResources(%+v, %+v) = %v; want ok=%v", tc.cfg, tc.o, err, tc.ok)
		}
	}
}
