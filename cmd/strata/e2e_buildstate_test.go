package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// makeProject puts a two-step C project in the env's source: build/main.o
// from main.c, build/app from build/main.o; the program prints its version.
// build/ is build state through config.toml's ignore.
func makeProject(t *testing.T, e *env, extraConfig string) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("cc is not installed")
	}
	mk := "build/app: build/main.o\n\tcc -o build/app build/main.o\n" +
		"build/main.o: main.c\n\tmkdir -p build\n\tcc -c -o build/main.o main.c\n"
	must(t, os.WriteFile(filepath.Join(e.source, "Makefile"), []byte(mk), 0o644))
	must(t, os.WriteFile(filepath.Join(e.source, "main.c"), []byte(cVersion("v1")), 0o644))
	cfg := "ignore = [\"build/\"]\n" + extraConfig
	must(t, os.WriteFile(filepath.Join(filepath.Dir(e.home), "config.toml"), []byte(cfg), 0o644))
}

func cVersion(v string) string {
	return "#include <stdio.h>\nint main(void) { puts(\"" + v + "\"); return 0; }\n"
}

// edit writes main.c in the World as version v; the sleep keeps mtimes of
// successive steps apart even on coarse-timestamp file systems.
func (e *env) editMain(w, v string) {
	e.t.Helper()
	e.ok("exec", w, "--", "sh", "-c", "sleep 0.05; printf '%s' \"$0\" > main.c", cVersion(v))
}

func (e *env) snapJSON(w, msg string) map[string]any {
	e.t.Helper()
	var s map[string]any
	must(e.t, json.Unmarshal([]byte(e.ok("snap", w, "-m", msg, "--json")), &s))
	return s
}

// TestE2EBuildStateRollbackMake: a real make project in a World whose
// build/ is build state. Snapshots leave build/ out (no object stored for
// any build output); after a rollback (keep, the default) build/ is still
// there and the next make rebuilds exactly what the rolled-back source
// needs, both when the source comes back from a snapshot (older mtime
// than the outputs) and when it comes back from the source tree (older
// still). A fork starts without build state.
func TestE2EBuildStateRollbackMake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	makeProject(t, e, "")
	app := filepath.Join(e.source, "build", "app")
	e.ok("new", "w")
	e.ok("exec", "w", "--", "make", "-s")
	if out := e.ok("exec", "w", "--", app); out != "v1\n" {
		t.Fatalf("first build prints %q", out)
	}
	s0 := e.snapJSON("w", "built v1")
	// Only build/ changed: the snapshot stores nothing of it.
	if files := s0["files"].(float64); files != 0 {
		t.Fatalf("snapshot of a World holding only build outputs has %v files (want 0: build state is not hashed): %v", files, s0)
	}
	if bs, _ := s0["build_state"].(float64); bs != 1 {
		t.Fatalf("snapshot build_state = %v, want 1 (build/ left out): %v", s0["build_state"], s0)
	}
	e.editMain("w", "v2")
	s1 := e.snapJSON("w", "source v2, build still v1")
	if files := s1["files"].(float64); files != 1 || s1["new_objects"].(float64) != 1 {
		t.Fatalf("snapshot after one source edit: files %v new_objects %v (want 1 and 1): %v", s1["files"], s1["new_objects"], s1)
	}
	e.editMain("w", "v3")
	e.ok("exec", "w", "--", "make", "-s")
	if out := e.ok("exec", "w", "--", app); out != "v3\n" {
		t.Fatalf("build of v3 prints %q", out)
	}

	// Back to v2 from the snapshot: its main.c is older than build/ (v3).
	out := e.ok("rollback", "w", s1["id"].(string))
	if !strings.Contains(out, "build state kept") {
		t.Fatalf("rollback does not say what it did with build state: %q", out)
	}
	if _, _, code := e.run("exec", "w", "--", "test", "-e", "build/main.o"); code != 0 {
		t.Fatal("build state (build/main.o) was not kept across the rollback")
	}
	e.ok("exec", "w", "--", "make", "-s")
	if out := e.ok("exec", "w", "--", app); out != "v2\n" {
		t.Fatalf("make after rollback to v2 left a binary printing %q: the stale v3 outputs fooled make", out)
	}

	// Back to v1, which is the source tree's main.c (oldest mtime of all).
	e.ok("rollback", "w", s0["id"].(string))
	if st := e.status("w"); len(st.Changes) != 0 {
		t.Fatalf("after rollback to a state with no source change, status lists %+v", st.Changes)
	}
	e.ok("exec", "w", "--", "make", "-s")
	if out := e.ok("exec", "w", "--", app); out != "v1\n" {
		t.Fatalf("make after rollback to the source's v1 left a binary printing %q", out)
	}
	if got := e.readSource("main.c"); got != cVersion("v1") {
		t.Fatalf("the source tree's main.c changed: %q", got)
	}

	// restore of one path behaves the same: v2 from the snapshot (its
	// recorded mtime is older than the v1 outputs just built), then v1
	// from the source tree (s0 has no main.c of its own).
	e.ok("restore", "w", s1["id"].(string), "main.c")
	e.ok("exec", "w", "--", "make", "-s")
	if out := e.ok("exec", "w", "--", app); out != "v2\n" {
		t.Fatalf("make after restore of main.c (v2) left a binary printing %q", out)
	}
	e.ok("restore", "w", s0["id"].(string), "main.c")
	e.ok("exec", "w", "--", "make", "-s")
	if out := e.ok("exec", "w", "--", app); out != "v1\n" {
		t.Fatalf("make after restore of main.c (the source's v1) left a binary printing %q", out)
	}

	// A fork starts with the snapshot's sources and no build state.
	e.ok("fork", "w", "--snap", s1["id"].(string), "--prefix", "f")
	if _, _, code := e.run("exec", "f-1", "--", "test", "-e", "build"); code == 0 {
		t.Fatal("fork carries build state; forks start without it")
	}
	e.ok("exec", "f-1", "--", "make", "-s")
	if out := e.ok("exec", "f-1", "--", app); out != "v2\n" {
		t.Fatalf("fork's build prints %q", out)
	}
}

// TestE2EBuildStateDiscard: a World made with --build-state discard loses
// its build outputs on rollback, and a build starts from scratch.
func TestE2EBuildStateDiscard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	makeProject(t, e, "")
	app := filepath.Join(e.source, "build", "app")
	e.ok("new", "w", "--build-state", "discard")
	e.editMain("w", "v2")
	s1 := e.snapJSON("w", "v2")
	e.editMain("w", "v3")
	e.ok("exec", "w", "--", "make", "-s")
	out := e.ok("rollback", "w", s1["id"].(string))
	if !strings.Contains(out, "build state discarded") {
		t.Fatalf("rollback output: %q", out)
	}
	if _, _, code := e.run("exec", "w", "--", "test", "-e", "build"); code == 0 {
		t.Fatal("build state survived a rollback of a World with build_state discard")
	}
	e.ok("exec", "w", "--", "make", "-s")
	if out := e.ok("exec", "w", "--", app); out != "v2\n" {
		t.Fatalf("build after rollback prints %q", out)
	}
	// A bad value is a usage error naming the choices; so is a bad config.
	e.fails(2, "keep", "new", "x", "--build-state", "maybe")
	must(t, os.WriteFile(filepath.Join(filepath.Dir(e.home), "config.toml"), []byte("build_state = \"sometimes\"\n"), 0o644))
	e.fails(2, "build_state", "ls")
}
