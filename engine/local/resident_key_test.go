package local

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stratahq/strata/engine/boundary"
)

// Every field of a session's spec is in the resident key, the session's
// own part of a request, or not about the view: a new field must be put
// in one of them (a field left out of the key would let a resident init
// serve a session a view set up for another).
func TestResidentKeyCoversTheSpec(t *testing.T) {
	for _, c := range []struct {
		typ             reflect.Type
		inKey, own, not []string
	}{
		{
			reflect.TypeFor[SessionSpec](),
			[]string{"World", "Source", "Merged", "StateRoot", "EgressDir", "ActivityLog", "Network", "Isolation", "HideDirs", "Binds", "HostDev", "NoNetwork", "Watch", "Boundary"},
			[]string{"ID", "Dir", "Argv", "Env", "EnvRedact", "Cwd", "TTY", "Rows", "Cols", "Trace", "Stdin"},
			// Exe: the key has the init binary it picks; Overlay: such
			// sessions (rootless) never run in one; the rest are the caller's.
			[]string{"SessionsDir", "Exe", "NoWatch", "Cgroup", "CgroupPlaced", "Overlay", "WorldState"},
		},
		{
			reflect.TypeFor[boundary.Boundary](),
			[]string{"World", "Level", "Source", "Home", "HomeUpper", "HomeWork", "Writable", "ReadOnlyHost", "PrivateRun", "Hidden", "Granted", "Network"},
			nil,
			// The session's environment (its own part) and the proxy's
			// allow-list (pushed to the proxy, not the init).
			[]string{"Env", "EnvAllow", "DroppedEnv", "Allow", "AllowKey"},
		},
		{reflect.TypeFor[boundary.Path](), []string{"Path", "Kind", "Exists", "Dir"}, nil, nil},
		{reflect.TypeFor[SessionWatch](), []string{"Upper", "Lower", "Objects", "Bases", "Provenance", "Dialect", "Ignore", "MaxWatches"}, nil, nil},
		{reflect.TypeFor[Bind](), []string{"Source", "Target", "ReadOnly"}, nil, nil},
	} {
		for i := range c.typ.NumField() {
			f := c.typ.Field(i).Name
			if !slices.Contains(c.inKey, f) && !slices.Contains(c.own, f) && !slices.Contains(c.not, f) {
				t.Errorf("%s.%s is new: put it in residentKey, in residentSession, or say here why it is neither", c.typ.Name(), f)
			}
		}
	}
}

// Changing any part of the view changes the key; the session's own part
// does not.
func TestResidentKeyChangesWithTheView(t *testing.T) {
	dir := t.TempDir()
	base := func() *SessionSpec {
		return &SessionSpec{
			World: "w", Source: dir, Merged: dir, StateRoot: dir, Exe: "/proc/self/exe", Isolation: IsolationSandbox,
			Network: boundary.NetworkProxy, Watch: &SessionWatch{Upper: dir + "/u"},
			Boundary: &boundary.Boundary{
				World: "w", Level: boundary.LevelSandbox, Source: dir, Home: dir, Network: boundary.NetworkProxy,
				Hidden:  []boundary.Path{{Path: dir + "/.ssh", Kind: boundary.KindCredential}},
				Granted: []boundary.Path{{Path: dir + "/.config/gh", Kind: boundary.KindCredential, Exists: true, Dir: true}},
			},
		}
	}
	key := func(s *SessionSpec) string {
		t.Helper()
		k, err := residentKey(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(base())
	if k0 != key(base()) {
		t.Fatal("the key of one spec differs from itself")
	}
	own := base()
	own.ID, own.Argv, own.Env, own.Cwd, own.TTY = "s1", []string{"true"}, []string{"A=1"}, "/x", true
	own.Boundary.Env, own.Boundary.DroppedEnv = []string{"A=1"}, []string{"FOO_TOKEN"}
	if key(own) != k0 {
		t.Error("the session's own part (id, argv, env, cwd, tty) changed the key")
	}
	seen := map[string]string{}
	for name, mutate := range map[string]func(*SessionSpec){
		"a credential now exists": func(s *SessionSpec) { s.Boundary.Hidden[0].Exists = true },
		"network none":            func(s *SessionSpec) { s.Network, s.Boundary.Network = boundary.NetworkNone, boundary.NetworkNone },
		"strict":                  func(s *SessionSpec) { s.Boundary.Level = boundary.LevelStrict },
		"no home layer":           func(s *SessionSpec) { s.Boundary.HomeUpper = dir + "/hu" },
		"a bind":                  func(s *SessionSpec) { s.Binds = []Bind{{Source: dir, Target: "/opt/x"}} },
		"a read-only bind":        func(s *SessionSpec) { s.Binds = []Bind{{Source: dir, Target: "/opt/x", ReadOnly: true}} },
		"host /dev":               func(s *SessionSpec) { s.HostDev = true },
		"watch ignore":            func(s *SessionSpec) { s.Watch.Ignore = []string{"build/"} },
		"a shared cache": func(s *SessionSpec) {
			s.Boundary.Writable = []boundary.Path{{Path: dir, Kind: boundary.KindSharedCache}}
		},
		"another binary": func(s *SessionSpec) { s.Exe = "/bin/true" },
	} {
		s := base()
		mutate(s)
		k := key(s)
		if k == k0 {
			t.Errorf("%s: the key did not change", name)
		}
		// Each differs from the others too ("a bind" and "a read-only
		// bind" only in ReadOnly).
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s give one key", name, other)
		}
		seen[k] = name
	}
}
