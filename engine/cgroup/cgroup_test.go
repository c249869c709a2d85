package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/world"
)

// Two Worlds start sessions at once: the first World's brand-new cgroups
// (empty until its init is cloned into them) must survive the second
// World's sweep of idle Worlds. Before, the sweep removed them, and the
// first session ran with no cgroup: no freeze for its snapshots, no usage.
func TestSweepSparesAnotherWorldsNewSession(t *testing.T) {
	if V2Root() == "" || os.Geteuid() != 0 {
		t.Skip("needs a writable cgroup v2 tree (root)")
	}
	id := fmt.Sprintf("test%d", os.Getpid())
	a := &world.World{Name: "sweep-a", ID: id}
	b := &world.World{Name: "sweep-b", ID: id}
	t.Cleanup(func() { RemoveWorld(a); RemoveWorld(b) })
	da := PrepareSession(a, "s1")
	if da == "" {
		t.Fatal("no session cgroup for a")
	}
	if db := PrepareSession(b, "s1"); db == "" {
		t.Fatal("no session cgroup for b")
	}
	if _, err := os.Stat(da); err != nil {
		t.Fatalf("a's new session cgroup was swept by b's start: %v", err)
	}
}

// A resident init's new session cgroup (r-*/<session>, empty until the
// command is born in it) must survive another World's sweep, though the
// World's and its resident's cgroups are no longer young (making it
// touches r-*, which makes the World young again).
func TestSweepSparesAResidentsNewSession(t *testing.T) {
	if V2Root() == "" || os.Geteuid() != 0 {
		t.Skip("needs a writable cgroup v2 tree (root)")
	}
	old := youngFor
	youngFor = 200 * time.Millisecond
	t.Cleanup(func() { youngFor = old })
	id := fmt.Sprintf("test%d", os.Getpid())
	a := &world.World{Name: "sweep-ra", ID: id}
	b := &world.World{Name: "sweep-rb", ID: id}
	t.Cleanup(func() { RemoveWorld(a); RemoveWorld(b) })
	r := PrepareResident(a)
	if r == "" {
		t.Fatal("no resident cgroup for a")
	}
	time.Sleep(300 * time.Millisecond) // a's World and resident cgroups are old now
	s := filepath.Join(r, "s1")
	if err := os.Mkdir(s, 0o755); err != nil {
		t.Fatal(err)
	}
	if db := PrepareSession(b, "s1"); db == "" { // b's first cgroup sweeps idle Worlds
		t.Fatal("no session cgroup for b")
	}
	if _, err := os.Stat(s); err != nil {
		t.Fatalf("a resident's new session cgroup was swept by another World's start: %v", err)
	}
}
