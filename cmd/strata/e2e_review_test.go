package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type diffJSON struct {
	Path       string `json:"path"`
	Hunks      int    `json:"hunks"`
	BaseHash   string `json:"base_hash"`
	WorldHash  string `json:"world_hash"`
	SourceHash string `json:"source_hash"`
	Drift      bool   `json:"drift"`
	HunkList   []struct {
		Number      int      `json:"number"`
		Header      string   `json:"header"`
		PickNumbers []int    `json:"pick_numbers"`
		Lines       []string `json:"lines"`
	} `json:"hunk_list"`
}

func numLines(f func(int) string) string {
	var b strings.Builder
	for i := 1; i <= 40; i++ {
		b.WriteString(f(i) + "\n")
	}
	return b.String()
}

// TestE2EDiffUnderDriftAndBoundPicks: the source moves under a World; strata
// diff still shows base vs World, numbered as --hunks counts, says the
// source drifted, prints World vs source with --against source, and apply
// refuses hunks picked on a World file that was written since.
func TestE2EDiffUnderDriftAndBoundPicks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := numLines(func(i int) string { return fmt.Sprint(i) })
	writeTestFile(t, filepath.Join(e.source, "nums.txt"), base)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sed", "-i", "-e", "s/^3$/world 3/", "-e", "s/^20$/world 20/", "-e", "s/^37$/world 37/", "nums.txt")
	e.ok("apply", "w", "--dry-run") // the bases are captured while the source holds them
	theirs := strings.Replace(base, "\n10\n", "\nteammate 10\n", 1)
	writeTestFile(t, filepath.Join(e.source, "nums.txt"), theirs)

	out, errs, code := e.run("diff", "w")
	if code != 0 {
		t.Fatalf("diff: %d %s", code, errs)
	}
	headers := regexp.MustCompile(`(?m)^@@ .* @@.*$`).FindAllString(out, -1)
	if len(headers) != 3 || !strings.HasSuffix(headers[0], "@@ hunk 1") || !strings.HasSuffix(headers[1], "@@ hunk 2") || !strings.HasSuffix(headers[2], "@@ hunk 3") {
		t.Fatalf("hunk headers %q in\n%s", headers, out)
	}
	if strings.Contains(out, "teammate") {
		t.Fatalf("the teammate's line shows as the World's change:\n%s", out)
	}
	if !strings.Contains(errs, "nums.txt: the source changed since the World's base: apply will merge") {
		t.Fatalf("no drift note: %q", errs)
	}
	// The numbered patch still applies with git to the base.
	if _, err := exec.LookPath("git"); err == nil {
		dir := t.TempDir()
		writeTestFile(t, filepath.Join(dir, "nums.txt"), base)
		writeTestFile(t, filepath.Join(dir, "p.patch"), out)
		c := exec.Command("git", "apply", "p.patch")
		c.Dir = dir
		if o, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git apply: %v %s", err, o)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "nums.txt")); !strings.Contains(string(got), "world 20") {
			t.Fatal("git apply did not apply the numbered patch")
		}
	}
	// With more context the hunks merge, and say which --hunks they hold.
	if out := e.ok("diff", "w", "-U", "12"); !regexp.MustCompile(`(?m)^@@ -1,40 \+1,40 @@ hunks 1-3$`).MatchString(out) {
		t.Fatalf("-U 12:\n%s", out)
	}
	var fj []diffJSON
	must(t, json.Unmarshal([]byte(e.ok("diff", "w", "--json")), &fj))
	if len(fj) != 1 || !fj[0].Drift || len(fj[0].BaseHash) != 64 || len(fj[0].WorldHash) != 64 || len(fj[0].SourceHash) != 64 ||
		fj[0].BaseHash == fj[0].SourceHash || len(fj[0].HunkList) != 3 || fmt.Sprint(fj[0].HunkList[1].PickNumbers) != "[2]" {
		t.Fatalf("diff --json: %+v", fj)
	}
	// World vs the source now: the teammate's line is what the World lacks.
	out = e.ok("diff", "w", "--against", "source")
	if !strings.Contains(out, "-teammate 10") || strings.Contains(out, "@@ hunk") {
		t.Fatalf("--against source:\n%s", out)
	}

	// A session rewrites line 20 after the review: the pick is refused.
	e.ok("exec", "w", "--", "sed", "-i", "s/^world 20$/not reviewed 20/", "nums.txt")
	pick := []string{"apply", "w", "--hunks", "nums.txt=2", "--expect-base", "nums.txt=" + fj[0].BaseHash, "--expect-world", "nums.txt=" + fj[0].WorldHash}
	e.fails(1, "nums.txt: the World's file changed since the hunks were picked (a session may still be writing it); review the diff again", pick...)
	if got := e.readSource("nums.txt"); got != theirs {
		t.Fatalf("a refused pick wrote the source:\n%s", got)
	}
	out, _, code = e.run(append(pick, "--json")...)
	var sj struct {
		Applied   bool `json:"applied"`
		StalePick struct {
			Path, Side, Want, Got string
		} `json:"stale_pick"`
	}
	must(t, json.Unmarshal([]byte(out), &sj))
	if code != 1 || sj.Applied || sj.StalePick.Path != "nums.txt" || sj.StalePick.Side != "world" || sj.StalePick.Want != fj[0].WorldHash || len(sj.StalePick.Got) != 64 {
		t.Fatalf("--json of a refused pick: exit %d %s", code, out)
	}
	e.fails(2, "want PATH=HASH", "apply", "w", "--hunks", "nums.txt=2", "--expect-world", "nums.txt=zz")
	e.fails(2, "the path is not picked", "apply", "w", "a.txt", "--expect-world", "nums.txt="+fj[0].WorldHash)
	// Reviewed again, the pick lands as the 3-way merge.
	must(t, json.Unmarshal([]byte(e.ok("diff", "w", "--json")), &fj))
	e.ok("apply", "w", "--hunks", "nums.txt=2", "--expect-base", "nums.txt="+fj[0].BaseHash, "--expect-world", "nums.txt="+fj[0].WorldHash)
	if got, want := e.readSource("nums.txt"), strings.Replace(theirs, "\n20\n", "\nnot reviewed 20\n", 1); got != want {
		t.Fatalf("the source is:\n%s\nwant:\n%s", got, want)
	}
}
