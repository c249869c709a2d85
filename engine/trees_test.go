package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
)

// multiTreeEngine is testEngine with three more trees beside the source:
// game, tools and ddc, each with sub/a.txt.
func multiTreeEngine(t *testing.T) (e *Engine, src string, trees map[string]string) {
	t.Helper()
	e, src = testEngine(t)
	base := filepath.Dir(src)
	trees = map[string]string{}
	for _, n := range []string{"game", "tools", "ddc"} {
		d := filepath.Join(base, n)
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "sub", "a.txt"), []byte(n+" a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		trees[n] = d
	}
	t.Cleanup(func() {
		ws, _ := e.Worlds()
		for _, w := range ws {
			for _, v := range treeViews(w)[1:] {
				_ = mount.ForceUnmount(e.Paths.MergedOf(v))
			}
		}
	})
	return e, src, trees
}

// multiTreeWorld: game an overlay tree, tools read-only, ddc shared.
func multiTreeWorld(t *testing.T, e *Engine, src string, trees map[string]string, name string) *World {
	t.Helper()
	w, err := e.Create(context.Background(), CreateOptions{Name: name, Source: src, MountBackend: overlay.BackendKernel, Trees: []Tree{
		{Name: "game", Path: trees["game"], Mode: TreeOverlay},
		{Name: "tools", Path: trees["tools"], Mode: TreeReadOnly},
		{Name: "ddc", Path: trees["ddc"], Mode: TreeShared},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestCreateWithTrees(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	w := multiTreeWorld(t, e, src, trees, "ue")
	r, err := e.World("ue")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Trees) != 3 || r.Trees[0].Path != trees["game"] || r.Trees[2].Mode != TreeShared {
		t.Fatalf("trees = %+v", r.Trees)
	}
	v, _ := w.TreeView("game")
	for _, d := range []string{e.Paths.UpperOf(v), e.Paths.WorkOf(v), e.Paths.MergedOf(v)} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Fatalf("tree dir %s: %v", d, err)
		}
	}
	// Only overlay trees get layers.
	if _, err := os.Stat(e.Paths.Tree("ue", "tools")); !os.IsNotExist(err) {
		t.Fatalf("read-only tree has layers: %v", err)
	}
}

func TestCreateRefusesBadTrees(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	home, _ := os.UserHomeDir()
	link := filepath.Join(filepath.Dir(src), "game-link")
	if err := os.Symlink(trees["game"], link); err != nil {
		t.Fatal(err)
	}
	for why, tc := range map[string]struct {
		trees []Tree
		says  string
	}{
		"missing dir":        {[]Tree{{Name: "x", Path: filepath.Join(src, "..", "nope")}}, "no such file"},
		"inside the source":  {[]Tree{{Name: "d0", Path: filepath.Join(src, "d0")}}, "overlap"},
		"over the source":    {[]Tree{{Name: "all", Path: filepath.Dir(src)}}, ""},
		"a link to another":  {[]Tree{{Name: "game", Path: trees["game"]}, {Name: "g2", Path: link}}, "overlap"},
		"the state root":     {[]Tree{{Name: "st", Path: e.Paths.Root}}, "state"},
		"inside the state":   {[]Tree{{Name: "st", Path: e.Paths.Worlds()}}, "state"},
		"the root":           {[]Tree{{Name: "root", Path: "/", Mode: TreeReadOnly}}, "whole host"},
		"the home":           {[]Tree{{Name: "home", Path: home, Mode: TreeShared}}, "home"},
		"a name taken twice": {[]Tree{{Name: "g", Path: trees["game"]}, {Name: "g", Path: trees["tools"]}}, "named"},
		"the source's name":  {[]Tree{{Name: "main", Path: trees["game"]}}, "source"},
		"a bad name":         {[]Tree{{Name: "Game", Path: trees["game"]}}, "tree name"},
	} {
		_, err := e.Create(context.Background(), CreateOptions{Name: "bad", Source: src, MountBackend: overlay.BackendKernel, Trees: tc.trees})
		if !errors.Is(err, ErrInvalidMount) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: Create = %v, want ErrInvalidMount saying %q", why, err, tc.says)
		}
		if _, err := os.Lstat(e.Paths.World("bad")); !os.IsNotExist(err) {
			t.Fatalf("%s: a refused World left its dir", why)
		}
	}
}

// A cube World's sandbox gets one host share: --mount is refused with a
// clear message, and no World is left behind.
func TestCreateCubeRefusesTrees(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	_, err := e.Create(context.Background(), CreateOptions{Name: "c", Source: src, Backend: RuntimeCube, Trees: []Tree{{Name: "game", Path: trees["game"]}}})
	if !errors.Is(err, ErrInvalidMount) || !strings.Contains(err.Error(), "--backend local") {
		t.Fatalf("cube Create with a tree = %v", err)
	}
	if _, err := os.Lstat(e.Paths.World("c")); !os.IsNotExist(err) {
		t.Fatal("a refused cube World left its dir")
	}
}

// execIn runs script in World name at level iso (no network) and returns
// its output and exit code.
func execIn(t *testing.T, e *Engine, name string, iso Isolation, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := e.Exec(ctx, name, ExecOptions{Argv: []string{"/bin/sh", "-c", script}, Env: []string{defaultPath, "HOME=/root"}, Isolation: iso, Network: boundary.NetworkNone})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return sessionOutput(ctx, t, e, name, m.ID)
}

// A hostile command at every level: each tree is seen at its own path; a
// write to an overlay tree lands in the World's upper of that tree, never
// on the host, even after trying to unmount or remount it; a read-only tree
// refuses writes (EROFS); a shared tree is written in place.
func TestSessionTreesHostileWrites(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	for _, iso := range []Isolation{IsolationTree, IsolationSandbox, IsolationStrict} {
		t.Run(string(iso), func(t *testing.T) {
			name := "h-" + string(iso)
			w := multiTreeWorld(t, e, src, trees, name)
			game, tools, ddc := trees["game"], trees["tools"], trees["ddc"]
			script := strings.NewReplacer("GAME", game, "TOOLS", tools, "DDC", ddc, "ISO", string(iso)).Replace(`
cat GAME/sub/a.txt TOOLS/sub/a.txt DDC/sub/a.txt
echo hostile > GAME/sub/a.txt
echo new-ISO > GAME/new-ISO.txt
rm GAME/sub/a.txt && echo again > GAME/sub/a.txt
umount -l GAME 2>/dev/null && echo UMOUNTED
mount -o remount,rw GAME 2>/dev/null && echo REMOUNTED
echo escaped > GAME/escape-ISO.txt
if echo x > TOOLS/sub/a.txt 2>/tmp/err; then echo TOOLS-WRITTEN; else cat /tmp/err; fi
if mkdir TOOLS/newdir 2>/dev/null; then echo TOOLS-MKDIR; fi
echo cached-ISO > DDC/cache-ISO.bin
true`)
			out, code := execIn(t, e, name, iso, script)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			for _, want := range []string{"game a", "tools a", "ddc a", "Read-only file system"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			for _, bad := range []string{"UMOUNTED", "REMOUNTED", "TOOLS-WRITTEN", "TOOLS-MKDIR"} {
				if strings.Contains(out, bad) {
					t.Errorf("the command could %s:\n%s", bad, out)
				}
			}
			// The host's game tree is untouched through every route.
			if got := readFile(t, filepath.Join(game, "sub", "a.txt")); got != "game a\n" {
				t.Errorf("host game/sub/a.txt = %q", got)
			}
			for _, f := range []string{"new-" + string(iso) + ".txt", "escape-" + string(iso) + ".txt"} {
				if _, err := os.Lstat(filepath.Join(game, f)); !os.IsNotExist(err) {
					t.Errorf("host game tree got %s (%v)", f, err)
				}
			}
			// ...and the writes are the World's, in the tree's own upper.
			v, _ := w.TreeView("game")
			up := e.Paths.UpperOf(v)
			if got := readFile(t, filepath.Join(up, "sub", "a.txt")); got != "again\n" {
				t.Errorf("tree upper sub/a.txt = %q", got)
			}
			if got := readFile(t, filepath.Join(up, "new-"+string(iso)+".txt")); got != "new-"+string(iso)+"\n" {
				t.Errorf("tree upper new file = %q", got)
			}
			if _, err := os.Lstat(filepath.Join(e.Paths.Upper(name), "sub")); !os.IsNotExist(err) {
				t.Errorf("the game tree's write landed in the source's upper")
			}
			if _, err := os.Lstat(filepath.Join(tools, "newdir")); !os.IsNotExist(err) {
				t.Errorf("read-only tree got a dir")
			}
			if got := readFile(t, filepath.Join(ddc, "cache-"+string(iso)+".bin")); got != "cached-"+string(iso)+"\n" {
				t.Errorf("shared tree not written in place: %q", got)
			}
		})
	}
}

// Status and diff per tree: each tree's changes are its own, read against
// its own directory, and a path names its tree.
func TestTreesStatusAndDiff(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	multiTreeWorld(t, e, src, trees, "ue")
	// The same relative path in two trees: each diff is against its own tree.
	if out, code := execIn(t, e, "ue", IsolationSandbox, "mkdir -p "+src+"/sub && echo main > "+src+"/sub/a.txt && echo edited >> "+trees["game"]+"/sub/a.txt && echo c > "+trees["ddc"]+"/c"); code != 0 {
		t.Fatal(out)
	}
	w, _ := e.World("ue")
	tcs, err := e.ChangesByTree(ctx, w, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tcs) != 2 || tcs[0].Tree != MainTree || tcs[1].Tree != "game" || tcs[1].Source != trees["game"] {
		t.Fatalf("trees = %+v", tcs)
	}
	paths := func(cs []overlay.Change) (out []string) {
		for _, c := range cs {
			out = append(out, c.Kind.Letter()+" "+c.Path)
		}
		return out
	}
	if got := strings.Join(paths(tcs[0].Changes), ","); got != "A sub,A sub/a.txt" {
		t.Errorf("main changes = %s", got)
	}
	if got := strings.Join(paths(tcs[1].Changes), ","); got != "M sub/a.txt" {
		t.Errorf("game changes = %s", got)
	}
	fcs, err := e.Diff(ctx, "ue", DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fcs) != 2 || fcs[0].Tree != MainTree || fcs[1].Tree != "game" {
		t.Fatalf("diff = %+v", fcs)
	}
	if fcs[1].OldText() != "game a\n" || fcs[1].NewText() != "game a\nedited\n" || fcs[0].OldText() != "" {
		t.Errorf("game diff %q -> %q, main old %q", fcs[1].OldText(), fcs[1].NewText(), fcs[0].OldText())
	}
	if p := Patch(fcs); !strings.Contains(p, "a/game:sub/a.txt") || !strings.Contains(p, "b/sub/a.txt") {
		t.Errorf("patch headers:\n%s", p)
	}
	for _, tc := range []struct {
		o    DiffOptions
		want string
	}{
		{DiffOptions{Paths: []string{"game:sub/a.txt"}}, "game:sub/a.txt"},
		{DiffOptions{Paths: []string{trees["game"] + "/sub"}}, "game:sub/a.txt"},
		{DiffOptions{Paths: []string{"sub/a.txt"}}, "main:sub/a.txt"},
		{DiffOptions{Tree: "game"}, "game:sub/a.txt"},
		{DiffOptions{Tree: "game", Paths: []string{"sub"}}, "game:sub/a.txt"},
	} {
		fcs, err := e.Diff(ctx, "ue", tc.o)
		if err != nil || len(fcs) != 1 || fcs[0].Tree+":"+fcs[0].Path != tc.want {
			t.Errorf("Diff(%+v) = %+v, %v; want %s", tc.o, fcs, err, tc.want)
		}
	}
	for _, o := range []DiffOptions{{Tree: "ddc"}, {Tree: "nope"}, {Paths: []string{"tools:sub"}}, {Tree: "game", Paths: []string{"main:sub"}}} {
		if _, err := e.Diff(ctx, "ue", o); err == nil {
			t.Errorf("Diff(%+v) is not refused", o)
		}
	}
	// Absolute and NAME: operands resolve to their tree, relative ones
	// to the tree the caller stands in.
	for arg, want := range map[string]string{"game:sub/a.txt": "game:sub/a.txt", trees["game"] + "/sub/a.txt": "game:sub/a.txt", "sub/a.txt": "main:sub/a.txt", src + "/sub": "main:sub"} {
		if got, err := ResolveTreePath(e.Paths, w, "/", arg); err != nil || got != want {
			t.Errorf("ResolveTreePath(%s) = %s, %v", arg, got, err)
		}
	}
	if got, err := ResolveTreePath(e.Paths, w, trees["game"]+"/sub", "a.txt"); err != nil || got != "game:sub/a.txt" {
		t.Errorf("relative in the game tree = %s, %v", got, err)
	}
}

// A snapshot freezes every overlay tree; rollback restores them all and
// fork copies the tree list and every tree's upper. Old snapshots (one
// manifest) stay readable, and gc keeps a tree's manifest and objects.
func TestTreesSnapshotRollbackFork(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	multiTreeWorld(t, e, src, trees, "ue")
	run := func(script string) {
		t.Helper()
		if out, code := execIn(t, e, "ue", IsolationSandbox, script); code != 0 {
			t.Fatal(out)
		}
	}
	game := trees["game"]
	run("echo v1 > " + src + "/main.txt && echo v1 > " + game + "/g.txt && rm " + game + "/sub/a.txt")
	s1, err := e.Snapshot(ctx, "ue", SnapshotOptions{Message: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.treeManifestPath(s1.ID, "game")); err != nil {
		t.Fatalf("no manifest of the game tree: %v", err)
	}
	if s1.Files != 2 || s1.Whiteouts != 1 {
		t.Errorf("snapshot counts files %d whiteouts %d, want both trees' (2, 1)", s1.Files, s1.Whiteouts)
	}
	run("echo v2 > " + src + "/main.txt && echo v2 > " + game + "/g.txt && echo back > " + game + "/sub/a.txt && echo new > " + game + "/new.txt")
	w, _ := e.World("ue")
	v, _ := w.TreeView("game")
	if n, err := e.unsavedChanges(ctx, w, mustChanges(t, e, "ue")); err != nil || n < 4 {
		t.Errorf("unsaved changes = %d, %v; want the game tree's counted", n, err)
	}
	deltas, err := e.SnapDiff(ctx, "ue", s1.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	var dp []string
	for _, d := range deltas {
		dp = append(dp, d.Path)
	}
	if got := strings.Join(dp, ","); !strings.Contains(got, "game:g.txt") || !strings.Contains(got, "game:new.txt") || !strings.Contains(got, "main.txt") {
		t.Errorf("snap diff paths = %s", got)
	}

	if _, err := e.Rollback(ctx, "ue", s1.ID, RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	up := e.Paths.UpperOf(v)
	if got := readFile(t, filepath.Join(up, "g.txt")); got != "v1\n" {
		t.Errorf("game g.txt after rollback = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(up, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("game new.txt survived the rollback")
	}
	if got := readFile(t, filepath.Join(e.Paths.Upper("ue"), "main.txt")); got != "v1\n" {
		t.Errorf("main.txt after rollback = %q", got)
	}
	// The session sees the rolled-back trees (the tree was remounted).
	out, _ := execIn(t, e, "ue", IsolationSandbox, "cat "+game+"/g.txt; ls "+game+"/sub; cat "+game+"/new.txt 2>&1")
	if !strings.Contains(out, "v1") || strings.Contains(out, "a.txt") || !strings.Contains(out, "No such file") {
		t.Errorf("after rollback the session sees:\n%s", out)
	}
	if readFile(t, filepath.Join(game, "sub", "a.txt")) != "game a\n" {
		t.Fatal("the host's game tree changed")
	}

	forks, err := e.Fork(ctx, "ue", ForkOptions{N: 1, Snap: s1.ID})
	if err != nil {
		t.Fatal(err)
	}
	f := forks[0]
	if len(f.Trees) != 3 || f.Trees[0].Name != "game" || f.Trees[2].Mode != TreeShared {
		t.Fatalf("fork trees = %+v", f.Trees)
	}
	fv, _ := f.TreeView("game")
	if got := readFile(t, filepath.Join(e.Paths.UpperOf(fv), "g.txt")); got != "v1\n" {
		t.Errorf("fork's game g.txt = %q", got)
	}
	out, _ = execIn(t, e, f.Name, IsolationStrict, "cat "+game+"/g.txt "+src+"/main.txt")
	if out != "v1\nv1\n" {
		t.Errorf("fork sees %q", out)
	}

	// gc keeps the tree manifests of live snapshots.
	if _, err := e.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.treeManifestPath(s1.ID, "game")); err != nil {
		t.Fatalf("gc dropped a live tree manifest: %v", err)
	}
	if bad, err := e.VerifyObjects(ctx); err != nil || len(bad) > 0 {
		t.Fatalf("verify after gc: %v %v", bad, err)
	}
	// restore of a tree's path comes from the tree's manifest into the
	// tree's upper, and leaves the source's edit alone.
	run("echo v3 > " + src + "/main.txt && echo v3 > " + game + "/g.txt")
	if err := e.RestorePaths(ctx, "ue", s1.ID, []string{"game:g.txt"}); err != nil {
		t.Fatalf("restore of a tree path: %v", err)
	}
	if got := readFile(t, filepath.Join(up, "g.txt")); got != "v1\n" {
		t.Errorf("game g.txt after restore = %q", got)
	}
	if got := readFile(t, filepath.Join(e.Paths.Upper("ue"), "main.txt")); got != "v3\n" {
		t.Errorf("the source's main.txt after a game restore = %q", got)
	}
}

// A snapshot of a World made before trees existed (one manifest, no tree
// list) still rolls back and forks.
func TestTreesOldSnapshotsReadable(t *testing.T) {
	e, src := testEngine(t)
	ctx := context.Background()
	mountedWorld(t, e, src, "old")
	if err := os.WriteFile(filepath.Join(e.Paths.Merged("old"), "x.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := e.Snapshot(ctx, "old", SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(e.Paths.Snapshots())
	for _, d := range ents {
		if strings.Contains(d.Name(), "@") {
			t.Fatalf("a World with one tree wrote %s", d.Name())
		}
	}
	if _, err := e.Rollback(ctx, "old", s.ID, RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Fork(ctx, "old", ForkOptions{N: 1, Snap: s.ID}); err != nil {
		t.Fatal(err)
	}
}

// Apply publishes each tree to its own directory; picks name their tree.
func TestTreesApply(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	multiTreeWorld(t, e, src, trees, "ue")
	game := trees["game"]
	if out, code := execIn(t, e, "ue", IsolationSandbox, "echo m > "+src+"/m.txt && echo g > "+game+"/g.txt && echo edited >> "+game+"/sub/a.txt && echo other > "+src+"/other.txt"); code != 0 {
		t.Fatal(out)
	}
	// One pick per tree: only those land, each in its own tree.
	res, err := e.Apply(ctx, "ue", ApplyOptions{Picks: []Pick{{Path: "main:m.txt"}, {Path: "game:sub/a.txt"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trees) != 2 || res.Trees[0].Tree != MainTree || res.Trees[1].Tree != "game" || res.Trees[1].Source != game || res.Trees[1].ID == "" {
		t.Fatalf("trees published = %+v", res.Trees)
	}
	if readFile(t, filepath.Join(src, "m.txt")) != "m\n" || readFile(t, filepath.Join(game, "sub", "a.txt")) != "game a\nedited\n" {
		t.Fatal("picked paths not published")
	}
	for _, p := range []string{filepath.Join(src, "other.txt"), filepath.Join(game, "g.txt"), filepath.Join(src, "sub")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s published without being picked", p)
		}
	}
	// Everything else; a second apply of what landed does nothing new.
	res, err = e.Apply(ctx, "ue", ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(game, "g.txt")) != "g\n" || readFile(t, filepath.Join(src, "other.txt")) != "other\n" {
		t.Fatal("apply of every tree missed a path")
	}
	for _, p := range res.Paths {
		if p.Tree == "" {
			t.Errorf("applied path %s names no tree", p.Path)
		}
	}
	// Picks in a tree that is not an overlay are refused.
	if _, err := e.Apply(ctx, "ue", ApplyOptions{Picks: []Pick{{Path: "ddc:c"}}}); err == nil || !strings.Contains(err.Error(), "shared") {
		t.Errorf("apply in the shared tree = %v", err)
	}
	if _, err := e.Apply(ctx, "ue", ApplyOptions{ToBranch: "x"}); err == nil {
		t.Error("--to-branch over several trees is not refused")
	}
}

// All or nothing across trees: a conflict in the second tree leaves the
// first unpublished, and lists the conflict under its tree.
func TestTreesApplyConflictInOneTreePublishesNone(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	multiTreeWorld(t, e, src, trees, "ue")
	game := trees["game"]
	if out, code := execIn(t, e, "ue", IsolationSandbox, "echo new > "+src+"/d0/f0.txt && echo world > "+game+"/sub/a.txt"); code != 0 {
		t.Fatal(out)
	}
	// The bases are known (status captured them); then the host edits the
	// game tree's file the other way: a conflict in tree 2 only.
	if _, err := e.Diff(ctx, "ue", DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, filepath.Join(src, "d0", "f0.txt"))
	if err := os.WriteFile(filepath.Join(game, "sub", "a.txt"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e.Apply(ctx, "ue", ApplyOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Tree != "game" || ce.Conflicts[0].Path != "sub/a.txt" {
		t.Fatalf("apply = %v (%+v)", err, ce)
	}
	if !strings.Contains(err.Error(), "game:sub/a.txt") {
		t.Errorf("conflict message does not name the tree: %v", err)
	}
	if res == nil || len(res.Trees) != 0 {
		t.Errorf("a refused apply reports publications: %+v", res)
	}
	if got := readFile(t, filepath.Join(src, "d0", "f0.txt")); got != before {
		t.Fatalf("tree 1 was published despite the conflict in tree 2: %q", got)
	}
	if readFile(t, filepath.Join(game, "sub", "a.txt")) != "host\n" {
		t.Fatal("the conflicting tree was written")
	}
	if h, _ := e.History(); len(h) != 0 {
		t.Fatalf("history records %d publications", len(h))
	}
}

// The source of tree 2 changes after every tree was checked and tree 1
// was published: tree 2 is refused on its own, untouched, and the error
// says which trees landed.
func TestTreesApplyPartialWhenASourceMovesBetweenTrees(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	multiTreeWorld(t, e, src, trees, "ue")
	game := trees["game"]
	if out, code := execIn(t, e, "ue", IsolationSandbox, "echo new > "+src+"/d0/f0.txt && echo world > "+game+"/sub/a.txt"); code != 0 {
		t.Fatal(out)
	}
	if _, err := e.Diff(ctx, "ue", DiffOptions{}); err != nil { // bases captured
		t.Fatal(err)
	}
	crashHook = func(point string) {
		if point == "apply.tree" {
			_ = os.WriteFile(filepath.Join(game, "sub", "a.txt"), []byte("host\n"), 0o644)
		}
	}
	defer func() { crashHook = nil }()
	res, err := e.Apply(ctx, "ue", ApplyOptions{})
	var pe *PartialApplyError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPartialApply) || !errors.Is(err, ErrConflict) || pe.Failed != "game" || len(pe.Published) != 1 || pe.Published[0].Tree != MainTree {
		t.Fatalf("apply = %v", err)
	}
	if res == nil || len(res.Trees) != 1 {
		t.Fatalf("result = %+v", res)
	}
	if readFile(t, filepath.Join(src, "d0", "f0.txt")) != "new\n" || readFile(t, filepath.Join(game, "sub", "a.txt")) != "host\n" {
		t.Fatal("tree 1 should be published whole and tree 2 untouched")
	}
	for _, want := range []string{"tree main was published", "tree game could not be"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// The review list (the TUI's Changes pane) names each path's tree, and
// its paths go back into Diff and Apply as they are.
func TestTreesFlatChangesRoundTrip(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	multiTreeWorld(t, e, src, trees, "ue")
	if out, code := execIn(t, e, "ue", IsolationSandbox, "echo m > "+src+"/m.txt && echo g > "+trees["game"]+"/g.txt"); code != 0 {
		t.Fatal(out)
	}
	w, _ := e.World("ue")
	cs, err := e.FlatChanges(ctx, w, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Path != "m.txt" || cs[1].Path != "game:g.txt" {
		t.Fatalf("flat changes = %+v", cs)
	}
	fcs, err := e.Diff(ctx, "ue", DiffOptions{Changes: cs[1:]})
	if err != nil || len(fcs) != 1 || fcs[0].Path != "game:g.txt" || fcs[0].NewText() != "g\n" || fcs[0].Tree != "game" {
		t.Fatalf("diff of game:g.txt = %+v, %v", fcs, err)
	}
	if p := Patch(fcs); !strings.Contains(p, "b/game:g.txt") || strings.Contains(p, "game:game:") {
		t.Errorf("patch:\n%s", p)
	}
	if _, err := e.Apply(ctx, "ue", ApplyOptions{Picks: []Pick{{Path: cs[1].Path, BaseHash: fcs[0].BaseHash, WorldHash: fcs[0].WorldHash}}}); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(trees["game"], "g.txt")) != "g\n" {
		t.Fatal("game:g.txt not published")
	}
	if _, err := os.Lstat(filepath.Join(src, "m.txt")); !os.IsNotExist(err) {
		t.Fatal("m.txt published without a pick")
	}
}

// --drop-applied in a tree drops the path from that tree's upper and
// leaves the tree mounted for the next session.
func TestTreesApplyDropApplied(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	w := multiTreeWorld(t, e, src, trees, "ue")
	game := trees["game"]
	if out, code := execIn(t, e, "ue", IsolationSandbox, "echo g > "+game+"/g.txt && echo m > "+src+"/m.txt"); code != 0 {
		t.Fatal(out)
	}
	res, err := e.Apply(ctx, "ue", ApplyOptions{Picks: []Pick{{Path: "game:g.txt"}}, DropApplied: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || res.Dropped[0] != "game:g.txt" {
		t.Errorf("dropped = %v", res.Dropped)
	}
	v, _ := w.TreeView("game")
	if _, err := os.Lstat(filepath.Join(e.Paths.UpperOf(v), "g.txt")); !os.IsNotExist(err) {
		t.Errorf("g.txt still in the game tree's upper: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(e.Paths.Upper("ue"), "m.txt")); err != nil {
		t.Errorf("the source's upper lost m.txt: %v", err)
	}
	if out, _ := execIn(t, e, "ue", IsolationSandbox, "cat "+game+"/g.txt "+src+"/m.txt"); out != "g\nm\n" {
		t.Errorf("after the drop the session sees %q", out)
	}
}
