package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// An operand NAME:path whose NAME is no tree of the World is a usage
// mistake naming the World's trees (it said "no change at this path"); a
// source file really named "x:y" stays reachable. Restoring single paths
// works in an extra tree (it was refused), from the tree's own manifest,
// leaving the source alone. From inside a tree, exec's relative operands
// are in that tree.
func TestE2EMultiTreeOperands(t *testing.T) {
	e, trees := multiTreeEnv(t)
	game := trees["game"]
	e.ok("new", "ue", "--mount", "game="+game, "--mount", trees["tools"]+":readonly")
	e.ok("exec", "ue", "--", "sh", "-c", "echo w1 >> "+game+"/sub/a.txt; echo s1 >> a.txt; echo colon > x:y")

	const says = "no tree nosuch in World ue (its trees: main, game, tools)"
	e.fails(2, says, "diff", "ue", "nosuch:x")
	e.fails(2, says, "apply", "ue", "nosuch:x")
	e.fails(2, says, "status", "ue", "--tree", "nosuch")
	e.fails(2, says, "restore", "ue", "head", "nosuch:x")
	if out := e.ok("diff", "ue", "x:y"); !strings.Contains(out, "+colon") {
		t.Fatalf("diff of the source's file x:y: %q", out)
	}

	// From inside the game tree, a relative operand is the tree's file.
	if out, _, code := e.runAt(filepath.Join(game, "sub"), "exec", "ue", "--", "cat", "a.txt"); code != 0 || out != "game a\nw1\n" {
		t.Fatalf("exec cat a.txt in game/sub: %d %q", code, out)
	}

	// status . from inside a tree lists that tree's changes only (status
	// took no PATH); from the source, the source's.
	for dir, want := range map[string]string{filepath.Join(game, "sub"): "game:sub/a.txt", game: "game:sub/a.txt", e.source: "a.txt"} {
		out, errs, code := e.runAt(dir, "status", "ue", ".")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var paths []string
		for _, l := range lines {
			if f := strings.Fields(l); len(f) >= 2 && len(f[0]) == 1 {
				paths = append(paths, f[len(f)-1])
			}
		}
		wantN := 1
		if dir == e.source {
			wantN = 2 // a.txt and x:y
		}
		if code != 0 || len(paths) != wantN || !strings.Contains(out, want) || (dir != e.source) == strings.Contains(out, "x:y") {
			t.Fatalf("status ue . in %s: exit %d, paths %v\n%s%s", dir, code, paths, out, errs)
		}
	}
	if out := e.ok("status", "ue", "game:"); !strings.Contains(out, "game:sub/a.txt") || strings.Contains(out, "x:y") {
		t.Fatalf("status ue game: = %q", out)
	}

	// blame of a source path in a World with trees finds its session;
	// another tree's path says provenance is not recorded there.
	if out := e.ok("blame", "ue", "a.txt"); strings.Contains(out, "no session") {
		t.Fatalf("blame ue a.txt: %q", out)
	}
	e.fails(1, "provenance is recorded for the source only", "blame", "ue", "game:sub/a.txt")

	// restore game:sub/a.txt brings the game tree's file back and leaves
	// the source's later edit alone; an absolute path in the tree works too.
	e.ok("snap", "ue", "-m", "one")
	e.ok("exec", "ue", "--", "sh", "-c", "echo w2 >> "+game+"/sub/a.txt; echo s2 >> a.txt; echo new > "+game+"/new.txt")
	e.ok("restore", "ue", "head", "game:sub/a.txt", filepath.Join(game, "new.txt"))
	if out := e.ok("exec", "ue", "--", "sh", "-c", "cat "+game+"/sub/a.txt; test -e "+game+"/new.txt || echo no-new; tail -1 a.txt"); out != "game a\nw1\nno-new\ns2\n" {
		t.Fatalf("after restore of game paths: %q", out)
	}
	if got := readF(t, filepath.Join(game, "sub", "a.txt")); got != "game a\n" {
		t.Fatalf("restore wrote the host's game tree: %q", got)
	}
	// A read-only tree has nothing to restore.
	e.fails(2, "is readonly", "restore", "ue", "head", "tools:sub/a.txt")
}
