package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay/mount"
)

// multiTreeEnv is newEnv with three more trees beside the source: game,
// tools and ddc, each holding sub/a.txt.
func multiTreeEnv(t *testing.T) (*env, map[string]string) {
	t.Helper()
	e := newEnv(t)
	base := filepath.Dir(e.source)
	trees := map[string]string{}
	for _, n := range []string{"game", "tools", "ddc"} {
		d := filepath.Join(base, n)
		must(t, os.MkdirAll(filepath.Join(d, "sub"), 0o755))
		must(t, os.WriteFile(filepath.Join(d, "sub", "a.txt"), []byte(n+" a\n"), 0o644))
		trees[n] = d
	}
	// Runs before newEnv's cleanup: the trees' merged views are mounts too.
	t.Cleanup(func() {
		ms, _ := filepath.Glob(filepath.Join(e.home, "worlds", "*", "trees", "*", "merged"))
		for _, m := range ms {
			_ = mount.ForceUnmount(m)
		}
	})
	return e, trees
}

func readF(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestE2EMultiTree(t *testing.T) {
	e, trees := multiTreeEnv(t)
	game, tools, ddc := trees["game"], trees["tools"], trees["ddc"]

	// Refusals are usage errors (exit 2) that say what to do.
	e.fails(2, "overlap", "new", "bad", "--mount", filepath.Join(e.source, "sub"))
	e.fails(2, "whole host", "new", "bad", "--mount", "/:readonly")
	e.fails(2, "no such file", "new", "bad", "--mount", "x="+filepath.Join(game, "nope"))
	e.fails(2, "mode \"rw\"", "new", "bad", "--mount", game+":rw")
	e.fails(2, "named \"game\"", "new", "bad", "--mount", game, "--mount", "game="+tools)
	e.fails(2, "--backend local", "new", "bad", "--backend", "cube", "--mount", game)
	if _, err := os.Stat(filepath.Join(e.home, "worlds", "bad")); !os.IsNotExist(err) {
		t.Fatal("a refused World was left behind")
	}

	var nw struct {
		Trees []struct{ Name, Path, Mode string } `json:"trees"`
	}
	must(t, json.Unmarshal([]byte(e.ok("new", "ue", "--mount", "game="+game, "--mount", tools+":readonly", "--mount", "ddc="+ddc+":shared", "--json")), &nw))
	if len(nw.Trees) != 3 || nw.Trees[1].Name != "tools" || nw.Trees[1].Mode != "readonly" || nw.Trees[2].Mode != "shared" || nw.Trees[0].Path != game {
		t.Fatalf("new --json trees = %+v", nw.Trees)
	}

	// Run from inside a tree, a command starts there and a relative PATH
	// is in that tree.
	c := e.cmd("exec", "ue", "--", "pwd")
	c.Dir = filepath.Join(game, "sub")
	if out, err := c.Output(); err != nil || strings.TrimSpace(string(out)) != filepath.Join(game, "sub") {
		t.Fatalf("exec from the game tree runs in %q (%v)", out, err)
	}

	// Hostile writes per mode, from a sandboxed session (the default).
	out, errs, code := e.run("exec", "ue", "--", "sh", "-c", strings.NewReplacer("GAME", game, "TOOLS", tools, "DDC", ddc).Replace(`
echo changed >> a.txt
echo g > GAME/g.txt && echo edited >> GAME/sub/a.txt
umount -l GAME 2>/dev/null && echo UMOUNTED
echo escaped > GAME/escape.txt
echo x > TOOLS/sub/a.txt 2>&1 || true
echo cache > DDC/c.bin`))
	if code != 0 || strings.Contains(out+errs, "UMOUNTED") || !strings.Contains(out+errs, "Read-only file system") {
		t.Fatalf("exec: exit %d\n%s%s", code, out, errs)
	}
	if readF(t, filepath.Join(game, "sub", "a.txt")) != "game a\n" || readF(t, filepath.Join(tools, "sub", "a.txt")) != "tools a\n" {
		t.Fatal("a host tree was written")
	}
	for _, p := range []string{filepath.Join(game, "g.txt"), filepath.Join(game, "escape.txt")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s reached the host", p)
		}
	}
	if readF(t, filepath.Join(ddc, "c.bin")) != "cache\n" {
		t.Fatal("the shared tree was not written in place")
	}

	// status: every overlay tree, attributable; the shared tree never.
	st := e.ok("status", "ue")
	for _, want := range []string{"M  a.txt\n", "A  game:g.txt\n", "A  game:escape.txt\n", "M  game:sub/a.txt\n"} {
		if !strings.Contains(st, want) {
			t.Errorf("status lacks %q:\n%s", want, st)
		}
	}
	if strings.Contains(st, "c.bin") || strings.Contains(st, "tools") {
		t.Errorf("status lists a shared or read-only tree:\n%s", st)
	}
	var sj struct {
		Changes []struct{ Tree, Path string } `json:"changes"`
	}
	must(t, json.Unmarshal([]byte(e.ok("status", "ue", "--json", "--tree", "game")), &sj))
	if len(sj.Changes) != 3 {
		t.Fatalf("status --tree game --json = %+v", sj.Changes)
	}
	for _, c := range sj.Changes {
		if c.Tree != "game" {
			t.Errorf("change %s has tree %q", c.Path, c.Tree)
		}
	}
	e.fails(2, "no tree", "status", "ue", "--tree", "nope")
	e.fails(2, "is shared", "diff", "ue", "--tree", "ddc")
	e.fails(2, "no tree", "apply", "ue", "--tree", "nope")

	// diff: NAME:path, an absolute path in a tree, the patch headers.
	if d := e.ok("diff", "ue", "game:sub/a.txt"); !strings.Contains(d, "--- a/game:sub/a.txt") || !strings.Contains(d, "+edited") || strings.Contains(d, "a.txt\n+changed") {
		t.Errorf("diff game:sub/a.txt:\n%s", d)
	}
	if d := e.ok("diff", "ue", filepath.Join(game, "g.txt")); !strings.Contains(d, "+++ b/game:g.txt") {
		t.Errorf("diff of an absolute tree path:\n%s", d)
	}
	c = e.cmd("diff", "ue", "--stat", "a.txt")
	c.Dir = filepath.Join(game, "sub")
	if out, err := c.Output(); err != nil || !strings.Contains(string(out), "game:sub/a.txt") {
		t.Errorf("diff of a relative path from the game tree: %q (%v)", out, err)
	}
	if d := e.ok("diff", "ue", "--stat"); !strings.Contains(d, "game:sub/a.txt") || !strings.Contains(d, " a.txt") {
		t.Errorf("diff --stat:\n%s", d)
	}

	// show and ls --json list the trees with their modes.
	if s := e.ok("show", "ue"); !strings.Contains(s, "tree game:") || !strings.Contains(s, tools+" (readonly)") || !strings.Contains(s, ddc+" (shared)") {
		t.Errorf("show:\n%s", s)
	}
	var ls []struct {
		Name        string                              `json:"name"`
		Changes     int                                 `json:"changes"`
		TreeChanges map[string]int                      `json:"tree_changes"`
		Trees       []struct{ Name, Path, Mode string } `json:"trees"`
	}
	must(t, json.Unmarshal([]byte(e.ok("ls", "--all", "--json")), &ls))
	if len(ls) != 1 || len(ls[0].Trees) != 3 || ls[0].Changes != 4 || ls[0].TreeChanges["game"] != 3 || ls[0].TreeChanges["main"] != 1 {
		t.Fatalf("ls --json = %+v", ls)
	}

	// snapshot, change, rollback: every tree comes back; fork copies them.
	e.ok("snap", "ue", "-m", "one")
	e.ok("exec", "ue", "--", "sh", "-c", "echo later > "+game+"/later.txt && echo later >> a.txt")
	e.ok("rollback", "ue", "head")
	if out := e.ok("exec", "ue", "--", "sh", "-c", "cat "+game+"/g.txt; test -e "+game+"/later.txt || echo no-later; tail -1 a.txt"); out != "g\nno-later\nchanged\n" {
		t.Fatalf("after rollback: %q", out)
	}
	e.ok("fork", "ue", "--prefix", "ue2")
	if out := e.ok("exec", "ue2-1", "--", "cat", game+"/g.txt", tools+"/sub/a.txt"); out != "g\ntools a\n" {
		t.Fatalf("fork sees %q", out)
	}

	// apply: a conflict in the game tree publishes nothing, the source's
	// change included.
	must(t, os.WriteFile(filepath.Join(game, "sub", "a.txt"), []byte("host\n"), 0o644))
	e.fails(1, "game:sub/a.txt", "apply", "ue")
	if got := e.readSource("a.txt"); got != "hello\n" {
		t.Fatalf("the source was published despite the game tree's conflict: %q", got)
	}
	must(t, os.WriteFile(filepath.Join(game, "sub", "a.txt"), []byte("game a\n"), 0o644))
	res := e.ok("apply", "ue", "game:g.txt", "a.txt")
	if !strings.Contains(res, "game:g.txt") || !strings.Contains(res, "of tree game to "+game) {
		t.Errorf("apply output:\n%s", res)
	}
	if readF(t, filepath.Join(game, "g.txt")) != "g\n" || e.readSource("a.txt") != "hello\nchanged\n" {
		t.Fatal("apply of two trees missed one")
	}
	if _, err := os.Lstat(filepath.Join(game, "escape.txt")); !os.IsNotExist(err) {
		t.Fatal("an unpicked path of the game tree was published")
	}
	e.ok("apply", "ue", "--tree", "game")
	if readF(t, filepath.Join(game, "sub", "a.txt")) != "game a\nedited\n" {
		t.Fatal("apply --tree game missed sub/a.txt")
	}
}

// A World made the old way (no trees in world.toml) works as before.
func TestE2EMultiTreeOldWorldFile(t *testing.T) {
	e := newEnv(t)
	e.ok("new", "old")
	wt := filepath.Join(e.home, "worlds", "old", "world.toml")
	data := readF(t, wt)
	if strings.Contains(data, "trees") {
		t.Fatalf("a World without --mount writes trees:\n%s", data)
	}
	// As an older strata wrote it: none of the newer keys.
	var keep []string
	for _, l := range strings.Split(data, "\n") {
		if strings.HasPrefix(l, "build_state") || strings.HasPrefix(l, "network") || strings.HasPrefix(l, "pass_env") {
			continue
		}
		keep = append(keep, l)
	}
	must(t, os.WriteFile(wt, []byte(strings.Join(keep, "\n")), 0o644))
	e.ok("exec", "old", "--", "sh", "-c", "echo more >> a.txt")
	if st := e.ok("status", "old"); st != "M  a.txt\n" {
		t.Fatalf("status = %q", st)
	}
	var sj map[string]any
	must(t, json.Unmarshal([]byte(e.ok("status", "old", "--json")), &sj))
	if _, ok := sj["trees"]; ok {
		t.Errorf("status --json of a one-tree World has trees: %v", sj)
	}
	if ch := sj["changes"].([]any)[0].(map[string]any); ch["tree"] != nil {
		t.Errorf("a one-tree World's change names a tree: %v", ch)
	}
	e.ok("snap", "old")
	e.ok("apply", "old", "a.txt")
	if e.readSource("a.txt") != "hello\nmore\n" {
		t.Fatal("apply of an old World failed")
	}
	e.fails(2, "one tree", "status", "old", "--tree", "game")
	e.fails(2, "one tree", "diff", "old", "--tree", "game")
}
