package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

// pubCrash is the panic value the in-process crash hook throws.
type pubCrash struct{ step int }

// publishCrashingAt runs fn with publishHook panicking at step k, reporting
// whether it crashed (k beyond the last step lets fn finish).
func publishCrashingAt(t *testing.T, k int, fn func()) (crashed bool) {
	t.Helper()
	defer func(n int) { parallelSteps = n }(parallelSteps)
	parallelSteps = 1
	publishHook = func(step int) {
		if step == k {
			panic(pubCrash{step})
		}
	}
	defer func() {
		publishHook = nil
		if r := recover(); r != nil {
			if _, ok := r.(pubCrash); !ok {
				panic(r)
			}
			crashed = true
		}
	}()
	fn()
	return false
}

var sweepTree = map[string]string{
	"edit":        "old",
	"gone":        "bye",
	"link":        "-> edit",
	"d/x":         "x",
	"d/e/y":       "y",
	"filedir":     "becomes a dir",
	"dirfile/z":   "z",
	"keep/k":      "k",
	"keep/sub/ss": "ss",
	"dirlink/w":   "w",
}

var sweepOps = []PublishOp{
	{Path: "edit", Kind: OpWrite, Data: []byte("new"), Mode: 0o600, ExpectHash: sha256Hex([]byte("old"))},
	{Path: "gone", Kind: OpDelete},
	{Path: "link", Kind: OpSymlink, Target: "keep/k"},
	{Path: "d/x", Kind: OpDelete},
	{Path: "d/e/y", Kind: OpDelete},
	{Path: "d/e", Kind: OpRmdir},
	{Path: "d", Kind: OpRmdir},
	{Path: "filedir", Kind: OpDelete},
	{Path: "filedir/in", Kind: OpWrite, Data: []byte("in")},
	{Path: "dirfile/z", Kind: OpDelete},
	{Path: "dirfile", Kind: OpRmdir},
	{Path: "dirfile", Kind: OpWrite, Data: []byte("now a file")},
	{Path: "keep/n1", Kind: OpWrite, Data: []byte("n1")},
	{Path: "keep/sub/n2", Kind: OpSymlink, Target: "../k"},
	{Path: "keep/sub", Kind: OpMkdir, Mode: 0o711},
	{Path: "new/a/b/c", Kind: OpWrite, Data: []byte("c")},
	{Path: "new/a/m", Kind: OpMkdir, Mode: 0o500},
	{Path: "new2", Kind: OpMkdir},
	{Path: "dirlink/w", Kind: OpDelete},
	{Path: "dirlink", Kind: OpRmdir},
	{Path: "dirlink", Kind: OpSymlink, Target: "keep"},
}

// Every step of a small publication of every op kind is a crash point; so is
// every step of the recovery that follows one, and recovery after that must
// still reach the all-new state.
func TestPublishCrashAtEveryStepInProcess(t *testing.T) {
	ctx := context.Background()
	total, outcomes := crashSweep(t, sweepTree, sweepOps, func(k int, root, journal string) {
		// Crash the recovery too, at each of its steps in turn, until one run finishes.
		for rk := 1; ; rk++ {
			var rerr error
			if !publishCrashingAt(t, rk, func() { _, rerr = Recover(ctx, journal, []string{root}) }) {
				if rerr != nil {
					t.Fatalf("step %d: recover: %v", k, rerr)
				}
				return
			}
			if rk > 1000 {
				t.Fatalf("step %d: recovery never finishes", k)
			}
		}
	})
	if total < 20 {
		t.Fatalf("only %d steps", total)
	}
	if outcomes["old"] == 0 || outcomes["new"] == 0 {
		t.Errorf("sweep never reached one side: %v", outcomes)
	}
}

// crashSweep publishes ops over tree once to count its steps, then once per
// step crashing there, runs recoverAll on what is left, and checks the tree
// is exactly the old or the new one with nothing left behind. It returns
// the step count and how many crash points ended old and new.
func crashSweep(t *testing.T, tree map[string]string, ops []PublishOp, recoverAll func(k int, root, journal string)) (int, map[string]int) {
	t.Helper()
	ctx := context.Background()
	base := t.TempDir()
	oldRoot, newRoot := filepath.Join(base, "old"), filepath.Join(base, "new")
	overlaytest.WriteTree(t, oldRoot, tree)
	overlaytest.WriteTree(t, newRoot, tree)
	oldHash := pubTreeHash(t, oldRoot)
	var maxStep atomic.Int64
	publishHook = func(step int) { maxStep.Store(max(maxStep.Load(), int64(step))) }
	_, err := Publish(ctx, newRoot, filepath.Join(base, "j-new"), ops, PublishOptions{})
	publishHook = nil
	total := int(maxStep.Load())
	if err != nil {
		t.Fatal(err)
	}
	newHash := pubTreeHash(t, newRoot)
	outcomes := map[string]int{}
	for k := 1; k <= total; k++ {
		root, journal := filepath.Join(base, "r", "root"), filepath.Join(base, "r", "journal")
		os.RemoveAll(filepath.Join(base, "r"))
		overlaytest.WriteTree(t, root, tree)
		if !publishCrashingAt(t, k, func() { _, _ = Publish(ctx, root, journal, ops, PublishOptions{}) }) {
			t.Fatalf("step %d: no crash", k)
		}
		recoverAll(k, root, journal)
		switch pubTreeHash(t, root) {
		case oldHash:
			outcomes["old"]++
		case newHash:
			outcomes["new"]++
		default:
			t.Fatalf("crash at step %d of %d: tree is neither old nor new:\n%s", k, total, pubDiffStates(pubTreeState(t, newRoot), pubTreeState(t, root)))
		}
		pubAssertClean(t, root, journal)
	}
	t.Logf("%d crash points: %v", total, outcomes)
	return total, outcomes
}

func TestRecoverCorruptJournalChangesNothing(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, journal := filepath.Join(base, "root"), filepath.Join(base, "journal")
	overlaytest.WriteTree(t, root, sweepTree)
	// Crash right after the commit, so a real journal with pending steps exists.
	publishTestHook = func(stage string) {
		if stage == "committed" {
			panic(pubCrash{})
		}
	}
	func() {
		defer func() { _ = recover(); publishTestHook = nil }()
		// The panic fires on the publishing goroutine, before any parallel step.
		_, _ = Publish(ctx, root, journal, sweepOps, PublishOptions{})
	}()
	pending, err := PendingJournals(journal)
	if err != nil || len(pending) != 1 || pending[0].State != stateCommitted || pending[0].Steps == 0 {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	jpath := pending[0].Path
	good, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	before := pubTreeState(t, root)
	for name, corrupt := range map[string][]byte{
		"truncated": good[:len(good)/2],
		"garbage":   []byte("\x00\x01not json"),
		"tampered":  []byte(strings.Replace(string(good), `"op":"delete"`, `"op":"rmdir"`, 1)),
		"empty":     nil,
	} {
		if err := os.WriteFile(jpath, corrupt, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Recover(ctx, journal, []string{root})
		var cj *CorruptJournalError
		if !errors.As(err, &cj) || cj.Path != jpath {
			t.Errorf("%s: want *CorruptJournalError naming %s, got %v", name, jpath, err)
		}
		if diff := pubDiffStates(before, pubTreeState(t, root)); diff != "" {
			t.Errorf("%s: recovery of a corrupt journal changed the tree:\n%s", name, diff)
		}
		if _, err := os.Stat(jpath); err != nil {
			t.Errorf("%s: corrupt journal removed: %v", name, err)
		}
		if p, _ := PendingJournals(journal); len(p) != 1 || p[0].State != stateCorrupt || p[0].Err == "" {
			t.Errorf("%s: doctor sees %+v", name, p)
		}
		// Publishing to the root is refused while its journal is unreadable.
		if _, err := Publish(ctx, root, journal, []PublishOp{{Path: "x", Kind: OpWrite}}, PublishOptions{}); !errors.As(err, &cj) {
			t.Errorf("%s: publish over a corrupt journal: %v", name, err)
		}
	}
	// Restored, the journal rolls forward.
	if err := os.WriteFile(jpath, good, 0o600); err != nil {
		t.Fatal(err)
	}
	reports, err := Recover(ctx, journal, []string{root})
	if err != nil || len(reports) != 1 || reports[0].Action != actionForward || reports[0].Done == 0 {
		t.Fatalf("recover: %+v, %v", reports, err)
	}
	want := filepath.Join(base, "want")
	overlaytest.WriteTree(t, want, sweepTree)
	if _, err := Publish(ctx, want, filepath.Join(base, "j2"), sweepOps, PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := pubDiffStates(pubTreeState(t, want), pubTreeState(t, root)); diff != "" {
		t.Errorf("after recovery:\n%s", diff)
	}
	pubAssertClean(t, root, journal)
}

// A tampered intent must not steer cleanup at files that are not temps.
func TestRecoverRejectsTamperedIntent(t *testing.T) {
	base := t.TempDir()
	root, journal := filepath.Join(base, "root"), filepath.Join(base, "journal")
	overlaytest.WriteTree(t, root, map[string]string{"precious": "p"})
	if err := os.MkdirAll(journal, 0o700); err != nil {
		t.Fatal(err)
	}
	id := rootHash(root) + "-0011223344556677"
	body := `{"version":1,"id":"` + id + `","root":"` + root + `","temps":[{"path":"precious"}]}`
	ipath := filepath.Join(journal, id+intentSuffix)
	if err := os.WriteFile(ipath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Recover(context.Background(), journal, []string{root})
	var cj *CorruptJournalError
	if !errors.As(err, &cj) || cj.Path != ipath {
		t.Fatalf("want *CorruptJournalError for %s, got %v", ipath, err)
	}
	if _, err := os.Stat(filepath.Join(root, "precious")); err != nil {
		t.Errorf("precious file removed: %v", err)
	}
}

func TestRecoverEmptyOrMissingJournalDir(t *testing.T) {
	reports, err := Recover(context.Background(), filepath.Join(t.TempDir(), "none"), nil)
	if err != nil || len(reports) != 0 {
		t.Errorf("missing dir: %v, %v", reports, err)
	}
	pending, err := PendingJournals(t.TempDir())
	if err != nil || len(pending) != 0 {
		t.Errorf("empty dir: %v, %v", pending, err)
	}
}
