package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
)

// Files in a journal directory, all named after the publication id
// "<root-hash>-<random>" so the root's lock is known without reading them:
//
//	<id>.intent      temps a publication is about to create (cleanup list if it dies before commit)
//	<id>.json        the fsynced journal: its presence is the commit point
//	<id>.*.tmp       a journal or intent being written
//	<root-hash>.lock flock serializing publications to one root
const (
	journalSuffix = ".json"
	intentSuffix  = ".intent"
	tmpSuffix     = ".tmp"
	lockSuffix    = ".lock"
	// pubTempPrefix starts every name a publication creates beside a target;
	// ops may not use it so recovery can tell its own files apart.
	pubTempPrefix   = ".strata-pub-"
	journalVersion  = 1
	rootHashLen     = 16
	lockPollEvery   = 10 * time.Millisecond
	stepRename      = "rename"
	stepDelete      = "delete"
	stepRmdir       = "rmdir"
	stepChmod       = "chmod"
	entryTypeFile   = "file"
	entryTypeLink   = "symlink"
	entryTypeDir    = "dir"
	stateCommitted  = "committed"
	statePrepared   = "prepared"
	stateCorrupt    = "corrupt"
	actionForward   = "rolled_forward"
	actionBack      = "rolled_back"
	actionTmpRemove = "removed_partial_file"
)

// ErrIncomplete wraps a failure after a publication was committed: its
// journal stays, and Recover (or the next Publish to the root) completes it.
var ErrIncomplete = errors.New("publication committed but not completed")

// CorruptJournalError reports a journal or intent file that cannot be
// trusted (unparsable, checksum mismatch, wrong version); recovery leaves it
// and everything it names untouched.
type CorruptJournalError struct {
	Path   string
	Reason string
}

func (e *CorruptJournalError) Error() string {
	return fmt.Sprintf("corrupt publication journal %s: %s", e.Path, e.Reason)
}

// JournalInfo describes an unfinished publication for `strata doctor`.
type JournalInfo struct {
	ID    string    `json:"id"`
	Path  string    `json:"path"`
	Root  string    `json:"root,omitempty"`
	State string    `json:"state"` // committed (will roll forward), prepared (will roll back), corrupt
	Steps int       `json:"steps"`
	Time  time.Time `json:"time"`
	Err   string    `json:"error,omitempty"`
}

// RecoveryReport says what recovery did with one unfinished publication.
type RecoveryReport struct {
	ID     string `json:"id"`
	Root   string `json:"root,omitempty"`
	Action string `json:"action"` // rolled_forward, rolled_back, removed_partial_file
	// Done counts steps performed now; Skipped those found already done.
	Done    int `json:"done"`
	Skipped int `json:"skipped"`
}

// journalBody is what the checksum covers.
type journalBody struct {
	Version int           `json:"version"`
	ID      string        `json:"id"`
	Root    string        `json:"root"`
	Created time.Time     `json:"created"`
	Steps   []journalStep `json:"steps"`
}

// journalStep is one idempotent step; steps run in order: deletes, rmdirs
// (deepest first), renames, chmods.
type journalStep struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// Temp, Type, Ino, SHA256, Link describe a rename: the temp beside Path
	// and what it holds, so recovery can tell a rename already done.
	Temp   string `json:"temp,omitempty"`
	Type   string `json:"type,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
}

type journalEnvelope struct {
	Checksum string          `json:"checksum"`
	Body     json.RawMessage `json:"body"`
}

// intentFile lists the temps a publication will create, written before any
// of them exists.
type intentFile struct {
	Version int          `json:"version"`
	ID      string       `json:"id"`
	Root    string       `json:"root"`
	Temps   []intentTemp `json:"temps"`
}

type intentTemp struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
}

// rootHash names a root in journal ids and lock files.
func rootHash(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:])[:rootHashLen]
}

// RootLockPath is the lock file serializing publications to root.
func RootLockPath(journalDir, root string) string {
	return filepath.Join(journalDir, rootHash(root)+lockSuffix)
}

// LockRoot takes an exclusive flock on lockPath, waiting until it is free or
// ctx ends. The lock dies with the process, so a crash never leaves it held.
func LockRoot(ctx context.Context, lockPath string) (unlock func(), err error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", lockPath, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", lockPath, ctx.Err())
		case <-time.After(lockPollEvery):
		}
	}
}

func encodeJournal(body *journalBody) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	return json.Marshal(journalEnvelope{Checksum: "sha256:" + hex.EncodeToString(sum[:]), Body: raw})
}

func decodeJournal(path string, data []byte) (*journalBody, error) {
	corrupt := func(why string) error { return &CorruptJournalError{Path: path, Reason: why} }
	var env journalEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, corrupt("not valid JSON: " + err.Error())
	}
	sum := sha256.Sum256(env.Body)
	if env.Checksum != "sha256:"+hex.EncodeToString(sum[:]) {
		return nil, corrupt("checksum mismatch")
	}
	var body journalBody
	dec := json.NewDecoder(bytes.NewReader(env.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return nil, corrupt("bad body: " + err.Error())
	}
	if body.Version != journalVersion {
		return nil, corrupt(fmt.Sprintf("unknown version %d", body.Version))
	}
	if want := strings.TrimSuffix(filepath.Base(path), journalSuffix); body.ID != want {
		return nil, corrupt(fmt.Sprintf("id %q does not match file name", body.ID))
	}
	if !filepath.IsAbs(body.Root) {
		return nil, corrupt(fmt.Sprintf("root %q is not absolute", body.Root))
	}
	for i, st := range body.Steps {
		if err := validateStep(body.ID, st); err != nil {
			return nil, corrupt(fmt.Sprintf("step %d: %v", i, err))
		}
	}
	return &body, nil
}

func validateStep(id string, st journalStep) error {
	if err := overlay.ValidateRelPath(st.Path); err != nil {
		return err
	}
	switch st.Op {
	case stepDelete, stepRmdir, stepChmod:
		return nil
	case stepRename:
		if err := validateTempPath(id, st.Temp); err != nil {
			return err
		}
		if pd, _ := overlay.SplitRel(st.Path); func() string { d, _ := overlay.SplitRel(st.Temp); return d }() != pd {
			return fmt.Errorf("temp %q not beside %q", st.Temp, st.Path)
		}
		switch st.Type {
		case entryTypeFile, entryTypeLink, entryTypeDir:
			return nil
		}
		return fmt.Errorf("unknown type %q", st.Type)
	}
	return fmt.Errorf("unknown op %q", st.Op)
}

// validateTempPath accepts only names this publication could have made, so a
// tampered journal or intent cannot steer recovery at arbitrary files.
func validateTempPath(id, rel string) error {
	if err := overlay.ValidateRelPath(rel); err != nil {
		return err
	}
	if _, base := overlay.SplitRel(rel); !strings.HasPrefix(base, pubTempPrefix+id+"-") {
		return fmt.Errorf("temp %q is not a publication temp of %s", rel, id)
	}
	return nil
}

// writeFileDurably writes data to path through a temp and a rename; with
// sync it fsyncs the file and the directory so the rename is the commit.
func writeFileDurably(path string, data []byte, sync bool) error {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if sync {
		return fsx.FsyncPath(filepath.Dir(path))
	}
	return nil
}

// pubFiles groups the files of one publication id found in a journal dir.
type pubFiles struct {
	id                    string
	journal, intent       bool
	journalTmp, intentTmp bool
}

// scanJournalDir lists publications in dir grouped by root hash.
func scanJournalDir(dir string) (map[string][]*pubFiles, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal dir %s: %w", dir, err)
	}
	byID := map[string]*pubFiles{}
	get := func(id string) *pubFiles {
		if p, ok := byID[id]; ok {
			return p
		}
		p := &pubFiles{id: id}
		byID[id] = p
		return p
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, journalSuffix+tmpSuffix):
			get(strings.TrimSuffix(name, journalSuffix+tmpSuffix)).journalTmp = true
		case strings.HasSuffix(name, intentSuffix+tmpSuffix):
			get(strings.TrimSuffix(name, intentSuffix+tmpSuffix)).intentTmp = true
		case strings.HasSuffix(name, journalSuffix):
			get(strings.TrimSuffix(name, journalSuffix)).journal = true
		case strings.HasSuffix(name, intentSuffix):
			get(strings.TrimSuffix(name, intentSuffix)).intent = true
		}
	}
	groups := map[string][]*pubFiles{}
	for id, p := range byID {
		h, _, ok := strings.Cut(id, "-")
		if !ok || len(h) != rootHashLen {
			continue // not ours
		}
		groups[h] = append(groups[h], p)
	}
	for _, g := range groups {
		slices.SortFunc(g, func(a, b *pubFiles) int { return strings.Compare(a.id, b.id) })
	}
	return groups, nil
}

// PendingJournals lists unfinished publications in journalDir without
// changing anything.
func PendingJournals(journalDir string) ([]JournalInfo, error) {
	groups, err := scanJournalDir(journalDir)
	if err != nil {
		return nil, err
	}
	var out []JournalInfo
	for _, g := range groups {
		for _, p := range g {
			switch {
			case p.journal:
				path := filepath.Join(journalDir, p.id+journalSuffix)
				info := JournalInfo{ID: p.id, Path: path, State: stateCommitted}
				if body, err := readJournal(path); err != nil {
					info.State, info.Err = stateCorrupt, err.Error()
				} else {
					info.Root, info.Steps, info.Time = body.Root, len(body.Steps), body.Created
				}
				out = append(out, info)
			case p.intent:
				path := filepath.Join(journalDir, p.id+intentSuffix)
				info := JournalInfo{ID: p.id, Path: path, State: statePrepared}
				if in, err := readIntent(path); err != nil {
					info.State, info.Err = stateCorrupt, err.Error()
				} else {
					info.Root, info.Steps = in.Root, len(in.Temps)
				}
				if st, err := os.Stat(path); err == nil {
					info.Time = st.ModTime()
				}
				out = append(out, info)
			}
		}
	}
	slices.SortFunc(out, func(a, b JournalInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func readJournal(path string) (*journalBody, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	return decodeJournal(path, data)
}

func readIntent(path string) (*intentFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read intent: %w", err)
	}
	var in intentFile
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, &CorruptJournalError{Path: path, Reason: "not valid JSON: " + err.Error()}
	}
	if in.Version != journalVersion || in.ID != strings.TrimSuffix(filepath.Base(path), intentSuffix) || !filepath.IsAbs(in.Root) {
		return nil, &CorruptJournalError{Path: path, Reason: "bad header"}
	}
	for _, t := range in.Temps {
		if err := validateTempPath(in.ID, t.Path); err != nil {
			return nil, &CorruptJournalError{Path: path, Reason: err.Error()}
		}
	}
	return &in, nil
}

// ErrForeignRoot is wrapped by the error about a journal naming a directory
// no World of this state root publishes to: it is never replayed.
var ErrForeignRoot = errors.New("publication names a directory that is not a known source")

// ErrUnverified is wrapped when a committed journal's staged contents do not
// hold what it recorded: rolling it forward would publish unreviewed bytes.
var ErrUnverified = errors.New("publication's staged files do not verify")

// Repair actions (JournalRepair.Action); a dry run prefixes them with "would_".
const (
	actionDiscard = "discarded"
	actionRefused = "refused"
	actionLeft    = "left"
	stateForeign  = "foreign"
	statePartial  = "partial"
)

// JournalRepair explains one unfinished publication (which source, which
// paths, how far it got) and what recovery did or, in a dry run, would do.
type JournalRepair struct {
	ID    string    `json:"id"`
	File  string    `json:"path"`           // its journal, else its intent, in the journal dir
	Time  time.Time `json:"time,omitzero"`  // when it was committed (or its intent written)
	Root  string    `json:"root,omitempty"` // the source it publishes to, when known
	State string    `json:"state"`          // committed, prepared, partial, corrupt, foreign
	// Paths are the source paths a readable journal changes.
	Paths []string `json:"paths,omitempty"`
	Steps int      `json:"steps"`
	// Landed counts renames already in place (how far it got).
	Landed int `json:"landed"`
	// Temps are the staged files of this publication now in the source.
	Temps   []string `json:"temps,omitempty"`
	Problem string   `json:"problem,omitempty"` // why it cannot be rolled forward
	// Action: rolled_forward, rolled_back, discarded (temps removed, the
	// publication dropped), refused (foreign root: nothing touched), left
	// (needs a repair that may discard it); "would_..." in a dry run.
	Action  string   `json:"action"`
	Removed []string `json:"removed,omitempty"` // temps removed from the source
	Done    int      `json:"done"`
	Skipped int      `json:"skipped"`
	Error   string   `json:"error,omitempty"`
}

// RepairOptions choose what RepairJournals may do.
type RepairOptions struct {
	// Roots are the only trees recovery may change: the sources the state
	// root's Worlds use. A journal naming any other is refused, untouched.
	Roots []string
	// Discard resolves what cannot be rolled forward (a corrupt journal, one
	// whose staged files fail verification) by removing the temps it staged
	// and dropping it. Without it those are left and reported as errors.
	Discard bool
	DryRun  bool
}

// Recover finishes every unfinished publication in journalDir to one of
// roots: a committed journal whose staged files verify is rolled forward
// (steps already done are skipped), a publication that died before its
// commit has its temps removed. Each root is locked while its publications
// are recovered. A corrupt journal (*CorruptJournalError), one that does not
// verify (ErrUnverified) or names another directory (ErrForeignRoot) is
// reported and nothing it names is touched; others are still recovered.
func Recover(ctx context.Context, journalDir string, roots []string) ([]RecoveryReport, error) {
	reps, err := RepairJournals(ctx, journalDir, RepairOptions{Roots: roots})
	return recoveryReports(reps), err
}

// InspectJournals explains every unfinished publication without changing
// anything: what RepairJournals with Discard would do.
func InspectJournals(ctx context.Context, journalDir string, roots []string) ([]JournalRepair, error) {
	return RepairJournals(ctx, journalDir, RepairOptions{Roots: roots, Discard: true, DryRun: true})
}

// RepairJournals resolves every unfinished publication in journalDir (see
// RepairOptions) and explains each one. Nothing outside the roots is ever
// touched, and in a root only the temps the publication itself staged
// (names starting .strata-pub-<id>-) are removed.
func RepairJournals(ctx context.Context, journalDir string, o RepairOptions) ([]JournalRepair, error) {
	roots := make([]string, 0, len(o.Roots))
	for _, r := range o.Roots {
		if real, err := fsx.CanonicalDir(r); err == nil {
			roots = append(roots, real)
		}
	}
	o.Roots = roots
	groups, err := scanJournalDir(journalDir)
	if err != nil {
		return nil, err
	}
	hashes := make([]string, 0, len(groups))
	for h := range groups {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	var out []JournalRepair
	var errs []error
	for _, h := range hashes {
		rs, err := func() ([]JournalRepair, error) {
			if o.DryRun {
				return repairRootLocked(ctx, journalDir, h, o, newStepper())
			}
			unlock, err := LockRoot(ctx, filepath.Join(journalDir, h+lockSuffix))
			if err != nil {
				return nil, err
			}
			defer unlock()
			return repairRootLocked(ctx, journalDir, h, o, newStepper())
		}()
		out = append(out, rs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func recoveryReports(reps []JournalRepair) []RecoveryReport {
	var out []RecoveryReport
	for _, r := range reps {
		switch r.Action {
		case actionForward, actionBack, actionTmpRemove, actionDiscard:
			out = append(out, RecoveryReport{ID: r.ID, Root: r.Root, Action: r.Action, Done: r.Done, Skipped: r.Skipped})
		}
	}
	return out
}

// recoverRootLocked recovers the publications to root, whose lock the
// caller (Publish) holds, so none of them is live. step counts steps for the
// crash tests.
func recoverRootLocked(ctx context.Context, journalDir, root string, step func()) ([]RecoveryReport, error) {
	reps, err := repairRootLocked(ctx, journalDir, rootHash(root), RepairOptions{Roots: []string{root}}, step)
	return recoveryReports(reps), err
}

// repairRootLocked handles the publications of one root hash; the caller
// holds the root's lock unless o.DryRun.
func repairRootLocked(ctx context.Context, journalDir, hash string, o RepairOptions, step func()) ([]JournalRepair, error) {
	// Rescan under the lock: what was seen before it may have finished.
	groups, err := scanJournalDir(journalDir)
	if err != nil {
		return nil, err
	}
	var reps []JournalRepair
	var errs []error
	for _, p := range groups[hash] {
		if err := ctx.Err(); err != nil {
			return reps, err
		}
		rep, err := repairPublication(ctx, journalDir, hash, p, o, step)
		if err != nil {
			rep.Error = err.Error()
			errs = append(errs, err)
		}
		reps = append(reps, rep)
	}
	return reps, errors.Join(errs...)
}

// pubExam is what inspection learnt about one publication.
type pubExam struct {
	body    *journalBody // readable committed journal
	intent  *intentFile  // readable intent
	corrupt error        // the journal (or, with no journal, the intent) is unreadable
	rootFd  int          // open root, when it is an allowed one; else -1
}

func repairPublication(ctx context.Context, journalDir, hash string, p *pubFiles, o RepairOptions, step func()) (JournalRepair, error) {
	jpath := filepath.Join(journalDir, p.id+journalSuffix)
	ipath := filepath.Join(journalDir, p.id+intentSuffix)
	rep := JournalRepair{ID: p.id}
	act := func(a string) string {
		if o.DryRun {
			return "would_" + a
		}
		return a
	}
	x := pubExam{rootFd: -1}
	switch {
	case p.journal:
		rep.File, rep.State = jpath, stateCommitted
		x.body, x.corrupt = readJournal(jpath)
		if x.body != nil {
			rep.Time = x.body.Created
		}
		if p.intent {
			x.intent, _ = readIntent(ipath) // only a cleanup list; a bad one is ignored
		}
	case p.intent:
		rep.File, rep.State = ipath, statePrepared
		x.intent, x.corrupt = readIntent(ipath)
		if st, err := os.Stat(ipath); err == nil {
			rep.Time = st.ModTime().UTC()
		}
	default:
		// Only a half-written journal or intent: the publication never
		// committed and, with no intent, never created a temp.
		rep.File, rep.State, rep.Action = filepath.Join(journalDir, p.id+journalSuffix+tmpSuffix), statePartial, act(actionTmpRemove)
		if !p.journalTmp {
			rep.File = ipath + tmpSuffix
		}
		if o.DryRun {
			return rep, nil
		}
		return rep, retirePublication(journalDir, p.id)
	}
	// Which root: the one the file names, which must hash to the id; for an
	// unreadable file, the allowed root the id's hash names.
	named := ""
	switch {
	case x.body != nil:
		named = x.body.Root
	case x.intent != nil && x.corrupt == nil:
		named = x.intent.Root
	}
	if named != "" && rootHash(named) != hash {
		x.corrupt = &CorruptJournalError{Path: rep.File, Reason: fmt.Sprintf("root %q does not match the publication id", named)}
		x.body, named = nil, ""
	}
	if x.corrupt != nil {
		rep.State = stateCorrupt
		rep.Problem = x.corrupt.Error()
	}
	if named == "" {
		for _, r := range o.Roots {
			if rootHash(r) == hash {
				named = r
			}
		}
	}
	rep.Root = named
	if named == "" || !slices.Contains(o.Roots, named) {
		rep.Action = act(actionRefused)
		if rep.State != stateCorrupt {
			rep.State = stateForeign
		}
		where := "an unknown directory"
		if named != "" {
			where = named
		}
		refused := fmt.Sprintf("it names %s, which no World of this state root uses as its source; it was not replayed and nothing there was touched (remove %s once you know what it is)", where, rep.File)
		if rep.Problem != "" {
			refused = rep.Problem + "; " + refused
		}
		rep.Problem = refused
		return rep, fmt.Errorf("publication %s: %w: %s", p.id, ErrForeignRoot, where)
	}
	fd, err := overlay.OpenRootFd(named)
	if err != nil {
		rep.Action = act(actionLeft)
		return rep, fmt.Errorf("publication %s: open source %s: %w", p.id, named, err)
	}
	defer overlay.CloseFd(fd)
	x.rootFd = fd

	if x.body != nil {
		rep.Steps = len(x.body.Steps)
		seen := map[string]bool{}
		for _, st := range x.body.Steps {
			if !seen[st.Path] {
				seen[st.Path] = true
				rep.Paths = append(rep.Paths, st.Path)
			}
		}
		landed, problem, err := verifyJournal(fd, x.body)
		rep.Landed = landed
		if err != nil {
			rep.Action = act(actionLeft)
			return rep, fmt.Errorf("verify publication %s: %w", p.id, err)
		}
		if problem == "" {
			rep.Temps = presentTemps(fd, journalTemps(x.body, x.intent))
			rep.Action = act(actionForward)
			if o.DryRun {
				return rep, nil
			}
			rr, err := completeJournal(ctx, x.body, SyncPerFile, false, step)
			rep.Done, rep.Skipped = rr.Done, rr.Skipped
			if err != nil {
				return rep, fmt.Errorf("roll forward publication %s: %w", p.id, err)
			}
			return rep, retirePublication(journalDir, p.id)
		}
		rep.Problem = problem
		if landed > 0 {
			rep.Problem += fmt.Sprintf("; %d of its %d renames had already landed, so those paths hold what it published and the rest do not", landed, renameCount(x.body))
		}
	} else if x.intent != nil && x.corrupt == nil {
		rep.Steps = len(x.intent.Temps)
		rep.Temps = presentTemps(fd, intentTemps(x.intent))
		rep.Action = act(actionBack)
		if o.DryRun {
			return rep, nil
		}
		rr, err := rollBackIntent(x.intent, step)
		rep.Done, rep.Skipped, rep.Removed = rr.Done, rr.Skipped, rep.Temps
		if err != nil {
			return rep, fmt.Errorf("roll back publication %s: %w", p.id, err)
		}
		return rep, retirePublication(journalDir, p.id)
	}

	// Corrupt, or committed but not verifiable: it can only be discarded.
	var temps []string
	switch {
	case x.body != nil:
		temps = journalTemps(x.body, x.intent)
	case x.intent != nil:
		temps = intentTemps(x.intent)
	case o.Discard:
		// Nothing readable says where its temps are: find them by their
		// reserved names, which only this publication could have made.
		if temps, err = findTemps(named, p.id); err != nil {
			rep.Action = act(actionLeft)
			return rep, fmt.Errorf("publication %s: find its temps in %s: %w", p.id, named, err)
		}
	}
	rep.Temps = presentTemps(fd, temps)
	if !o.Discard {
		rep.Action = act(actionLeft)
		if x.corrupt != nil {
			return rep, x.corrupt
		}
		return rep, fmt.Errorf("publication %s to %s: %w: %s", p.id, named, ErrUnverified, rep.Problem)
	}
	rep.Action = act(actionDiscard)
	if o.DryRun {
		return rep, nil
	}
	for _, t := range rep.Temps {
		removed, err := removeTempBeneath(fd, p.id, t)
		if err != nil {
			return rep, fmt.Errorf("discard publication %s: remove %s: %w", p.id, t, err)
		}
		if removed {
			rep.Removed = append(rep.Removed, t)
			rep.Done++
		}
		step()
	}
	return rep, retirePublication(journalDir, p.id)
}

// verifyJournal checks, before a roll forward, that every rename either
// still has its temp holding exactly what was journaled (type, inode, and
// content hash or link target) or has landed (the target holds it). It
// returns the renames landed and, when something does not verify, why.
func verifyJournal(rootFd int, j *journalBody) (landed int, problem string, err error) {
	dirs := &stepDirs{rootFd: rootFd, fds: map[string]int{}}
	defer dirs.close()
	var problems []string
	for _, st := range j.Steps {
		if st.Op != stepRename {
			continue
		}
		parent, base := overlay.SplitRel(st.Path)
		_, tempBase := overlay.SplitRel(st.Temp)
		fd, err := dirs.open(parent)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			problems = append(problems, fmt.Sprintf("the directory of %s is gone", st.Path))
			continue
		}
		if err != nil {
			return landed, "", fmt.Errorf("open directory of %s: %w", st.Path, err)
		}
		ok, err := tempHolds(fd, tempBase, st)
		if err != nil {
			return landed, "", fmt.Errorf("check temp %s: %w", st.Temp, err)
		}
		switch ok {
		case tempMatches:
			continue
		case tempDiffers:
			problems = append(problems, fmt.Sprintf("staged %s for %s does not hold the content the journal recorded", st.Temp, st.Path))
			continue
		}
		holds, err := targetHolds(fd, base, st)
		if err != nil {
			return landed, "", fmt.Errorf("check %s: %w", st.Path, err)
		}
		if holds {
			landed++
		} else {
			problems = append(problems, fmt.Sprintf("staged %s is missing and %s does not hold the published %s", st.Temp, st.Path, st.Type))
		}
	}
	return landed, strings.Join(problems, "; "), nil
}

func renameCount(j *journalBody) int {
	n := 0
	for _, st := range j.Steps {
		if st.Op == stepRename {
			n++
		}
	}
	return n
}

type tempState int

const (
	tempAbsent tempState = iota
	tempMatches
	tempDiffers
)

// tempHolds compares a rename's temp with what the journal says it holds.
func tempHolds(fd int, name string, st journalStep) (tempState, error) {
	var s unix.Stat_t
	if err := unix.Fstatat(fd, name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return tempAbsent, nil
		}
		return tempAbsent, err
	}
	if st.Ino != 0 && s.Ino != st.Ino {
		return tempDiffers, nil
	}
	switch st.Type {
	case entryTypeDir:
		if s.Mode&unix.S_IFMT != unix.S_IFDIR {
			return tempDiffers, nil
		}
		return tempMatches, nil
	case entryTypeLink, entryTypeFile:
		if ok, err := targetHolds(fd, name, journalStep{Type: st.Type, Link: st.Link, SHA256: st.SHA256}); err != nil || !ok {
			return tempDiffers, err
		}
		return tempMatches, nil
	}
	return tempDiffers, nil
}

// journalTemps lists every temp a journal's renames (and its intent) name.
func journalTemps(j *journalBody, in *intentFile) []string {
	var out []string
	for _, st := range j.Steps {
		if st.Op == stepRename {
			out = append(out, st.Temp)
		}
	}
	if in != nil && in.ID == j.ID {
		out = append(out, intentTemps(in)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func intentTemps(in *intentFile) []string {
	out := make([]string, 0, len(in.Temps))
	for _, t := range in.Temps {
		out = append(out, t.Path)
	}
	return out
}

// presentTemps keeps the temps that exist beneath the root.
func presentTemps(rootFd int, temps []string) []string {
	var out []string
	for _, t := range temps {
		dirFd, base, err := overlay.OpenParentBeneath(rootFd, t)
		if err != nil {
			continue
		}
		var s unix.Stat_t
		if unix.Fstatat(dirFd, base, &s, unix.AT_SYMLINK_NOFOLLOW) == nil {
			out = append(out, t)
		}
		overlay.CloseFd(dirFd)
	}
	return out
}

// findTemps walks root for the entries publication id staged. It never
// follows a symlink and does not descend into a temp.
func findTemps(root, id string) ([]string, error) {
	prefix := pubTempPrefix + id + "-"
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // unreadable corners cannot hold what this process wrote
		}
		if !strings.HasPrefix(d.Name(), prefix) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		out = append(out, filepath.ToSlash(rel))
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	return out, err
}

// removeTempBeneath removes one temp of publication id, refusing any name
// it could not have staged.
func removeTempBeneath(rootFd int, id, rel string) (bool, error) {
	if err := validateTempPath(id, rel); err != nil {
		return false, err
	}
	dirFd, base, err := overlay.OpenParentBeneath(rootFd, rel)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer overlay.CloseFd(dirFd)
	return removeAllAt(dirFd, base)
}

// retirePublication removes every journal-dir file of id, journal last:
// until then a rerun still sees the publication.
func retirePublication(journalDir, id string) error {
	for _, suffix := range []string{intentSuffix + tmpSuffix, journalSuffix + tmpSuffix, intentSuffix, journalSuffix} {
		if err := os.Remove(filepath.Join(journalDir, id+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("retire publication %s: %w", id, err)
		}
	}
	return nil
}

// rollBackIntent removes the temps of a publication that never committed.
func rollBackIntent(in *intentFile, step func()) (RecoveryReport, error) {
	rep := RecoveryReport{ID: in.ID, Root: in.Root, Action: actionBack}
	rootFd, err := overlay.OpenRootFd(in.Root)
	if err != nil {
		return rep, err
	}
	defer overlay.CloseFd(rootFd)
	for _, t := range in.Temps {
		dirFd, base, err := overlay.OpenParentBeneath(rootFd, t.Path)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			rep.Skipped++
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("open parent of %s: %w", t.Path, err)
		}
		removed, err := removeAllAt(dirFd, base)
		overlay.CloseFd(dirFd)
		if err != nil {
			return rep, fmt.Errorf("remove temp %s: %w", t.Path, err)
		}
		if removed {
			rep.Done++
		} else {
			rep.Skipped++
		}
		step()
	}
	return rep, nil
}

// removeAllAt removes name under dirFd and, for a directory, everything in
// it, never following a symlink. It reports whether anything was there.
func removeAllAt(dirFd int, name string) (bool, error) {
	err := unix.Unlinkat(dirFd, name, 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM):
		return false, err
	}
	fd, err := overlay.OpenatRetry(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return false, err
	}
	dir := os.NewFile(uintptr(fd), name)
	names, err := dir.Readdirnames(-1)
	if err != nil {
		_ = dir.Close()
		return false, err
	}
	for _, child := range names {
		if _, err := removeAllAt(fd, child); err != nil {
			_ = dir.Close()
			return false, err
		}
	}
	_ = dir.Close()
	if err := unix.Unlinkat(dirFd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, err
	}
	return true, nil
}

// stepDirs caches parent directory fds while a journal's steps run; every
// one is opened fresh beneath the root, so a directory swapped for a link
// since the commit fails the step instead of redirecting it.
type stepDirs struct {
	rootFd int
	mu     sync.Mutex
	fds    map[string]int
}

func (d *stepDirs) open(rel string) (int, error) {
	if rel == "." {
		return d.rootFd, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if fd, ok := d.fds[rel]; ok {
		return fd, nil
	}
	fd, err := overlay.OpenBeneathFd(d.rootFd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	d.fds[rel] = fd
	return fd, nil
}

// forget drops a cached fd whose directory a step removed.
func (d *stepDirs) forget(rel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, fd := range d.fds {
		if k == rel || strings.HasPrefix(k, rel+"/") {
			overlay.CloseFd(fd)
			delete(d.fds, k)
		}
	}
}

func (d *stepDirs) close() {
	for _, fd := range d.fds {
		overlay.CloseFd(fd)
	}
}

// parallelSteps bounds the goroutines running independent steps (creating,
// syncing, renaming, deleting files): they are kernel-bound, and a few in
// flight keep the disk queue and the CPUs busy. In-process crash tests set it
// to 1 so their simulated crash (a panic) stays on the calling goroutine.
var parallelSteps = 8

// forEachParallel runs fn(0..n-1) on up to parallelSteps goroutines and
// returns the first error; after one, the remaining items are not started.
func forEachParallel(n int, fn func(i int) error) error {
	workers := min(parallelSteps, n)
	if workers <= 1 {
		for i := range n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// completeJournal performs every step of a committed journal that is not yet
// done, makes the result durable and returns what it did. It is idempotent:
// a crash inside it is recovered by running it again. fresh says no step can
// have run yet (the publication itself, right after its commit).
func completeJournal(ctx context.Context, j *journalBody, mode SyncMode, fresh bool, step func()) (RecoveryReport, error) {
	rep := RecoveryReport{ID: j.ID, Root: j.Root, Action: actionForward}
	rootFd, err := overlay.OpenRootFd(j.Root)
	if err != nil {
		return rep, err
	}
	defer overlay.CloseFd(rootFd)
	dirs := &stepDirs{rootFd: rootFd, fds: map[string]int{}}
	defer dirs.close()

	// Renames run only after every delete and rmdir, so one rename found done
	// proves the removals done too (and their paths may now hold new entries).
	renamesStarted := false
	for _, st := range j.Steps {
		if fresh || st.Op != stepRename {
			continue
		}
		exists, err := stepEntryExists(dirs, st.Temp)
		if err != nil {
			return rep, fmt.Errorf("check temp %s: %w", st.Temp, err)
		}
		if !exists {
			renamesStarted = true
			break
		}
	}
	var done, skipped atomic.Int64
	touched := map[string]bool{}
	run := func(st journalStep) error {
		var did bool
		var err error
		switch st.Op {
		case stepDelete, stepRmdir:
			did, err = runRemoval(dirs, st)
			if st.Op == stepRmdir {
				dirs.forget(st.Path)
			}
		case stepRename:
			did, err = runRename(dirs, st)
		case stepChmod:
			did, err = runChmod(dirs, st)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", st.Op, st.Path, err)
		}
		if did {
			done.Add(1)
		} else {
			skipped.Add(1)
		}
		step()
		return nil
	}
	// Steps come grouped by op in journal order; deletes and renames within a
	// group are independent and run in parallel, rmdirs (deepest first) and
	// chmods one by one.
	for i := 0; i < len(j.Steps); {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		op := j.Steps[i].Op
		end := i
		for end < len(j.Steps) && j.Steps[end].Op == op {
			touched[parentRel(j.Steps[end].Path)] = true
			end++
		}
		group := j.Steps[i:end]
		i = end
		if renamesStarted && (op == stepDelete || op == stepRmdir) {
			skipped.Add(int64(len(group)))
			continue
		}
		if op == stepDelete || op == stepRename {
			if err := forEachParallel(len(group), func(k int) error { return run(group[k]) }); err != nil {
				return rep, err
			}
			continue
		}
		for _, st := range group {
			if err := run(st); err != nil {
				return rep, err
			}
		}
	}
	rep.Done, rep.Skipped = int(done.Load()), int(skipped.Load())
	if err := syncTouched(dirs, touched, mode); err != nil {
		return rep, err
	}
	step()
	return rep, nil
}

func stepEntryExists(dirs *stepDirs, rel string) (bool, error) {
	parent, base := overlay.SplitRel(rel)
	fd, err := dirs.open(parent)
	if err != nil {
		return false, err
	}
	var st unix.Stat_t
	err = unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	return err == nil, err
}

func runRemoval(dirs *stepDirs, st journalStep) (bool, error) {
	parent, base := overlay.SplitRel(st.Path)
	fd, err := dirs.open(parent)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return false, nil // no parent, so no entry left to remove
	}
	if err != nil {
		return false, err
	}
	flags := 0
	if st.Op == stepRmdir {
		flags = unix.AT_REMOVEDIR
	}
	err = unix.Unlinkat(fd, base, flags)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	return err == nil, err
}

func runRename(dirs *stepDirs, st journalStep) (bool, error) {
	parent, base := overlay.SplitRel(st.Path)
	_, tempBase := overlay.SplitRel(st.Temp)
	fd, err := dirs.open(parent)
	if err != nil {
		return false, err
	}
	err = unix.Renameat(fd, tempBase, fd, base)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return false, err
	}
	// The temp is gone: the rename happened before, if Path holds what it held.
	ok, verr := targetHolds(fd, base, st)
	if verr != nil {
		return false, fmt.Errorf("temp %s missing and target unreadable: %w", st.Temp, verr)
	}
	if !ok {
		return false, fmt.Errorf("temp %s missing and target does not hold the published %s", st.Temp, st.Type)
	}
	return false, nil
}

// targetHolds reports whether name under fd is the entry a rename step
// published: the same inode, or (for files and links) the same content.
func targetHolds(fd int, name string, st journalStep) (bool, error) {
	var s unix.Stat_t
	if err := unix.Fstatat(fd, name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if s.Ino == st.Ino {
		return true, nil
	}
	switch st.Type {
	case entryTypeLink:
		if s.Mode&unix.S_IFMT != unix.S_IFLNK {
			return false, nil
		}
		link, err := overlay.Readlinkat(fd, name)
		return err == nil && link == st.Link, err
	case entryTypeFile:
		if s.Mode&unix.S_IFMT != unix.S_IFREG {
			return false, nil
		}
		f, err := overlay.OpenatRetry(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return false, err
		}
		file := os.NewFile(uintptr(f), name)
		defer overlay.CloseQuiet(file)
		h := sha256.New()
		if _, err := io.Copy(h, file); err != nil {
			return false, err
		}
		return hex.EncodeToString(h.Sum(nil)) == st.SHA256, nil
	}
	return false, nil
}

func runChmod(dirs *stepDirs, st journalStep) (bool, error) {
	fd, err := overlay.OpenBeneathFd(dirs.rootFd, st.Path, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return false, err
	}
	defer overlay.CloseFd(fd)
	return true, unix.Fchmod(fd, st.Mode)
}

// syncTouched makes the steps durable before the journal is retired.
func syncTouched(dirs *stepDirs, touched map[string]bool, mode SyncMode) error {
	if mode == SyncFS {
		if err := unix.Syncfs(dirs.rootFd); err != nil {
			return fmt.Errorf("syncfs %s: %w", "root", err)
		}
		return nil
	}
	rels := make([]string, 0, len(touched))
	for rel := range touched {
		rels = append(rels, rel)
	}
	return forEachParallel(len(rels), func(i int) error {
		fd, err := dirs.open(rels[i])
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, overlay.ErrUnsafePath) {
			// Removed or replaced (by a file or link) by this publication:
			// its removal is made durable by syncing its parent, also touched.
			return nil
		}
		if err != nil {
			return fmt.Errorf("open %s for sync: %w", rels[i], err)
		}
		if err := unix.Fsync(fd); err != nil {
			return fmt.Errorf("sync dir %s: %w", rels[i], err)
		}
		return nil
	})
}

// newStepper returns a step counter feeding publishHook (nil in production).
func newStepper() func() {
	var n atomic.Int64
	return func() {
		k := n.Add(1)
		if h := publishHook; h != nil {
			h(int(k))
		}
	}
}

// A journal names files by their exact bytes: Path, Temp and Link go through
// JSONPath, so a name that is not UTF-8 is recovered under its own bytes,
// never under a lossy "\ufffd" spelling that would roll forward to the wrong
// name or leave its temp behind.
type journalStepJSON struct {
	journalStepFields
	PathBytes []byte `json:"path_bytes,omitempty"`
	TempBytes []byte `json:"temp_bytes,omitempty"`
	LinkBytes []byte `json:"link_bytes,omitempty"`
}

type journalStepFields journalStep

func (s journalStep) MarshalJSON() ([]byte, error) {
	out := journalStepJSON{journalStepFields: journalStepFields(s)}
	out.Path, out.PathBytes = overlay.JSONPath(s.Path)
	out.Temp, out.TempBytes = overlay.JSONPath(s.Temp)
	out.Link, out.LinkBytes = overlay.JSONPath(s.Link)
	return json.Marshal(out)
}

func (s *journalStep) UnmarshalJSON(data []byte) error {
	var in journalStepJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*s = journalStep(in.journalStepFields)
	s.Path = overlay.PathFromJSON(in.Path, in.PathBytes)
	s.Temp = overlay.PathFromJSON(in.Temp, in.TempBytes)
	s.Link = overlay.PathFromJSON(in.Link, in.LinkBytes)
	return nil
}

type intentTempJSON struct {
	intentTempFields
	PathBytes []byte `json:"path_bytes,omitempty"`
}

type intentTempFields intentTemp

func (t intentTemp) MarshalJSON() ([]byte, error) {
	out := intentTempJSON{intentTempFields: intentTempFields(t)}
	out.Path, out.PathBytes = overlay.JSONPath(t.Path)
	return json.Marshal(out)
}

func (t *intentTemp) UnmarshalJSON(data []byte) error {
	var in intentTempJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*t = intentTemp(in.intentTempFields)
	t.Path = overlay.PathFromJSON(in.Path, in.PathBytes)
	return nil
}
