package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			script := strings.NewReplacer("GAME", game, "TOOLS", tools, "DDC", ddc, "MERGED", e.Paths.MergedOf(v), "STATE", e.Paths.Root).Replace(`
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
