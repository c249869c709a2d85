package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/overlay"
)

// recover finishes publications a crash interrupted, on every start.
func (e *Engine) recover(ctx context.Context) error {
	pending, err := overlay.PendingJournals(e.Paths.Journal())
	if err != nil || len(pending) == 0 {
		return err
	}
	reps, err := overlay.Recover(ctx, e.Paths.Journal())
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

// DoctorReport is `strata doctor`.
type DoctorReport struct {
	Kernel         string                `json:"kernel"`
	Root           bool                  `json:"root"`
	UserNamespaces string                `json:"user_namespaces"`
	Backends       []BackendReport       `json:"backends"`
	Preferred      string                `json:"preferred_backend"`
	FuseBinaries   map[string]string     `json:"fuse_binaries"`
	DevFuse        bool                  `json:"dev_fuse"`
	StateRoot      string                `json:"state_root"`
	StateFree      string                `json:"state_root_free"`
	Config         string                `json:"config"`
	Worlds         int                   `json:"worlds"`
	Journals       []overlay.JournalInfo `json:"pending_journals"`
	Cube           CubeDoctor            `json:"cube"`
	Problems       []string              `json:"problems"`
}

// BackendReport is one mount backend's probe result.
type BackendReport struct {
	Backend  string `json:"backend"`
	OK       bool   `json:"ok"`
	Reason   string `json:"reason,omitempty"`
	Duration string `json:"duration"`
}

// CubeDoctor is the cube part of doctor.
type CubeDoctor struct {
	Endpoint string `json:"endpoint,omitempty"`
	Status   string `json:"status"`
	Detail   string `json:"detail,omitempty"`
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
		r.StateFree = HumanBytes(int64(st.Bavail) * st.Bsize)
	}
	if ws, err := e.Worlds(); err == nil {
		r.Worlds = len(ws)
	}
	scratch, err := os.MkdirTemp(e.Paths.Scratch(), "probe-")
	if err == nil {
		defer os.RemoveAll(scratch)
		results := overlay.Probe(ctx, scratch)
		for _, pr := range results {
			r.Backends = append(r.Backends, BackendReport{Backend: string(pr.Backend), OK: pr.OK, Reason: pr.Reason, Duration: pr.Duration.Round(time.Microsecond).String()})
		}
		if b, err := overlay.PickBackend(results, overlay.BackendAuto); err == nil {
			r.Preferred = string(b)
		} else {
			r.Problems = append(r.Problems, err.Error())
		}
	} else {
		r.Problems = append(r.Problems, fmt.Sprintf("state root %s is not writable: %v", e.Paths.Root, err))
	}
	if js, err := overlay.PendingJournals(e.Paths.Journal()); err == nil {
		r.Journals = js
		for _, j := range js {
			r.Problems = append(r.Problems, fmt.Sprintf("unfinished publication %s (%s) to %s: %s", j.ID, j.State, j.Root, j.Err))
		}
	} else {
		r.Problems = append(r.Problems, "read journals: "+err.Error())
	}
	if r.Journals == nil {
		r.Journals = []overlay.JournalInfo{}
	}
	r.Cube = e.cubeDoctor(ctx)
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

func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
