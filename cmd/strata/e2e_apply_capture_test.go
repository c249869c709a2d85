package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// numbered is "01\n02\n...\n10\n" with the given lines replaced.
func numbered(repl map[int]string) string {
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		if r, ok := repl[i]; ok {
			b.WriteString(r + "\n")
		} else {
			fmt.Fprintf(&b, "%02d\n", i)
		}
	}
	return b.String()
}

// After a 3-way merge (the source edited line 2, the World line 8) the World
// holds the merged result: applying everything again keeps the source's line,
// whether the World had no session running (the path leaves its change set)
// or a session running (the result is written through its view).
func TestE2EApplyMergeStaysMerged(t *testing.T) {
	t.Parallel()
	for _, running := range []bool{false, true} {
		name := map[bool]string{false: "idle", true: "running"}[running]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			writeTestFile(t, filepath.Join(e.source, "m.txt"), numbered(nil))
			e.ok("new", "w")
			e.ok("exec", "w", "--", "sh", "-c", "sed -i 's/^08$/eight (world)/' m.txt && echo other > other.txt")
			e.ok("apply", "w", "--dry-run") // captures the base while the source is as the World found it
			writeTestFile(t, filepath.Join(e.source, "m.txt"), numbered(map[int]string{2: "two (source)"}))
			if running {
				id := strings.TrimSpace(e.ok("exec", "w", "--detach", "--", "sleep", "60"))
				defer e.run("kill", "w", id, "--signal", "KILL")
			}
			both := numbered(map[int]string{2: "two (source)", 8: "eight (world)"})
			out := e.ok("apply", "w", "m.txt")
			if !strings.Contains(out, "merge") || e.readSource("m.txt") != both {
				t.Fatalf("the merge: %q, source:\n%s", out, e.readSource("m.txt"))
			}
			if got := e.ok("exec", "w", "--", "cat", "m.txt"); got != both {
				t.Fatalf("after the merge the World holds:\n%s\nwant the published result:\n%s", got, both)
			}
			// Apply everything: nothing may undo the source's line.
			e.ok("apply", "w")
			if got := e.readSource("m.txt"); got != both {
				t.Fatalf("applying everything after a merge undid it; the source is:\n%s", got)
			}
			if e.readSource("other.txt") != "other\n" {
				t.Fatalf("other.txt: %q", e.readSource("other.txt"))
			}
			if !running {
				for _, c := range e.status("w").Changes {
					if c.Path == "m.txt" {
						t.Fatalf("m.txt equals the source but is still a change of the World: %+v", c)
					}
				}
			}
			// The World's later edit still merges with the source's.
			e.ok("exec", "w", "--", "sh", "-c", "sed -i 's/^10$/ten (world)/' m.txt")
			e.ok("apply", "w", "m.txt")
			if got, want := e.readSource("m.txt"), numbered(map[int]string{2: "two (source)", 8: "eight (world)", 10: "ten (world)"}); got != want {
				t.Fatalf("a later edit after the merge: source\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// setuid and setgid bits a World sets are stripped unless --allow-setuid,
// with a warning on stderr and in --json.
func TestE2EApplySetuidStripped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "printf '#!/bin/sh\\n' > tool && chmod 4755 tool && printf x > group && chmod 2750 group && mkdir shared && chmod 2775 shared && touch plain && chmod 0755 plain")
	out, errs, code := e.run("apply", "w", "--json")
	if code != 0 {
		t.Fatalf("apply: exit %d: %s", code, errs)
	}
	var res struct {
		Paths []struct {
			Path, Action, Note string
		} `json:"paths"`
		Warnings []string `json:"warnings"`
	}
	must(t, json.Unmarshal([]byte(out), &res))
	wantMode := map[string]os.FileMode{"tool": 0o755, "group": 0o750, "shared": os.ModeDir | 0o775, "plain": 0o755}
	for rel, want := range wantMode {
		st, err := os.Lstat(filepath.Join(e.source, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode() & (os.ModeDir | os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != want {
			t.Fatalf("%s published as %v, want %v", rel, got, want)
		}
	}
	if len(res.Warnings) != 3 {
		t.Fatalf("warnings: %q", res.Warnings)
	}
	for _, rel := range []string{"tool", "group", "shared"} {
		found := false
		for _, w := range res.Warnings {
			found = found || strings.HasPrefix(w, rel+": ") && strings.Contains(w, "--allow-setuid")
		}
		if !found {
			t.Fatalf("no warning for %s: %q", rel, res.Warnings)
		}
		if !strings.Contains(errs, "warning: "+rel+": ") {
			t.Fatalf("stderr does not warn about %s: %q", rel, errs)
		}
	}
	for _, p := range res.Paths {
		if strings.Contains(p.Note, "stripped") != (p.Path != "plain") {
			t.Fatalf("note of %s: %q", p.Path, p.Note)
		}
	}
	// With --allow-setuid the bits are published, without a warning.
	_, errs, code = e.run("apply", "w", "--allow-setuid")
	if code != 0 || strings.Contains(errs, "warning") {
		t.Fatalf("apply --allow-setuid: exit %d: %s", code, errs)
	}
	wantMode = map[string]os.FileMode{"tool": os.ModeSetuid | 0o755, "group": os.ModeSetgid | 0o750, "shared": os.ModeDir | os.ModeSetgid | 0o775}
	for rel, want := range wantMode {
		st, err := os.Lstat(filepath.Join(e.source, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode() & (os.ModeDir | os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != want {
			t.Fatalf("with --allow-setuid %s published as %v, want %v", rel, got, want)
		}
	}
}

// The reported incident: a session rewrites a 3 MB file in a tight loop
// while the person applies it six times. Every apply either publishes a
// whole version (exit 0, 3 MiB) or refuses, naming the path and the
// session; never a truncated or empty file with exit 0.
func TestE2EApplyWhileRewritingInALoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	id := strings.TrimSpace(e.ok("exec", "w", "--detach", "--", "sh", "-c", "while :; do head -c 3M /dev/urandom > f; done"))
	defer e.run("kill", "w", id, "--signal", "KILL")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if out, _, code := e.run("exec", "w", "--", "test", "-s", "f"); code == 0 && out == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop never wrote f")
		}
		time.Sleep(10 * time.Millisecond)
	}
	applied, refused := 0, 0
	for i := 0; i < 6; i++ {
		_, errs, code := e.run("apply", "w", "f")
		if code != 0 {
			if !strings.Contains(errs, "session "+id+" is still writing f; wait for it or stop it") {
				t.Fatalf("apply %d: exit %d: %s", i, code, errs)
			}
			refused++
			continue
		}
		applied++
		st, err := os.Stat(filepath.Join(e.source, "f"))
		if err != nil {
			t.Fatalf("apply %d exited 0 but: %v", i, err)
		}
		if st.Size() != 3<<20 {
			t.Fatalf("apply %d exited 0 but published %d bytes, want 3 MiB", i, st.Size())
		}
	}
	t.Logf("6 applies against a tight rewrite loop: %d published whole, %d refused", applied, refused)
}
