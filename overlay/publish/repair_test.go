package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

// crashAfterCommit leaves a real committed journal whose steps have not run:
// every temp is staged in root, nothing renamed yet.
func crashAfterCommit(t *testing.T, root, journal string) JournalInfo {
	t.Helper()
	publishTestHook = func(stage string) {
		if stage == "committed" {
			panic(pubCrash{})
		}
	}
	func() {
		defer func() { _ = recover(); publishTestHook = nil }()
		_, _ = Publish(context.Background(), root, journal, sweepOps, PublishOptions{})
	}()
	pending, err := PendingJournals(journal)
	if err != nil || len(pending) != 1 || pending[0].State != stateCommitted {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	return pending[0]
}

// stagedTemps lists the .strata-pub-* entries under root.
func stagedTemps(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), pubTempPrefix) {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	return out
}

// A staged file changed after the commit (bit rot, a hostile hand) must not
// be published: recovery refuses it, and the repair discards the whole
// publication, leaving the tree all-old with no temp behind.
func TestRepairDoesNotRollForwardTamperedTemp(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, journal := filepath.Join(base, "root"), filepath.Join(base, "journal")
	overlaytest.WriteTree(t, root, sweepTree)
	before := pubTreeState(t, root)
	crashAfterCommit(t, root, journal)
	var tampered string
	for _, tmp := range stagedTemps(t, root) {
		st, err := os.Lstat(filepath.Join(root, tmp))
		if err == nil && st.Mode().IsRegular() {
			tampered = tmp
			break
		}
	}
	if tampered == "" {
		t.Fatal("no staged regular file")
	}
	// Same inode, other bytes.
	f, err := os.OpenFile(filepath.Join(root, tampered), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("not what was reviewed"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	if _, err := Recover(ctx, journal, []string{root}); !errors.Is(err, ErrUnverified) {
		t.Fatalf("recover of a tampered publication: want ErrUnverified, got %v", err)
	}
	if got := stagedTemps(t, root); len(got) == 0 {
		t.Fatal("recover removed the temps of a publication it did not resolve")
	}
	for k, v := range pubTreeState(t, root) {
		if strings.Contains(v, "not what was reviewed") && !strings.Contains(k, pubTempPrefix) {
			t.Fatalf("tampered content published at %s", k)
		}
	}
	dry, err := InspectJournals(ctx, journal, []string{root})
	if err != nil || len(dry) != 1 || dry[0].Action != "would_"+actionDiscard || !strings.Contains(dry[0].Problem, "does not hold the content") {
		t.Fatalf("inspect: %+v, %v", dry, err)
	}
	reps, err := RepairJournals(ctx, journal, RepairOptions{Roots: []string{root}, Discard: true})
	if err != nil || len(reps) != 1 || reps[0].Action != actionDiscard || len(reps[0].Removed) == 0 {
		t.Fatalf("repair: %+v, %v", reps, err)
	}
	if diff := pubDiffStates(before, pubTreeState(t, root)); diff != "" {
		t.Errorf("after discarding, the tree is not all-old:\n%s", diff)
	}
	pubAssertClean(t, root, journal)
}

// An intact journal whose staged files verify is completed by the repair.
func TestRepairRollsForwardVerifiedJournal(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, journal := filepath.Join(base, "root"), filepath.Join(base, "journal")
	overlaytest.WriteTree(t, root, sweepTree)
	crashAfterCommit(t, root, journal)
	dry, err := InspectJournals(ctx, journal, []string{root})
	if err != nil || len(dry) != 1 || dry[0].Action != "would_"+actionForward || dry[0].Root != root || len(dry[0].Paths) == 0 || len(dry[0].Temps) == 0 {
		t.Fatalf("inspect: %+v, %v", dry, err)
	}
	reps, err := RepairJournals(ctx, journal, RepairOptions{Roots: []string{root}, Discard: true})
	if err != nil || len(reps) != 1 || reps[0].Action != actionForward || reps[0].Done == 0 {
		t.Fatalf("repair: %+v, %v", reps, err)
	}
	want := filepath.Join(base, "want")
	overlaytest.WriteTree(t, want, sweepTree)
	if _, err := Publish(ctx, want, filepath.Join(base, "j2"), sweepOps, PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := pubDiffStates(pubTreeState(t, want), pubTreeState(t, root)); diff != "" {
		t.Errorf("after repair:\n%s", diff)
	}
	pubAssertClean(t, root, journal)
}

// A real, intact journal to a root that is not among the allowed ones is
// refused by recovery and by the repair: the tree is not touched.
func TestRecoverRefusesForeignRoot(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, journal := filepath.Join(base, "root"), filepath.Join(base, "journal")
	overlaytest.WriteTree(t, root, sweepTree)
	crashAfterCommit(t, root, journal)
	before := pubTreeState(t, root)
	other := filepath.Join(base, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, roots := range [][]string{nil, {other}} {
		if _, err := Recover(ctx, journal, roots); !errors.Is(err, ErrForeignRoot) {
			t.Errorf("roots %v: want ErrForeignRoot, got %v", roots, err)
		}
		reps, err := RepairJournals(ctx, journal, RepairOptions{Roots: roots, Discard: true})
		if !errors.Is(err, ErrForeignRoot) || len(reps) != 1 || reps[0].Action != actionRefused || reps[0].State != stateForeign {
			t.Errorf("roots %v: repair %+v, %v", roots, reps, err)
		}
		if diff := pubDiffStates(before, pubTreeState(t, root)); diff != "" {
			t.Fatalf("roots %v: a foreign root was changed:\n%s", roots, diff)
		}
	}
	if p, _ := PendingJournals(journal); len(p) != 1 {
		t.Errorf("the refused journal is gone: %+v", p)
	}
}

// A publication that had begun its renames and then finds a staged file
// tampered with is discarded, and the repair says how far it had got: the
// landed paths hold the published content, the rest the old, no temp left.
func TestRepairDiscardSaysHowFarItGot(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, journal := filepath.Join(base, "root"), filepath.Join(base, "journal")
	overlaytest.WriteTree(t, root, sweepTree)
	info := crashAfterCommit(t, root, journal)
	body, err := readJournal(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	var files []journalStep
	for _, st := range body.Steps {
		if st.Op != stepRename || st.Type != entryTypeFile {
			continue
		}
		// One a rename can land on without the removals first.
		if fi, err := os.Lstat(filepath.Join(root, st.Path)); os.IsNotExist(err) || (err == nil && fi.Mode().IsRegular()) {
			files = append(files, st)
		}
	}
	if len(files) < 2 {
		t.Fatalf("want two file renames, have %+v", files)
	}
	// The first rename landed before the crash; the second temp rotted.
	landed, rotted := files[0], files[1]
	if err := os.Rename(filepath.Join(root, landed.Temp), filepath.Join(root, landed.Path)); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(root, rotted.Temp), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("rot")
	_ = f.Close()
	reps, err := RepairJournals(ctx, journal, RepairOptions{Roots: []string{root}, Discard: true})
	if err != nil || len(reps) != 1 {
		t.Fatalf("repair: %+v, %v", reps, err)
	}
	r := reps[0]
	if r.Action != actionDiscard || r.Landed != 1 || !strings.Contains(r.Problem, "1 of its") || !strings.Contains(r.Problem, rotted.Temp) {
		t.Errorf("repair report: %+v", r)
	}
	if got := pubTreeState(t, root)[rotted.Path]; strings.Contains(got, "rot") {
		t.Errorf("rotted content published at %s: %s", rotted.Path, got)
	}
	if got, want := pubTreeState(t, root)[landed.Path], sweepTree[landed.Path]; strings.Contains(got, `"`+want+`"`) {
		t.Errorf("the landed rename was undone at %s: %s", landed.Path, got)
	}
	pubAssertClean(t, root, journal)
}
