package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An isolation or runtime a user mistypes is refused with the valid names,
// wherever it comes from; "" is the default.
func TestParseIsolationAndRuntime(t *testing.T) {
	if i, err := ParseIsolation(""); err != nil || i != IsolationSandbox {
		t.Errorf(`ParseIsolation(""): %q, %v`, i, err)
	}
	if i, err := ParseIsolation("strict"); err != nil || i != IsolationStrict {
		t.Errorf(`ParseIsolation("strict"): %q, %v`, i, err)
	}
	for _, bad := range []string{"cube", "Tree", "none", " tree"} {
		if _, err := ParseIsolation(bad); err == nil || !strings.Contains(err.Error(), "want sandbox, tree or strict") {
			t.Errorf("ParseIsolation(%q): %v", bad, err)
		}
	}
	if r, err := ParseRuntime(""); err != nil || r != RuntimeLocal {
		t.Errorf(`ParseRuntime(""): %q, %v`, r, err)
	}
	if _, err := ParseRuntime("tree"); err == nil || !strings.Contains(err.Error(), "want local or cube") {
		t.Errorf(`ParseRuntime("tree"): %v`, err)
	}
	// A spec with a made-up level never reaches the init.
	spec := SessionSpec{Source: "/src", Merged: "/m", Dir: "/d", Argv: []string{"true"}, Isolation: "cube"}
	if err := spec.Normalize(); err == nil || !strings.Contains(err.Error(), `isolation "cube"`) {
		t.Errorf("normalize with isolation cube: %v", err)
	}
}

// meta.json written before sessions recorded their runtime said
// "isolation":"cube" for a cube session and nothing for a local one; both
// still read as what they were, and "cube" is no isolation level any more.
func TestSessionMetaLegacyRuntime(t *testing.T) {
	for _, c := range []struct {
		json    string
		runtime Runtime
		iso     Isolation
	}{
		{`{"id":"s-1","world":"w","state":"exited","isolation":"cube"}`, RuntimeCube, ""},
		{`{"id":"s-2","world":"w","state":"exited","isolation":"strict"}`, RuntimeLocal, IsolationStrict},
		{`{"id":"s-3","world":"w","state":"exited","runtime":"cube"}`, RuntimeCube, ""},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, MetaFile), []byte(c.json), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := ReadSessionMeta(dir)
		if err != nil || m.Runtime != c.runtime || m.Isolation != c.iso {
			t.Errorf("%s: runtime %q isolation %q, %v", c.json, m.Runtime, m.Isolation, err)
		}
	}
}
