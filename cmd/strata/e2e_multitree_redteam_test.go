package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Red team, CLI: operands that climb out of a tree or name another's
// path, tree names that look like paths, and a tree's dir replaced by a
// symlink after new. Each is refused with a message, nothing written.
func TestE2EMultiTreeRedteamOperands(t *testing.T) {
	e, trees := multiTreeEnv(t)
	game := trees["game"]
	e.ok("new", "ue", "--mount", "game="+game, "--mount", trees["tools"]+":readonly")
	e.ok("exec", "ue", "--", "sh", "-c", "echo g > "+game+"/g.txt && echo m > m.txt")
	for arg, says := range map[string]string{
		"game:../x":                   "outside the source " + game,
		"game:../../etc/passwd":       "outside the source " + game,
		"game:/etc/passwd":            "outside the source " + game,
		"game:" + e.source + "/m.txt": "outside the source " + game,
		"main:../game/g.txt":          "outside the source " + e.source,
		"main:" + game + "/g.txt":     "outside the source " + e.source,
		"game:":                       "empty path",
		"tools:sub/a.txt":             "readonly",
	} {
		e.fails(2, says, "apply", "ue", arg)
		e.fails(2, says, "diff", "ue", arg)
	}
	if _, err := os.Lstat(filepath.Join(game, "g.txt")); !os.IsNotExist(err) {
		t.Fatal("a refused apply wrote the game tree")
	}
	if got := e.readSource("m.txt"); !strings.HasPrefix(got, "<") {
		t.Fatalf("a refused apply wrote the source: %q", got)
	}
	// A tree name that looks like a path says so (it used to be read as
	// a path "../x=/…/game" and fail on lstat of "x=").
	for _, m := range []string{"../x=" + game, "./g=" + game, "/x=" + game, "g/h=" + game} {
		e.fails(2, "holds '/'", "new", "bad", "--mount", m)
	}
	e.fails(2, "tree name \"a:b\"", "new", "bad", "--mount", "a:b="+game)
	e.fails(2, "tree name \".\"", "new", "bad", "--mount", ".="+game)
	if _, err := os.Stat(filepath.Join(e.home, "worlds", "bad")); !os.IsNotExist(err) {
		t.Fatal("a refused World was left behind")
	}

	// The game tree's dir moved away and a link to the source left in its
	// place: every command that would mount, read or publish the tree
	// refuses, naming the tree and where it now leads; show says so too.
	must(t, os.Rename(game, game+".real"))
	must(t, os.Symlink(e.source, game))
	for _, args := range [][]string{{"status", "ue"}, {"diff", "ue"}, {"apply", "ue"}, {"exec", "ue", "--", "sh", "-c", "echo pwned > " + game + "/p.txt"}} {
		e.fails(1, "tree game: "+game+" now leads to "+e.source+" through a symlink", args...)
	}
	if out := e.ok("show", "ue"); !strings.Contains(out, "now leads to "+e.source) {
		t.Errorf("show of a World whose tree became a link:\n%s", out)
	}
	for _, p := range []string{filepath.Join(e.source, "p.txt"), filepath.Join(e.source, "g.txt"), filepath.Join(game+".real", "g.txt")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s written with the tree's dir a link", p)
		}
	}
}

// Red team, lifecycle of a World with trees: fork -n 2 gives each fork
// every tree (status and a session in each); rm takes the trees' layers to
// the trash with the World (no mount left) and restore-world brings them
// back; a rollback while a tree's dir is gone is refused before anything
// changes (it used to swap every upper, fail to remount the missing tree,
// and report a failure for a rollback that had happened), and works once
// the dir is back.
func TestE2EMultiTreeRedteamLifecycle(t *testing.T) {
	e, trees := multiTreeEnv(t)
	game := trees["game"]
	e.ok("new", "ue", "--mount", "game="+game, "--mount", "ddc="+trees["ddc"]+":shared")
	e.ok("exec", "ue", "--", "sh", "-c", "echo one > "+game+"/g.txt && echo m1 > m.txt")
	snap := snapID(t, e.ok("snap", "ue", "--json"))
	e.ok("exec", "ue", "--", "sh", "-c", "echo two > "+game+"/g.txt && echo m2 > m.txt")

	e.ok("fork", "ue", "-n", "2", "--prefix", "fk")
	for _, n := range []string{"fk-1", "fk-2"} {
		if got := e.ok("status", n); got != "A  m.txt\nA  game:g.txt\n" {
			t.Errorf("status %s = %q", n, got)
		}
		if got := e.ok("exec", n, "--", "cat", game+"/g.txt", "m.txt"); got != "two\nm2\n" {
			t.Errorf("exec in %s sees %q", n, got)
		}
	}

	e.ok("rm", "fk-1")
	if _, err := os.Lstat(filepath.Join(e.home, "worlds", "fk-1")); !os.IsNotExist(err) {
		t.Errorf("rm left the World's dir: %v", err)
	}
	if mi := readF(t, "/proc/self/mountinfo"); strings.Contains(mi, "/fk-1/") {
		t.Errorf("rm left a mount of fk-1:\n%s", mi)
	}
	e.ok("restore-world", "fk-1")
	if got := e.ok("status", "fk-1"); got != "A  m.txt\nA  game:g.txt\n" {
		t.Errorf("status of the restored fk-1 = %q", got)
	}
	if got := e.ok("exec", "fk-1", "--", "cat", game+"/g.txt"); got != "two\n" {
		t.Errorf("the restored fk-1's game tree reads %q", got)
	}
	if got := readF(t, filepath.Join(game, "g.txt")); !strings.HasPrefix(got, "<") {
		t.Errorf("the host's game tree got g.txt: %q", got)
	}

	// Rollback while the game tree's dir is gone: refused, nothing changed.
	timeline := e.ok("timeline", "ue")
	must(t, os.Rename(game, game+".gone"))
	e.fails(1, "tree game: its dir "+game+" no longer exists", "rollback", "ue", snap, "--kill")
	if got := e.ok("timeline", "ue"); got != timeline {
		t.Errorf("a refused rollback changed the timeline:\n%s\nwas\n%s", got, timeline)
	}
	must(t, os.Rename(game+".gone", game))
	if got := e.ok("exec", "ue", "--", "cat", game+"/g.txt", "m.txt"); got != "two\nm2\n" {
		t.Fatalf("after a refused rollback the World reads %q", got)
	}
	e.ok("rollback", "ue", snap, "--kill")
	if got := e.ok("exec", "ue", "--", "cat", game+"/g.txt", "m.txt"); got != "one\nm1\n" {
		t.Fatalf("after the rollback the World reads %q", got)
	}
}

func snapID(t *testing.T, js string) string {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal([]byte(js), &v))
	return v.ID
}
