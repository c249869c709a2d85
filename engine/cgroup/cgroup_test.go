package cgroup

import (
	"fmt"
	"os"
	"testing"

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
