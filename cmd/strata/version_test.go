package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// go install module/cmd@version refuses a module whose go.mod replaces or
// excludes a module: strata must install like any Go tool (make
// install-check does the real install from a local proxy).
func TestGoModInstallable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "replace" || f[0] == "exclude") {
			t.Errorf("go.mod:%d: %q: go install ...@version refuses a module with replace or exclude directives", i+1, line)
		}
	}
	if _, err := os.Stat(filepath.Join("..", "..", "third_party", "bubbletea", "go.mod")); err == nil {
		t.Error("third_party/bubbletea/go.mod exists: a nested module is left out of strata's module zip, so go install would miss the patched Bubble Tea")
	}
}

func TestVersionString(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = ""
	if v := versionString(); v == "" {
		t.Fatal("empty version")
	}
	version = "v1.2.3"
	var out bytes.Buffer
	if code := run([]string{"--version"}, strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("--version exit %d: %s", code, out.String())
	}
	if got := strings.TrimSpace(out.String()); got != "strata v1.2.3" {
		t.Fatalf("--version printed %q, want the stamped version", got)
	}
}
