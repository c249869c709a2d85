package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A file moved (and edited) in a World shows as a rename in status and in
// diff, like git; the diff still applies with git apply.
func TestE2ERenameShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var long strings.Builder
	for i := range 20 {
		long.WriteString(strings.Repeat("x", i) + " line\n")
	}
	must(t, os.WriteFile(filepath.Join(e.source, "long.txt"), []byte(long.String()), 0o644))
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "mv a.txt moved.txt && mv long.txt sub/long2.txt && sed -i 's/^xxx line$/changed/' sub/long2.txt && rm keep.txt && echo unrelated > other.txt")
	out := e.ok("status", "w")
	for _, want := range []string{"R  a.txt -> moved.txt (100%)\n", "R  long.txt -> sub/long2.txt (95%)\n", "D  keep.txt (whiteout)\n", "A  other.txt\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "D  a.txt") || strings.Contains(out, "A  moved.txt") {
		t.Errorf("status shows the rename as a delete and an add:\n%s", out)
	}
	var st struct {
		Changes []struct {
			Path, Kind, RenamedTo, RenamedFrom string
			Similarity                         int
		} `json:"changes"`
	}
	js := e.ok("status", "w", "--json")
	must(t, json.Unmarshal([]byte(strings.NewReplacer(`"renamed_to"`, `"RenamedTo"`, `"renamed_from"`, `"RenamedFrom"`).Replace(js)), &st))
	got := map[string]string{}
	for _, c := range st.Changes {
		got[c.Path] = c.Kind + ">" + c.RenamedTo + "<" + c.RenamedFrom + "%" + strings.Repeat("|", c.Similarity/5)
	}
	if got["a.txt"] != "deleted>moved.txt<%" || got["moved.txt"] != "added><a.txt%"+strings.Repeat("|", 20) || got["keep.txt"] != "deleted><%" {
		t.Errorf("status --json renames: %v", got)
	}
	diff := e.ok("diff", "w")
	for _, want := range []string{
		"diff --git a/a.txt b/moved.txt\nsimilarity index 100%\nrename from a.txt\nrename to moved.txt\n",
		"diff --git a/long.txt b/sub/long2.txt\nsimilarity index 95%\nrename from long.txt\nrename to sub/long2.txt\n--- a/long.txt\n+++ b/sub/long2.txt\n",
		"deleted file mode 100644\n",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	// git apply takes it: the source's copy patched equals the World.
	cp := t.TempDir()
	must(t, exec.Command("cp", "-a", e.source+"/.", cp).Run())
	c := exec.Command("git", "apply", "-")
	c.Dir, c.Stdin = cp, strings.NewReader(diff)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\n%s", err, out, diff)
	}
	for _, p := range []string{"moved.txt", "sub/long2.txt", "other.txt"} {
		b, _ := os.ReadFile(filepath.Join(cp, p))
		if w := e.ok("exec", "w", "--", "cat", p); string(b) != w {
			t.Errorf("%s after git apply: %q, World %q", p, b, w)
		}
	}
	for _, p := range []string{"a.txt", "long.txt", "keep.txt"} {
		if _, err := os.Stat(filepath.Join(cp, p)); err == nil {
			t.Errorf("%s still there after git apply", p)
		}
	}
}

// blame ends on "delete" for a file a session created and then removed, and
// a multi-line command stays on its row of the table.
func TestE2EBlameDeleteAndMultiline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo n > new.txt; sleep 0.3; rm new.txt")
	e.ok("exec", "w", "--", "sh", "-c", "echo x >> a.txt\necho y >> a.txt")
	var bl struct {
		Writes []struct {
			Op string `json:"op"`
		} `json:"writes"`
	}
	must(t, json.Unmarshal([]byte(e.ok("blame", "w", "new.txt", "--json")), &bl))
	if len(bl.Writes) != 1 || bl.Writes[0].Op != "delete" {
		t.Errorf("blame of a created then removed file: %+v, want one delete", bl.Writes)
	}
	out := e.ok("blame", "w", "a.txt")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `echo x >> a.txt\necho y >> a.txt`) {
		t.Errorf("blame table with a multi-line command:\n%s", out)
	}
}
