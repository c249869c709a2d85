package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

type cowJSON struct {
	CopyOnWrite []struct {
		Source       string `json:"source"`
		CopyUp       bool   `json:"copy_up"`
		CopyUpWhy    string `json:"copy_up_why"`
		Snapshots    bool   `json:"snapshots"`
		SnapshotsWhy string `json:"snapshots_why"`
	} `json:"copy_on_write"`
}

// strata doctor says, for each World's source, whether copy-up and
// snapshots are O(1) and why not: yes with the state root and the source
// on one XFS with reflinks, no (saying why) with the state root on ext4/tmpfs.
func TestE2EDoctorCopyOnWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	var r cowJSON
	must(t, json.Unmarshal([]byte(e.ok("doctor", "--json")), &r))
	if len(r.CopyOnWrite) != 1 || r.CopyOnWrite[0].Source != e.source {
		t.Fatalf("doctor copy_on_write = %+v, want one answer for %s", r.CopyOnWrite, e.source)
	}
	c := r.CopyOnWrite[0]
	if fs := fsOf(t, e.home); fs != "xfs" && fs != "btrfs" {
		if c.CopyUp || c.Snapshots || !strings.Contains(c.SnapshotsWhy, "no reflinks") || c.CopyUpWhy == "" {
			t.Fatalf("state root on %s: doctor says %+v", fs, c)
		}
	}
	out := e.ok("doctor")
	if !strings.Contains(out, "copy-on-write for "+e.source) || !strings.Contains(out, "copy-up: ") || !strings.Contains(out, "snapshots: ") {
		t.Fatalf("doctor's text lacks the copy-on-write answer:\n%s", out)
	}

	// Both on one XFS with reflinks: O(1) both.
	mnt := overlaytest.XFSReflink(t)
	x := &env{t: t, home: filepath.Join(mnt, "home"), source: filepath.Join(mnt, "src")}
	x.vars = []string{"STRATA_HOME=" + x.home, "STRATA_CONFIG=" + filepath.Join(mnt, "config.toml"), "XDG_STATE_HOME=" + filepath.Join(mnt, "state")}
	must(t, os.MkdirAll(x.source, 0o755))
	must(t, os.WriteFile(filepath.Join(x.source, "a.txt"), []byte("a\n"), 0o644))
	t.Cleanup(x.cleanup)
	x.ok("new", "w")
	var rx cowJSON
	must(t, json.Unmarshal([]byte(x.ok("doctor", "--json")), &rx))
	if len(rx.CopyOnWrite) != 1 || !rx.CopyOnWrite[0].CopyUp || !rx.CopyOnWrite[0].Snapshots {
		t.Fatalf("state root and source on XFS (reflink=1): doctor says %+v", rx.CopyOnWrite)
	}
}

func fsOf(t *testing.T, dir string) string {
	out, err := exec.Command("stat", "-f", "-c", "%T", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
