package keymap

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the ## Keys section of README.md from the keymap")

const readmePath = "../README.md"

// keysSection splits README.md around its "## Keys" section body.
func keysSection(t *testing.T, readme string) (before, body, after string) {
	t.Helper()
	start := strings.Index(readme, "\n## Keys\n")
	if start < 0 {
		t.Fatal(`README.md has no "## Keys" section`)
	}
	start += len("\n## Keys\n")
	end := strings.Index(readme[start:], "\n## ")
	if end < 0 {
		end = len(readme) - start
	}
	return readme[:start], readme[start : start+end], readme[start+end:]
}

const keysIntro = "\nEvery binding, generated from the keymap (`go test ./keymap -run TestREADMEKeys -update-readme`\n" +
	"rewrites this table; the test fails when it is out of date). Global keys work in every pane;\n" +
	"conflicts, compare and dialog keys only while that view is open. `config.toml` overrides any\n" +
	"action by its name: `[keys]` then `\"diff.pick\" = [\"p\", \"space\"]` (one key may be a string,\n" +
	"`\"diff.pick\" = \"p\"`; an empty list unbinds it).\n\n"

// TestREADMEKeys: README.md's key table is exactly the keymap's, so every
// binding is documented and none that is gone lingers.
func TestREADMEKeys(t *testing.T) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	before, body, after := keysSection(t, string(b))
	want := keysIntro + Default().Markdown()
	if *updateREADME {
		if err := os.WriteFile(readmePath, []byte(before+want+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if body != want {
		t.Errorf("README.md's ## Keys section is out of date: go test ./keymap -run TestREADMEKeys -update-readme")
	}
	for _, a := range Default().Actions() {
		if !strings.Contains(body, "`"+a.Name+"`") {
			t.Errorf("README.md does not document %s", a.Name)
		}
	}
}
