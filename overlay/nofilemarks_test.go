package overlay

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A kernel upper that may have been mounted with metacopy=on (a World made
// by an older strata, Layers.NoFileMarks unset) still has each file's
// xattrs read: a hand-written metacopy file whose data lives in the lower is
// no change, and reads the lower's bytes.
func TestUnmarkedUpperReadsFileMetacopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for trusted xattrs")
	}
	l := resolveLayers(t, DialectKernel, `
file meta.txt 0644 "data"
file other 0644 "x"
`, `
sparse meta.txt 0644 4
xattr meta.txt trusted.overlay.metacopy ""
file new 0644 "new"
`)
	cs, err := ReadChanges(context.Background(), l, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := changePaths(cs); got != "new" {
		t.Errorf("changes of an unmarked upper with a metacopy file = %q, want only \"new\" (meta.txt's data is the lower's)", got)
	}
	if data, err := l.ReadFile("meta.txt"); err != nil || string(data) != "data" {
		t.Errorf("ReadFile(meta.txt) = %q, %v, want the lower's data", data, err)
	}
}

// An upper only ever mounted with metacopy=off (NoFileMarks) has no
// per-file xattr read at all: the walk lists xattrs of directories only,
// and still sees whiteouts (0/0 devices), opaque dirs and dir redirects.
func TestNoFileMarksListsDirXattrsOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for whiteout devices and trusted xattrs")
	}
	const dirs, perDir = 4, 100
	var lower, upper strings.Builder
	lower.WriteString("file gone 0644 \"gone\"\nfile op/old 0644 \"old\"\nfile from/f 0644 \"moved\"\n")
	upper.WriteString("whiteout gone\ndir op\nxattr op trusted.overlay.opaque y\nfile op/n 0644 \"n\"\n")
	upper.WriteString("dir to\nxattr to trusted.overlay.redirect /from\nwhiteout from\n")
	for d := range dirs {
		for i := range perDir {
			fmt.Fprintf(&upper, "file d%d/f%d 0644 \"v%d\"\n", d, i, i)
		}
	}
	l := resolveLayers(t, DialectKernel, lower.String(), upper.String())
	l.NoFileMarks = true
	before := llistxattrCalls.Load()
	cs, err := ReadChanges(context.Background(), l, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	calls := llistxattrCalls.Load() - before
	// The root, op, to, d0..d3: one each. Files: none.
	if want := int64(3 + dirs); calls > want {
		t.Errorf("ReadChanges of a metacopy=off upper with %d files listed xattrs %d times, want at most %d (directories only)", dirs*perDir, calls, want)
	}
	got := map[string]Change{}
	for _, c := range cs.Changes {
		got[c.Path] = c
	}
	if c, ok := got["gone"]; !ok || c.Kind != Deleted {
		t.Errorf("whiteout gone: %+v, %v", c, ok)
	}
	if c, ok := got["op/old"]; !ok || c.Kind != Deleted {
		t.Errorf("op/old under the opaque op: %+v, %v", c, ok)
	}
	if c, ok := got["to"]; !ok || !strings.Contains(c.Note, "moved from from") {
		t.Errorf("the redirected dir to: %+v, %v (want a note naming from)", c, ok)
	}
	if c, ok := got["d3/f99"]; !ok || c.Kind != Added {
		t.Errorf("d3/f99: %+v, %v", c, ok)
	}
}

func changePaths(cs *ChangeSet) string {
	var ps []string
	for _, c := range cs.Changes {
		ps = append(ps, c.Path)
	}
	return strings.Join(ps, " ")
}
