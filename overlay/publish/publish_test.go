package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
)

// pubTreeState describes every entry under root (symlinks not followed) as
// "path: type mode content", the way the crash tests compare whole trees.
func pubTreeState(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case info.IsDir():
			out[rel] = fmt.Sprintf("dir %o", info.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky))
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %o %q", info.Mode().Perm(), data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

func pubTreeHash(t testing.TB, root string) string {
	t.Helper()
	return pubStateHash(pubTreeState(t, root))
}

func pubStateHash(state map[string]string) string {
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%s\x00", k, state[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func pubDiffStates(want, got map[string]string) string {
	var b strings.Builder
	for k, v := range want {
		if g, ok := got[k]; !ok {
			fmt.Fprintf(&b, "missing %s (%s)\n", k, v)
		} else if g != v {
			fmt.Fprintf(&b, "%s: want %s, got %s\n", k, v, g)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "extra %s (%s)\n", k, v)
		}
	}
	return b.String()
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// pubAssertClean checks a finished publication left no temp beside any
// target and nothing but lock files in the journal dir.
func pubAssertClean(t *testing.T, root, journalDir string) {
	t.Helper()
	pubAssertCleanState(t, pubTreeState(t, root), journalDir)
}

func pubAssertCleanState(t *testing.T, state map[string]string, journalDir string) {
	t.Helper()
	for p := range state {
		if strings.Contains(p, pubTempPrefix) {
			t.Errorf("temp left in tree: %s", p)
		}
	}
	entries, _ := os.ReadDir(journalDir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), lockSuffix) {
			t.Errorf("left in journal dir: %s", e.Name())
		}
	}
	pending, err := PendingJournals(journalDir)
	if err != nil || len(pending) != 0 {
		t.Errorf("pending journals %v, %v", pending, err)
	}
}

func TestPublishAllKinds(t *testing.T) {
	root, journal, outside := t.TempDir(), t.TempDir(), t.TempDir()
	overlaytest.WriteTree(t, outside, map[string]string{"secret": "outside"})
	overlaytest.WriteTree(t, root, map[string]string{
		"keep.txt":       "keep",
		"edit.txt":       "old",
		"gone.txt":       "bye",
		"link-gone":      "-> keep.txt",
		"link-out":       "-> " + filepath.Join(outside, "secret"),
		"olddir/a":       "a",
		"olddir/sub/b":   "b",
		"was-file":       "file that becomes a dir",
		"was-dir/x":      "x",
		"existing/":      "",
		"existing/f.txt": "f",
	})
	ops := []PublishOp{
		{Path: "edit.txt", Kind: OpWrite, Data: []byte("new"), Mode: 0o600, ExpectHash: sha256Hex([]byte("old"))},
		{Path: "fresh/deep/er/new.sh", Kind: OpWrite, Data: []byte("#!/bin/sh\n"), Mode: 0o755, ExpectAbsent: true},
		{Path: "existing/g.txt", Kind: OpWrite, Data: nil},
		{Path: "existing/ln", Kind: OpSymlink, Target: "../keep.txt"},
		// Writing over a symlink replaces the link; its target stays as it was.
		{Path: "link-out", Kind: OpWrite, Data: []byte("replaced the link")},
		{Path: "newlink", Kind: OpSymlink, Target: "/etc/passwd"},
		{Path: "emptydir", Kind: OpMkdir, Mode: 0o700},
		{Path: "existing", Kind: OpMkdir, Mode: 0o750},
		{Path: "gone.txt", Kind: OpDelete, ExpectHash: sha256Hex([]byte("bye"))},
		{Path: "link-gone", Kind: OpDelete, ExpectHash: sha256Hex([]byte("keep.txt"))},
		{Path: "olddir/a", Kind: OpDelete},
		{Path: "olddir/sub/b", Kind: OpDelete},
		{Path: "olddir/sub", Kind: OpRmdir},
		{Path: "olddir", Kind: OpRmdir},
		{Path: "was-file", Kind: OpDelete},
		{Path: "was-file/inside", Kind: OpWrite, Data: []byte("in")},
		{Path: "was-dir/x", Kind: OpDelete},
		{Path: "was-dir", Kind: OpRmdir},
		{Path: "was-dir", Kind: OpSymlink, Target: "keep.txt"},
		{Path: "never-there", Kind: OpDelete},
	}
	res, err := Publish(context.Background(), root, journal, ops, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"keep.txt":             `file 644 "keep"`,
		"edit.txt":             `file 600 "new"`,
		"fresh":                "dir 755",
		"fresh/deep":           "dir 755",
		"fresh/deep/er":        "dir 755",
		"fresh/deep/er/new.sh": `file 755 "#!/bin/sh\n"`,
		"existing":             "dir 750",
		"existing/f.txt":       `file 644 "f"`,
		"existing/g.txt":       `file 644 ""`,
		"existing/ln":          "link -> ../keep.txt",
		"link-out":             `file 644 "replaced the link"`,
		"newlink":              "link -> /etc/passwd",
		"emptydir":             "dir 700",
		"was-file":             "dir 755",
		"was-file/inside":      `file 644 "in"`,
		"was-dir":              "link -> keep.txt",
	}
	if diff := pubDiffStates(want, pubTreeState(t, root)); diff != "" {
		t.Errorf("tree after publication:\n%s", diff)
	}
	if got := pubTreeState(t, outside); got["secret"] != `file 644 "outside"` {
		t.Errorf("outside file changed: %v", got)
	}
	if res.Written != 5 || res.Linked != 3 || res.Deleted != 6 || res.RmDirs != 3 || res.MadeDirs != 2 {
		t.Errorf("result counts %+v", res)
	}
	if !slices.Equal(res.Unchanged, []string{"never-there"}) {
		t.Errorf("unchanged = %v", res.Unchanged)
	}
	pubAssertClean(t, root, journal)
}

func TestPublishSourceFile(t *testing.T) {
	root, journal, upper := t.TempDir(), t.TempDir(), t.TempDir()
	overlaytest.WriteTree(t, upper, map[string]string{"big": strings.Repeat("x", 1<<20), "evil": "-> /etc/passwd"})
	_, err := Publish(context.Background(), root, journal, []PublishOp{{Path: "big", Kind: OpWrite, SourceFile: filepath.Join(upper, "big"), Mode: 0o640}}, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, info, err := overlay.ReadFileBeneath(root, "big")
	if err != nil || len(data) != 1<<20 || info.Mode().Perm() != 0o640 {
		t.Fatalf("big: %d bytes, %v, %v", len(data), info, err)
	}
	// A symlink where the engine expects an upper file is refused, not followed.
	before := pubTreeHash(t, root)
	_, err = Publish(context.Background(), root, journal, []PublishOp{
		{Path: "ok", Kind: OpWrite, Data: []byte("fine")},
		{Path: "stolen", Kind: OpWrite, SourceFile: filepath.Join(upper, "evil")},
	}, PublishOptions{})
	if err == nil {
		t.Fatal("publishing from a symlinked source file succeeded")
	}
	if pubTreeHash(t, root) != before {
		t.Error("failed publication changed the tree")
	}
	pubAssertClean(t, root, journal)
}

func TestPublishStaleExpectationWritesNothing(t *testing.T) {
	root, journal := t.TempDir(), t.TempDir()
	overlaytest.WriteTree(t, root, map[string]string{"a": "theirs", "b": "b", "c": "c", "d/": ""})
	before := pubTreeState(t, root)
	ops := []PublishOp{
		{Path: "new/x", Kind: OpWrite, Data: []byte("x")},
		{Path: "b", Kind: OpWrite, Data: []byte("b2")},
		{Path: "a", Kind: OpWrite, Data: []byte("ours"), ExpectHash: sha256Hex([]byte("base"))},
		{Path: "c", Kind: OpDelete, ExpectAbsent: true},
		{Path: "d", Kind: OpRmdir, ExpectHash: sha256Hex(nil)},
		{Path: "gone", Kind: OpDelete, ExpectHash: sha256Hex([]byte("x"))},
	}
	_, err := Publish(context.Background(), root, journal, ops, PublishOptions{})
	var stale *StaleError
	if !errors.As(err, &stale) {
		t.Fatalf("want *StaleError, got %v", err)
	}
	got := map[string]string{}
	for _, p := range stale.Paths {
		got[p.Path] = p.Got
	}
	want := map[string]string{"a": sha256Hex([]byte("theirs")), "c": sha256Hex([]byte("c")), "d": "dir", "gone": "absent"}
	if !maps.Equal(got, want) {
		t.Errorf("stale paths %v, want %v", got, want)
	}
	if diff := pubDiffStates(before, pubTreeState(t, root)); diff != "" {
		t.Errorf("stale publication changed the tree:\n%s", diff)
	}
	pubAssertClean(t, root, journal)
}

func TestPublishRejectsBadOps(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	journal := filepath.Join(root, ".strata", "journal")
	overlaytest.WriteTree(t, root, map[string]string{"file": "f", "dir/x": "x", "dir/y": "y"})
	// An empty publication creates the journal dir and lock file up front.
	if _, err := Publish(context.Background(), root, journal, nil, PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	before := pubTreeHash(t, root)
	cases := []struct {
		name    string
		ops     []PublishOp
		invalid bool // wraps ErrInvalidPath
	}{
		{"dotdot", []PublishOp{{Path: "../escape", Kind: OpWrite}}, true},
		{"inner dotdot", []PublishOp{{Path: "dir/../../escape", Kind: OpWrite}}, true},
		{"absolute", []PublishOp{{Path: filepath.Join(outside, "abs"), Kind: OpWrite}}, true},
		{"empty", []PublishOp{{Path: "", Kind: OpWrite}}, true},
		{"empty component", []PublishOp{{Path: "dir//x", Kind: OpWrite}}, true},
		{"trailing slash", []PublishOp{{Path: "dir/", Kind: OpMkdir}}, true},
		{"dot", []PublishOp{{Path: "./file", Kind: OpWrite}}, true},
		{"nul", []PublishOp{{Path: "fi\x00le", Kind: OpWrite}}, true},
		{"reserved temp name", []PublishOp{{Path: "dir/.strata-pub-x-1", Kind: OpDelete}}, true},
		{"journal inside root", []PublishOp{{Path: ".strata/journal/evil.json", Kind: OpWrite}}, true},
		{"journal parent", []PublishOp{{Path: ".strata", Kind: OpRmdir}}, true},
		{"duplicate", []PublishOp{{Path: "file", Kind: OpWrite}, {Path: "file", Kind: OpSymlink, Target: "x"}}, false},
		{"rmdir and mkdir", []PublishOp{{Path: "dir", Kind: OpRmdir}, {Path: "dir", Kind: OpMkdir}}, false},
		{"child of written file", []PublishOp{{Path: "new", Kind: OpWrite}, {Path: "new/child", Kind: OpWrite}}, true},
		{"create in removed dir", []PublishOp{{Path: "dir/x", Kind: OpDelete}, {Path: "dir/y", Kind: OpDelete}, {Path: "dir", Kind: OpRmdir}, {Path: "dir/z", Kind: OpWrite}}, true},
		{"empty symlink target", []PublishOp{{Path: "l", Kind: OpSymlink}}, false},
		{"mode with type bits", []PublishOp{{Path: "m", Kind: OpWrite, Mode: fs.ModeDir | 0o755}}, false},
		{"unknown kind", []PublishOp{{Path: "u", Kind: 42}}, false},
		{"delete a directory", []PublishOp{{Path: "dir", Kind: OpDelete}}, false},
		{"rmdir leaving entries", []PublishOp{{Path: "dir/x", Kind: OpDelete}, {Path: "dir", Kind: OpRmdir}}, false},
		{"rmdir a file", []PublishOp{{Path: "file", Kind: OpRmdir}}, false},
		{"write over a directory", []PublishOp{{Path: "dir", Kind: OpWrite}}, false},
		{"write under a file", []PublishOp{{Path: "file/x", Kind: OpWrite}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := append([]PublishOp{{Path: "harmless", Kind: OpWrite, Data: []byte("h")}}, tc.ops...)
			_, err := Publish(context.Background(), root, journal, ops, PublishOptions{})
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.invalid && !errors.Is(err, overlay.ErrInvalidPath) {
				t.Errorf("want ErrInvalidPath, got %v", err)
			}
			if got := pubTreeHash(t, root); got != before {
				t.Errorf("rejected publication changed the tree: %v", pubTreeState(t, root))
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("outside dir got %d entries", len(entries))
	}
}

// A symlink in the source used as a directory is never walked through, for
// writes, deletes and reads, with openat2 and with its fallback.
func TestPublishSymlinkedIntermediateDir(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			overlay.Openat2Missing.Store(fallback)
			t.Cleanup(func() { overlay.Openat2Missing.Store(false) })
			root, journal, outside := t.TempDir(), t.TempDir(), t.TempDir()
			overlaytest.WriteTree(t, outside, map[string]string{"passwd": "root:x:0:0", "sub/f": "f"})
			overlaytest.WriteTree(t, root, map[string]string{"etc": "-> " + outside, "real/link": "-> " + outside, "ok": "ok"})
			outsideBefore, rootBefore := pubTreeHash(t, outside), pubTreeHash(t, root)
			for _, ops := range [][]PublishOp{
				{{Path: "etc/passwd", Kind: OpWrite, Data: []byte("pwned")}},
				{{Path: "etc/newfile", Kind: OpWrite, Data: []byte("pwned")}},
				{{Path: "real/link/sub/f", Kind: OpWrite, Data: []byte("pwned")}},
				{{Path: "etc/passwd", Kind: OpDelete}},
				{{Path: "etc/evil", Kind: OpSymlink, Target: "/"}},
				{{Path: "etc/newdir", Kind: OpMkdir}},
				{{Path: "ok", Kind: OpWrite, Data: []byte("x")}, {Path: "etc/sub/f", Kind: OpDelete}},
			} {
				_, err := Publish(context.Background(), root, journal, ops, PublishOptions{})
				if !errors.Is(err, overlay.ErrUnsafePath) {
					t.Errorf("%s %s: want ErrUnsafePath, got %v", ops[len(ops)-1].Kind, ops[len(ops)-1].Path, err)
				}
			}
			if pubTreeHash(t, outside) != outsideBefore || pubTreeHash(t, root) != rootBefore {
				t.Error("a refused publication changed something")
			}
			if _, _, err := overlay.ReadFileBeneath(root, "etc/passwd"); !errors.Is(err, overlay.ErrUnsafePath) {
				t.Errorf("ReadFileBeneath through link: %v", err)
			}
			if _, err := overlay.LstatBeneath(root, "etc/sub"); !errors.Is(err, overlay.ErrUnsafePath) {
				t.Errorf("LstatBeneath through link: %v", err)
			}
			if _, err := overlay.OpenBeneath(root, "etc"); !errors.Is(err, overlay.ErrUnsafePath) {
				t.Errorf("OpenBeneath of a link: %v", err)
			}
			// The link itself can be described and replaced: it is deleted, not followed.
			info, err := overlay.LstatBeneath(root, "etc")
			if err != nil || info.Mode()&fs.ModeSymlink == 0 {
				t.Fatalf("LstatBeneath(etc) = %v, %v", info, err)
			}
			if target, err := overlay.ReadlinkBeneath(root, "etc"); err != nil || target != outside {
				t.Errorf("ReadlinkBeneath = %q, %v", target, err)
			}
			_, err = Publish(context.Background(), root, journal, []PublishOp{
				{Path: "etc", Kind: OpDelete},
				{Path: "etc/passwd", Kind: OpWrite, Data: []byte("mine")},
			}, PublishOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := pubTreeState(t, root)["etc/passwd"]; got != `file 644 "mine"` || pubTreeHash(t, outside) != outsideBefore {
				t.Errorf("replacing the link: etc/passwd %s, outside changed %v", got, pubTreeHash(t, outside) != outsideBefore)
			}
		})
	}
}

// The source directory a publication writes into is swapped for a symlink
// to an outside directory at each stage of the publication.
func TestPublishDirSwappedDuringPublication(t *testing.T) {
	for _, stage := range []string{"validated", "prepared", "committed"} {
		t.Run(stage, func(t *testing.T) {
			base := t.TempDir()
			root, journal := filepath.Join(base, "root"), filepath.Join(base, "journal")
			outside, stash := filepath.Join(base, "outside"), filepath.Join(base, "stash")
			overlaytest.WriteTree(t, root, map[string]string{"src/a.c": "old a", "src/b.c": "old b", "top": "top"})
			overlaytest.WriteTree(t, outside, map[string]string{"a.c": "outside a"})
			outsideBefore := pubTreeState(t, outside)
			ops := []PublishOp{
				{Path: "src/a.c", Kind: OpWrite, Data: []byte("new a")},
				{Path: "src/new/c.c", Kind: OpWrite, Data: []byte("new c")},
				{Path: "src/b.c", Kind: OpDelete},
				{Path: "top", Kind: OpWrite, Data: []byte("new top")},
			}
			publishTestHook = func(s string) {
				if s != stage {
					return
				}
				// The attacker moves the real directory away and plants a link.
				if err := os.Rename(filepath.Join(root, "src"), stash); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(outside, filepath.Join(root, "src")); err != nil {
					t.Error(err)
				}
			}
			t.Cleanup(func() { publishTestHook = nil })
			_, err := Publish(context.Background(), root, journal, ops, PublishOptions{})
			publishTestHook = nil
			if !errors.Is(err, overlay.ErrUnsafePath) {
				t.Fatalf("want ErrUnsafePath, got %v", err)
			}
			if diff := pubDiffStates(outsideBefore, pubTreeState(t, outside)); diff != "" {
				t.Errorf("the symlink's target changed:\n%s", diff)
			}
			stashState := pubTreeState(t, stash)
			if stage != "committed" {
				// Not committed: undone, so the moved directory holds exactly what it held.
				want := map[string]string{"a.c": `file 644 "old a"`, "b.c": `file 644 "old b"`}
				if diff := pubDiffStates(want, stashState); diff != "" {
					t.Errorf("moved directory:\n%s", diff)
				}
				if got := pubTreeState(t, root)["top"]; got != `file 644 "top"` {
					t.Errorf("top = %s", got)
				}
				pubAssertClean(t, root, journal)
				return
			}
			// Committed: the journal stays; recovery refuses to walk the link
			// until the directory is back, then rolls forward to all-new.
			if !errors.Is(err, ErrIncomplete) {
				t.Errorf("want ErrIncomplete, got %v", err)
			}
			pending, _ := PendingJournals(journal)
			if len(pending) != 1 || pending[0].State != stateCommitted {
				t.Fatalf("pending = %+v", pending)
			}
			if _, err := Recover(context.Background(), journal, []string{root}); !errors.Is(err, overlay.ErrUnsafePath) {
				t.Errorf("recover through the link: %v", err)
			}
			if diff := pubDiffStates(outsideBefore, pubTreeState(t, outside)); diff != "" {
				t.Errorf("recovery changed the link's target:\n%s", diff)
			}
			if err := os.Remove(filepath.Join(root, "src")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(stash, filepath.Join(root, "src")); err != nil {
				t.Fatal(err)
			}
			reports, err := Recover(context.Background(), journal, []string{root})
			if err != nil || len(reports) != 1 || reports[0].Action != actionForward {
				t.Fatalf("recover: %+v, %v", reports, err)
			}
			want := map[string]string{
				"src": "dir 755", "src/a.c": `file 644 "new a"`, "src/new": "dir 755", "src/new/c.c": `file 644 "new c"`,
				"top": `file 644 "new top"`,
			}
			if diff := pubDiffStates(want, pubTreeState(t, root)); diff != "" {
				t.Errorf("after recovery:\n%s", diff)
			}
			pubAssertClean(t, root, journal)
		})
	}
}

func TestPublishSerializedByLock(t *testing.T) {
	root, journal := t.TempDir(), t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each writes its own file and the shared one; the lock keeps
			// every publication whole (the race detector watches the rest).
			ops := []PublishOp{
				{Path: fmt.Sprintf("w%d/file", i), Kind: OpWrite, Data: []byte{byte(i)}},
				{Path: "shared", Kind: OpWrite, Data: []byte(strings.Repeat(string(rune('a'+i)), 100))},
			}
			_, errs[i] = Publish(context.Background(), root, journal, ops, PublishOptions{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("publication %d: %v", i, err)
		}
	}
	state := pubTreeState(t, root)
	if len(state) != 8*2+1 {
		t.Errorf("tree has %d entries", len(state))
	}
	pubAssertClean(t, root, journal)

	// A held lock makes a publication wait, and give up when its ctx ends.
	unlock, err := LockRoot(context.Background(), RootLockPath(mustCanonical(t, journal), mustCanonical(t, root)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Publish(ctx, root, journal, []PublishOp{{Path: "late", Kind: OpWrite}}, PublishOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 90*time.Millisecond {
		t.Errorf("publication under a held lock: %v after %v", err, time.Since(start))
	}
	unlock()
	if _, err := Publish(context.Background(), root, journal, []PublishOp{{Path: "late", Kind: OpWrite}}, PublishOptions{}); err != nil {
		t.Errorf("after unlock: %v", err)
	}
}

func mustCanonical(t *testing.T, dir string) string {
	t.Helper()
	c, err := fsx.CanonicalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPublishSyncFSMode(t *testing.T) {
	root, journal := t.TempDir(), t.TempDir()
	overlaytest.WriteTree(t, root, map[string]string{"a": "a", "d/x": "x"})
	_, err := Publish(context.Background(), root, journal, []PublishOp{
		{Path: "a", Kind: OpWrite, Data: []byte("A")},
		{Path: "n/m/f", Kind: OpWrite, Data: []byte("f")},
		{Path: "d/x", Kind: OpDelete},
		{Path: "d", Kind: OpRmdir},
	}, PublishOptions{Sync: SyncFS})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": `file 644 "A"`, "n": "dir 755", "n/m": "dir 755", "n/m/f": `file 644 "f"`}
	if diff := pubDiffStates(want, pubTreeState(t, root)); diff != "" {
		t.Error(diff)
	}
	pubAssertClean(t, root, journal)
}
