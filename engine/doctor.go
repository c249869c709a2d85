package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
	"github.com/stratahq/strata/overlay/publish"
)

// recover finishes publications a crash interrupted, on every start: only
// those to a source one of this state root's Worlds uses, and only when
// their staged files verify. The rest wait for strata doctor --repair.
func (e *Engine) recover(ctx context.Context) error {
	pending, err := publish.PendingJournals(e.Paths.Journal())
	if err != nil || len(pending) == 0 {
		return err
	}
	reps, err := publish.Recover(ctx, e.Paths.Journal(), e.sourceRoots())
	for _, r := range reps {
		e.Log.Info("recovered publication", "id", r.ID, "root", r.Root, "action", r.Action, "done", r.Done, "skipped", r.Skipped)
	}
	if err != nil {
		// Recovery of the others went on; starting is still safe because a
		// corrupt journal's publication is left untouched. doctor reports it.
		e.Log.Error("recover publications", "err", err)
	}
	return nil
}

// sourceRoots are the sources of this state root's Worlds and their extra
// overlay trees (each published on its own): the only trees a journal may
// be replayed into.
func (e *Engine) sourceRoots() []string {
	ws, _ := e.Worlds()
	var roots []string
	add := func(p string) {
		if !slices.Contains(roots, p) {
			roots = append(roots, p)
		}
	}
	for _, w := range ws {
		for _, v := range treeViews(w) { // the source, then each overlay tree
			add(v.Source)
		}
	}
	return roots
}

// RepairJournals resolves every unfinished publication (strata doctor
// --repair): rolled forward when its journal is intact and every staged
// file verifies, else discarded, removing only the temps it staged. A
// journal naming a directory no World uses is refused and left untouched.
func (e *Engine) RepairJournals(ctx context.Context, dryRun bool) ([]publish.JournalRepair, error) {
	reps, err := publish.RepairJournals(ctx, e.Paths.Journal(), publish.RepairOptions{Roots: e.sourceRoots(), Discard: true, DryRun: dryRun})
	for _, r := range reps {
		if !dryRun {
			e.Log.Info("repaired publication", "id", r.ID, "root", r.Root, "state", r.State, "action", r.Action, "removed", len(r.Removed), "err", r.Error)
		}
	}
	if reps == nil {
		reps = []publish.JournalRepair{}
	}
	if err != nil {
		return reps, fmt.Errorf("repair publications: %w", err)
	}
	return reps, nil
}

// journalProblem says what doctor found in one unfinished publication and
// what --repair will do with it.
func journalProblem(j publish.JournalRepair) string {
	what := fmt.Sprintf("unfinished publication %s (%s) to %s", j.ID, j.State, orUnknown(j.Root))
	if j.Steps > 0 {
		what += fmt.Sprintf(", %d steps, %d renames landed", j.Steps, j.Landed)
	}
	what += fmt.Sprintf(", %d staged files in the source", len(j.Temps))
	if j.Problem != "" {
		what += ": " + j.Problem
	}
	switch strings.TrimPrefix(j.Action, "would_") {
	case "refused":
		return what + "; strata doctor --repair will not touch it"
	case "discarded":
		return what + "; strata doctor --repair discards it, removing only the files it staged"
	case "rolled_forward":
		return what + "; strata doctor --repair completes it"
	}
	return what + "; run strata doctor --repair"
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown directory"
	}
	return s
}

// DoctorReport is `strata doctor`.
type DoctorReport struct {
	Kernel         string                  `json:"kernel"`
	Root           bool                    `json:"root"`
	UserNamespaces string                  `json:"user_namespaces"`
	Backends       []BackendReport         `json:"backends"`
	Preferred      string                  `json:"preferred_backend"`
	FuseBinaries   map[string]string       `json:"fuse_binaries"`
	DevFuse        bool                    `json:"dev_fuse"`
	StateRoot      string                  `json:"state_root"`
	StateFree      string                  `json:"state_root_free"`
	Config         string                  `json:"config"`
	Worlds         int                     `json:"worlds"`
	Journals       []publish.JournalRepair `json:"pending_journals"`
	Cube           CubeDoctor              `json:"cube"`
	Problems       []string                `json:"problems"`
	// CopyOnWrite says, per source tree (the Worlds' sources, else the
	// current directory), whether copy-up and snapshots are O(1) here and
	// why not. Not a problem either way: the object store copies where it
	// cannot clone.
	CopyOnWrite []CopyOnWrite `json:"copy_on_write"`
}

// BackendReport is one mount backend's probe result.
type BackendReport struct {
	Backend  string `json:"backend"`
	OK       bool   `json:"ok"`
	Reason   string `json:"reason,omitempty"`
	Duration string `json:"duration"`
}

// Doctor checks what strata needs on this machine and says why anything fails.
func (e *Engine) Doctor(ctx context.Context) *DoctorReport {
	r := &DoctorReport{Root: isRoot(), StateRoot: e.Paths.Root, Config: e.Config.Path(), FuseBinaries: map[string]string{}}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	r.UserNamespaces = userNamespaceSupport()
	for _, bin := range []string{"fuse-overlayfs", "unionfs", "fusermount3", "fusermount"} {
		if p, err := lookPath(bin); err == nil {
			r.FuseBinaries[bin] = p
		} else {
			r.FuseBinaries[bin] = "not found"
		}
	}
	_, err := os.Stat("/dev/fuse")
	r.DevFuse = err == nil
	var st unix.Statfs_t
	if unix.Statfs(e.Paths.Root, &st) == nil {
		r.StateFree = fsx.HumanBytes(int64(st.Bavail) * st.Bsize)
	}
	if ws, err := e.Worlds(); err == nil {
		r.Worlds = len(ws)
	}
	scratch, err := os.MkdirTemp(e.Paths.Scratch(), "probe-")
	if err == nil {
		defer os.RemoveAll(scratch)
		results := mount.Probe(ctx, scratch)
		for _, pr := range results {
			r.Backends = append(r.Backends, BackendReport{Backend: string(pr.Backend), OK: pr.OK, Reason: pr.Reason, Duration: pr.Duration.Round(time.Microsecond).String()})
		}
		if b, err := mount.PickBackend(results, overlay.BackendAuto); err == nil {
			r.Preferred = string(b)
		} else {
			r.Problems = append(r.Problems, err.Error())
		}
	} else {
		r.Problems = append(r.Problems, fmt.Sprintf("state root %s is not writable: %v", e.Paths.Root, err))
	}
	// Errors of the inspection are in each journal's entry.
	js, err := publish.InspectJournals(ctx, e.Paths.Journal(), e.sourceRoots())
	if err != nil && len(js) == 0 {
		r.Problems = append(r.Problems, "read journals: "+err.Error())
	}
	r.Journals = js
	broken, _ := e.BrokenWorlds()
	for _, j := range r.Journals {
		p := journalProblem(j)
		if strings.TrimPrefix(j.Action, "would_") == "refused" && len(broken) > 0 {
			// A broken World's source is unknown: it may be this one.
			p += " (" + countOf(len(broken), "broken World", "broken Worlds") + " may use it: fix their world.toml, then run it again)"
		}
		r.Problems = append(r.Problems, p)
	}
	if r.Journals == nil {
		r.Journals = []publish.JournalRepair{}
	}
	for _, b := range broken {
		r.Problems = append(r.Problems, b.Error())
	}
	r.Cube = e.cube.Doctor(ctx)
	r.CopyOnWrite = e.doctorCopyOnWrite()
	if r.Problems == nil {
		r.Problems = []string{}
	}
	return r
}

func userNamespaceSupport() string {
	if data, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(data)) == "0" {
		return "disabled (user.max_user_namespaces=0)"
	}
	if data, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(data)) == "0" {
		return "root only (kernel.unprivileged_userns_clone=0)"
	}
	if err := exec.Command("unshare", "-U", "true").Run(); err != nil {
		return "unavailable: " + err.Error()
	}
	return "available"
}

// doctorCopyOnWrite runs CheckCopyOnWrite for every source a World uses,
// or the current directory when there are none. A probe that fails says
// so in its answer.
func (e *Engine) doctorCopyOnWrite() []CopyOnWrite {
	sources := e.sourceRoots()
	if len(sources) == 0 {
		if wd, err := os.Getwd(); err == nil {
			sources = []string{wd}
		}
	}
	out := []CopyOnWrite{}
	for _, src := range sources {
		c, err := e.CopyOnWrite(src)
		if err != nil {
			c = CopyOnWrite{StateRoot: e.Paths.Root, Source: src, CopyUpWhy: "could not probe: " + err.Error(), SnapshotsWhy: "could not probe: " + err.Error()}
		}
		out = append(out, c)
	}
	return out
}
