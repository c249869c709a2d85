package cube_test

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

func TestSnapshotRetriesConflict(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	srv.ResetRequests()
	snap, err := c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil || !strings.HasPrefix(snap.SnapshotID, "snap-") || len(snap.Names) != 0 {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
	checkFixture(t, "snapshot", onlyRequest(t, srv, "POST /sandboxes/*/snapshots"))

	srv.ResetRequests()
	srv.Inject(cubetest.Fault{Route: "POST /sandboxes/*/snapshots", Status: http.StatusConflict, Count: 2})
	named, err := c.Snapshot(ctx, sb.SandboxID, "before-refactor")
	if err != nil || len(named.Names) != 1 || named.Names[0] != "before-refactor" {
		t.Fatalf("snapshot after 409s = %+v, %v", named, err)
	}
	reqs := requestsTo(srv, "POST /sandboxes/*/snapshots")
	if len(reqs) != 3 {
		t.Errorf("%d snapshot requests, want 3 (two 409s retried)", len(reqs))
	}
	checkFixture(t, "snapshot-named", reqs[2])

	// 500 may mean the snapshot was taken: never retried.
	srv.ResetRequests()
	srv.Inject(cubetest.Fault{Route: "POST /sandboxes/*/snapshots", Status: 500})
	if _, err := c.Snapshot(ctx, sb.SandboxID, ""); err == nil {
		t.Error("snapshot after 500 succeeded")
	}
	if n := len(requestsTo(srv, "POST /sandboxes/*/snapshots")); n != 1 {
		t.Errorf("snapshot after 500 retried: %d requests", n)
	}
	// Retries stop at Max: a 409 that persists surfaces as ErrConflict.
	srv.Inject(cubetest.Fault{Route: "POST /sandboxes/*/snapshots", Status: http.StatusConflict, Count: -1})
	if _, err := c.Snapshot(ctx, sb.SandboxID, ""); !errors.Is(err, cube.ErrConflict) {
		t.Errorf("persistent 409: %v, want ErrConflict", err)
	}
}

func TestListSnapshotsFollowsNextToken(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{SnapshotPageSize: 2})
	c := newClient(t, srv)
	ctx := context.Background()
	a, _ := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	b, _ := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	var want []string
	for i := range 5 {
		snap, err := c.Snapshot(ctx, a.SandboxID, "")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, snap.SnapshotID)
		if i == 2 {
			if _, err := c.Snapshot(ctx, b.SandboxID, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv.ResetRequests()
	got, err := c.ListSnapshots(ctx, a.SandboxID)
	if err != nil {
		t.Fatalf("list snapshots: %v", err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.SnapshotID)
		if s.SandboxID != a.SandboxID {
			t.Errorf("snapshot %s of %s listed for %s", s.SnapshotID, s.SandboxID, a.SandboxID)
		}
	}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("snapshots = %v, want %v", ids, want)
	}
	pages := requestsTo(srv, "GET /snapshots")
	if len(pages) != 3 {
		t.Fatalf("%d pages fetched, want 3", len(pages))
	}
	checkFixture(t, "list-snapshots-page2", pages[1])
	all, err := c.ListSnapshots(ctx, "")
	if err != nil || len(all) != 6 {
		t.Errorf("all snapshots = %d, %v; want 6", len(all), err)
	}
}

func TestDeleteSnapshot(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	ctx := context.Background()
	sb, _ := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	snap, err := c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		t.Fatal(err)
	}
	// A snapshot outlives its sandbox and works as a template.
	if err := c.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, cube.CreateRequest{TemplateID: snap.SnapshotID}); err != nil {
		t.Fatalf("create from snapshot of a deleted sandbox: %v", err)
	}
	srv.ResetRequests()
	if err := c.DeleteSnapshot(ctx, snap.SnapshotID); err != nil {
		t.Fatalf("delete snapshot: %v", err)
	}
	checkFixture(t, "delete-snapshot", onlyRequest(t, srv, "DELETE /templates/*"))
	if ids := srv.SnapshotIDs(); len(ids) != 0 {
		t.Errorf("snapshots left: %v", ids)
	}
	if _, err := c.Create(ctx, cube.CreateRequest{TemplateID: snap.SnapshotID}); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("create from a deleted snapshot: %v, want ErrNotFound (130404)", err)
	}
	if err := c.DeleteSnapshot(ctx, snap.SnapshotID); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
}

func TestRollbackRestoresSandboxState(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	if err := c.WriteFile(ctx, sb, "/tmp/state.txt", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(ctx, sb.SandboxID, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, sb, "/tmp/state.txt", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, sb, cube.ExecRequest{Cmd: "sh", Args: []string{"-c", "echo later > /tmp/extra"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	if err := c.Rollback(ctx, sb.SandboxID, snap.SnapshotID); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	checkFixture(t, "rollback", onlyRequest(t, srv, "POST /sandboxes/*/rollback"))
	if got, err := c.ReadFile(ctx, sb, "/tmp/state.txt"); err != nil || string(got) != "v1" {
		t.Errorf("state after rollback = %q, %v; want v1", got, err)
	}
	if _, err := c.ReadFile(ctx, sb, "/tmp/extra"); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("file written after the snapshot: %v, want ErrNotFound", err)
	}
	// Only the sandbox's own snapshots.
	other, _ := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	var apiErr *cube.APIError
	if err := c.Rollback(ctx, other.SandboxID, snap.SnapshotID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Errorf("rollback to another sandbox's snapshot: %v, want 400", err)
	}
	if err := c.Rollback(ctx, sb.SandboxID, "snap-missing"); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("rollback to a missing snapshot: %v", err)
	}
}

func TestCloneMakesSandboxesFromOneSnapshot(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	ctx := context.Background()
	sb, _ := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	if err := c.WriteFile(ctx, sb, "/tmp/seed", []byte("from parent")); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	// Slow creates make the concurrency bound observable.
	srv.Inject(cubetest.Fault{Route: "POST /sandboxes", Delay: 80 * time.Millisecond, Count: -1})
	clones, err := c.Clone(ctx, sb.SandboxID, 5, 2)
	if err != nil {
		t.Fatalf("clone: %v", err)
	}
	snaps := srv.SnapshotIDs()
	if len(clones) != 5 || len(snaps) != 1 {
		t.Fatalf("%d clones, snapshots %v", len(clones), snaps)
	}
	for _, cl := range clones {
		if cl.TemplateID != snaps[0] {
			t.Errorf("clone %s template %s, want the snapshot %s", cl.SandboxID, cl.TemplateID, snaps[0])
		}
		if got, err := c.ReadFile(ctx, cl, "/tmp/seed"); err != nil || string(got) != "from parent" {
			t.Errorf("clone %s sees %q, %v", cl.SandboxID, got, err)
		}
	}
	if peak := maxInFlight(requestsTo(srv, "POST /sandboxes")); peak != 2 {
		t.Errorf("creates in flight peaked at %d, want 2", peak)
	}
}

func TestCloneFailureCleansUp(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fault       cubetest.Fault
		concurrency int
		creates     int // requests expected, -1 for "at most 6"
	}{
		// The third create fails outright; nothing after it starts.
		{"server error", cubetest.Fault{Route: "POST /sandboxes", Skip: 2, Status: 500}, 1, 3},
		// The third create happens but its reply is lost: only the clone
		// metadata can find that sandbox.
		{"lost reply", cubetest.Fault{Route: "POST /sandboxes", Skip: 2, DropReply: true}, 1, 3},
		// Concurrent creates: the ones in flight finish and are removed.
		{"concurrent", cubetest.Fault{Route: "POST /sandboxes", Skip: 3, Status: 503}, 3, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := cubetest.New(t, cubetest.Options{})
			c := newClient(t, srv)
			ctx := context.Background()
			sb, _ := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
			srv.ResetRequests()
			srv.Inject(tc.fault)
			clones, err := c.Clone(ctx, sb.SandboxID, 6, tc.concurrency)
			if err == nil || clones != nil {
				t.Fatalf("clone = %v, %v; want a failure", clones, err)
			}
			if ids := srv.SandboxIDs(); len(ids) != 1 || ids[0] != sb.SandboxID {
				t.Errorf("sandboxes after failed clone = %v, want only the parent %s", ids, sb.SandboxID)
			}
			if snaps := srv.SnapshotIDs(); len(snaps) != 0 {
				t.Errorf("snapshot left behind: %v", snaps)
			}
			n := len(requestsTo(srv, "POST /sandboxes"))
			if (tc.creates >= 0 && n != tc.creates) || n > 6 {
				t.Errorf("%d creates, want %d", n, tc.creates)
			}
		})
	}
}

// maxInFlight is the largest number of requests being handled at once.
func maxInFlight(reqs []cubetest.Request) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range reqs {
		edges = append(edges, edge{r.Start, 1}, edge{r.Start.Add(r.Duration), -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	cur, peak := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

// TestSnapshotFromOldMasterIsReported: an older CubeAPI whose CubeMaster
// lacks the snapshot endpoint answers 201 with a made-up id; Snapshot must
// say so instead of handing back an id that restores nothing.
func TestSnapshotFromOldMasterIsReported(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{LegacySnapshots: true})
	c := newClient(t, srv)
	sb, err := c.Create(context.Background(), cube.CreateRequest{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Snapshot(context.Background(), sb.SandboxID, "x")
	if !errors.Is(err, cube.ErrSnapshotUnsupported) {
		t.Fatalf("snapshot = %+v, %v; want ErrSnapshotUnsupported", info, err)
	}
	if !strings.Contains(err.Error(), "upgrade") {
		t.Errorf("message %q does not say what to do", err)
	}
}
