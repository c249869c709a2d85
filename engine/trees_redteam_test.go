package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stratahq/strata/engine/boundary"
)

// A hostile command tries every route it can think of to the host copy of an
// overlay tree (and a read-only one): through /proc (its own root, pid 1's,
// every visible process's), '..' out of the shared tree, a symlink planted in
// the shared tree, hard links across trees, a rename across trees, every mount
// whose root is the tree's host dir, the state root's merged dir. None may
// change the host's game or tools dir.
func TestRedteamTreesHostDirRoutes(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	for _, iso := range []Isolation{IsolationTree, IsolationSandbox, IsolationStrict} {
		t.Run(string(iso), func(t *testing.T) {
			name := "rt-" + string(iso)
			w := multiTreeWorld(t, e, src, trees, name)
			v, _ := w.TreeView("game")
			game, tools, ddc := trees["game"], trees["tools"], trees["ddc"]
			devino := func(p string) string {
				var st syscall.Stat_t
				if err := syscall.Stat(p, &st); err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
			}
			// The host dirs' identities (stat -c %d:%i): a session that finds
			// a dir with one of them has found the host's copy.
			hostCopy := strings.NewReplacer("GAMEID", devino(game), "TOOLSID", devino(tools), "GAME", game, "TOOLS", tools, "DDC", ddc, "MERGED", e.Paths.MergedOf(v), "STATE", e.Paths.Root).Replace(`
try() { f=$1; shift; (echo pwned > "$f") 2>/dev/null && echo "WROTE $f"; }
# every mount point, and under it every tail of a tree's path (a bind of an
# ancestor left by the mount plan): the host's dir is the one with its dev:ino
for pair in GAME=GAMEID TOOLS=TOOLSID; do
  t=${pair%%=*}; id=${pair#*=}
  for m in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do
    s=$t
    while [ -n "$s" ]; do
      c=$m/${s#/}
      [ "$m" = / ] && c=/${s#/}
      if [ -d "$c" ] && [ "$(stat -c %d:%i "$c" 2>/dev/null)" = "$id" ]; then echo "HOSTCOPY $c"; try "$c/r-hostcopy"; fi
      n=${s#/*/}; [ "$n" = "$s" ] && break; s=/$n
    done
  done
done`)
			script := hostCopy + strings.NewReplacer("GAME", game, "TOOLS", tools, "DDC", ddc, "MERGED", e.Paths.MergedOf(v), "STATE", e.Paths.Root).Replace(`
try() { f=$1; shift; (echo pwned > "$f") 2>/dev/null && echo "WROTE $f"; }
for t in GAME TOOLS; do
  b=$(basename $t)
  try /proc/self/root$t/r-self-$b
  try /proc/1/root$t/r-pid1-$b
  try /proc/1/cwd/../../../../../../../..$t/r-cwd1-$b
  for p in /proc/[0-9]*; do try $p/root$t/r-pid-$b; done
  try DDC/../$b/r-dotdot-$b
  ln -s $t DDC/lnk-$b 2>/dev/null; try DDC/lnk-$b/r-symlink-$b
  ln -s /proc/1/root$t DDC/plnk-$b 2>/dev/null; try DDC/plnk-$b/r-psymlink-$b
  ln $t/sub/a.txt DDC/hl-$b 2>/dev/null && echo "LINKED $b" && (echo pwned >> DDC/hl-$b) 2>/dev/null
  ln DDC/sub/a.txt $t/hl-in-$b 2>/dev/null
  echo x > DDC/mv-$b 2>/dev/null; mv DDC/mv-$b $t/r-mv-$b 2>/dev/null
  mv $t/sub/a.txt DDC/moved-$b 2>/dev/null
  unshare -Urm sh -c "umount -l $t 2>/dev/null; echo pwned > $t/r-userns-$b" 2>/dev/null && echo "USERNS $b"
  # every mount in this namespace whose root is the tree's host dir
  awk -v d="$t" '$4==d || index($4, d"/")==1 {print $5}' /proc/self/mountinfo | while read m; do try "$m/r-mnt-$b"; done
done
try MERGED/r-merged
( cd GAME && cd .. && try game/r-cd-up )
for d in $(awk '{print $5}' /proc/self/mountinfo | grep -v '^/proc' ); do :; done
true`)
			out, code := execIn(t, e, name, iso, script)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			t.Logf("%s:\n%s", iso, out)
			// The probe works: it finds the read-only tree's host dir (bound
			// read-only at its path), and never the overlay tree's.
			if !strings.Contains(out, "HOSTCOPY "+tools+"\n") {
				t.Errorf("the dev:ino probe did not find the read-only tree at its path:\n%s", out)
			}
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "HOSTCOPY ") && !strings.HasPrefix(l, "HOSTCOPY "+tools) {
					t.Errorf("the session reaches the game tree's host dir: %s", l)
				}
				if strings.HasPrefix(l, "WROTE") && strings.Contains(l, "r-hostcopy") {
					t.Errorf("the session wrote a tree's host dir: %s", l)
				}
			}
			for _, dir := range []string{game, tools} {
				b := filepath.Base(dir)
				if got := readFile(t, filepath.Join(dir, "sub", "a.txt")); got != b+" a\n" {
					t.Errorf("host %s/sub/a.txt = %q", b, got)
				}
				ents, _ := os.ReadDir(dir)
				for _, en := range ents {
					if en.Name() != "sub" {
						t.Errorf("host %s tree got %s", b, en.Name())
					}
				}
			}
		})
	}
}

// snapshotDir is every path under dir with its content or link target, for
// "nothing was written" checks.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			b.WriteString(rel + " -> " + l + "\n")
		case fi.Mode().IsRegular():
			c, _ := os.ReadFile(p)
			b.WriteString(rel + ": " + string(c))
		default:
			b.WriteString(rel + "/\n")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Apply across trees, as a hostile agent would set it up: a symlink in the
// source's upper pointing into the game tree's host dir (published as a
// link, never followed), and a directory of that name that the agent then
// fills; pick operands climbing out of a tree (game:../x), absolute ones
// outside it (game:/abs) or of another tree, names that look like paths.
// Each is refused or published as a link; the game tree is never written
// through the source's apply.
func TestRedteamTreesApplyAcrossTrees(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	multiTreeWorld(t, e, src, trees, "ue")
	game := trees["game"]
	if out, code := execIn(t, e, "ue", IsolationSandbox, "ln -s "+game+"/sub "+src+"/evil && ln -s ../game "+src+"/rel && echo g > "+game+"/g.txt"); code != 0 {
		t.Fatal(out)
	}
	before := snapshotDir(t, game)
	for _, p := range []string{"game:../x", "game:../src/evil", "game:/etc/passwd", "game:" + src + "/evil", "main:../game/sub/a.txt", "main:" + game + "/g.txt", "../game/g.txt", "evil/a.txt"} {
		if _, err := e.Apply(ctx, "ue", ApplyOptions{Picks: []Pick{{Path: p}}}); err == nil {
			t.Errorf("apply %q was not refused", p)
		}
		if got := snapshotDir(t, game); got != before {
			t.Fatalf("apply %q wrote the game tree:\n%s", p, got)
		}
	}
	if _, err := os.Lstat(filepath.Join(src, "evil")); !os.IsNotExist(err) {
		t.Fatalf("a refused pick published the source's link: %v", err)
	}
	// The links themselves publish as links into the source.
	if _, err := e.Apply(ctx, "ue", ApplyOptions{Picks: []Pick{{Path: "evil"}, {Path: "rel"}}}); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(src, "evil")); err != nil || l != game+"/sub" {
		t.Fatalf("source evil = %q, %v", l, err)
	}
	if got := snapshotDir(t, game); got != before {
		t.Fatalf("publishing a link wrote the game tree:\n%s", got)
	}
	// Now the agent writes through the published link: in its World that
	// is the game tree's view, so the change is game's, and the source's
	// apply has nothing to publish through the link.
	if out, code := execIn(t, e, "ue", IsolationSandbox, "echo through > "+src+"/evil/through.txt; echo through2 > "+src+"/rel/through2.txt; true"); code != 0 {
		t.Fatal(out)
	}
	w, _ := e.World("ue")
	tcs, err := e.ChangesByTree(ctx, w, false, MainTree)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tcs[0].Changes {
		t.Errorf("the source has a change %s %s after writing through a link", c.Kind.Letter(), c.Path)
	}
	if got := snapshotDir(t, game); got != before {
		t.Fatalf("writing through a link wrote the host game tree:\n%s", got)
	}
}

// A tree's host dir replaced by a symlink after new (to a decoy, or to the
// World's own source): exec, status, diff and apply of the World refuse with
// a message naming the tree, and nothing is written to either place.
func TestRedteamTreeDirReplacedBySymlink(t *testing.T) {
	e, src, game, decoy := gameTreeMovedAside(t)
	ctx := context.Background()
	for _, target := range []string{decoy, src} {
		_ = os.Remove(game)
		if err := os.Symlink(target, game); err != nil {
			t.Fatal(err)
		}
		beforeT, beforeR := snapshotDir(t, target), snapshotDir(t, game+".real")
		_, err := e.Exec(ctx, "ue", ExecOptions{Argv: []string{"/bin/true"}, Env: []string{defaultPath}, Isolation: IsolationSandbox, Network: boundary.NetworkNone})
		if err == nil || !strings.Contains(err.Error(), game) {
			t.Errorf("exec with game -> %s = %v, want a refusal naming %s", target, err, game)
		}
		w, _ := e.World("ue")
		_, err = e.ChangesByTree(ctx, w, false, "")
		t.Logf("status: %v", err)
		if err == nil {
			t.Errorf("status with game -> %s not refused", target)
		}
		_, err = e.Diff(ctx, "ue", DiffOptions{})
		t.Logf("diff: %v", err)
		if err == nil {
			t.Errorf("diff with game -> %s not refused", target)
		}
		_, err = e.Apply(ctx, "ue", ApplyOptions{})
		t.Logf("apply: %v", err)
		if !errors.Is(err, ErrSourceMissing) || !strings.Contains(err.Error(), "tree game") {
			t.Errorf("apply with game -> %s = %v, want a refusal naming %s", target, err, game)
		}
		if got := snapshotDir(t, target); got != beforeT {
			t.Errorf("game -> %s: the link's target was written:\n%s", target, got)
		}
		if got := snapshotDir(t, game+".real"); got != beforeR {
			t.Errorf("game -> %s: the real game dir was written:\n%s", target, got)
		}
	}
}

// The source holds a link into the game tree (published earlier, or made
// by a person); the World replaces it with a real directory holding a
// file of the same name as one in the game tree. Apply replaces the link
// with the directory in the source and never writes through it into the
// game tree.
func TestRedteamApplyOverALinkIntoAnotherTree(t *testing.T) {
	e, src, trees := multiTreeEngine(t)
	ctx := context.Background()
	game := trees["game"]
	if err := os.Symlink(game+"/sub", filepath.Join(src, "evil")); err != nil {
		t.Fatal(err)
	}
	multiTreeWorld(t, e, src, trees, "ue")
	if out, code := execIn(t, e, "ue", IsolationSandbox, "rm "+src+"/evil && mkdir "+src+"/evil && echo pwned > "+src+"/evil/a.txt"); code != 0 {
		t.Fatal(out)
	}
	before := snapshotDir(t, game)
	if _, err := e.Apply(ctx, "ue", ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := snapshotDir(t, game); got != before {
		t.Fatalf("apply wrote the game tree through the source's link:\n%s", got)
	}
	fi, err := os.Lstat(filepath.Join(src, "evil"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("source evil after apply: %v %v", fi, err)
	}
	if got := readFile(t, filepath.Join(src, "evil", "a.txt")); got != "pwned\n" {
		t.Fatalf("source evil/a.txt = %q", got)
	}
}

// Fork of a World whose game tree's dir became a link to a decoy: refused,
// no World made (it made a fork whose game tree was the decoy, carrying
// the game tree's changes over a different lower).
func TestRedteamForkRefusesATreeTurnedLink(t *testing.T) {
	e, _, game, decoy := gameTreeMovedAside(t)
	ctx := context.Background()
	if err := os.Symlink(decoy, game); err != nil {
		t.Fatal(err)
	}
	_, err := e.Fork(ctx, "ue", ForkOptions{N: 1, Names: []string{"fz"}})
	if !errors.Is(err, ErrSourceMissing) || !strings.Contains(err.Error(), "tree game") {
		t.Fatalf("fork with the game tree a link = %v", err)
	}
	if _, err := os.Lstat(e.Paths.World("fz")); !os.IsNotExist(err) {
		t.Fatalf("a refused fork made a World: %v", err)
	}
}

// gameTreeMovedAside makes World ue with trees, writes its game tree, then
// moves the game tree's host dir aside (to game.real) and makes a decoy
// beside it, for a test to put a link at the game tree's path.
func gameTreeMovedAside(t *testing.T) (e *Engine, src, game, decoy string) {
	t.Helper()
	e, src, trees := multiTreeEngine(t)
	multiTreeWorld(t, e, src, trees, "ue")
	game = trees["game"]
	if out, code := execIn(t, e, "ue", IsolationSandbox, "echo g > "+game+"/g.txt"); code != 0 {
		t.Fatal(out)
	}
	decoy = filepath.Join(filepath.Dir(game), "decoy")
	if err := os.MkdirAll(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(game, game+".real"); err != nil {
		t.Fatal(err)
	}
	return e, src, game, decoy
}
