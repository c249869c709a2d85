package main

import (
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
