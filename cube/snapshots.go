package cube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SnapshotInfo describes a Cube snapshot (memory and rootfs of a sandbox).
// Its id also works as a CreateRequest.TemplateID.
type SnapshotInfo struct {
	SnapshotID string    `json:"snapshotID"`
	Names      []string  `json:"names"`
	SandboxID  string    `json:"sandboxID,omitempty"`
	CreatedAt  time.Time `json:"createdAt,omitzero"`
}

// SnapshotIDPrefix starts every real snapshot id.
const SnapshotIDPrefix = "snap-"

// snapshotPageLimit is CubeAPI's largest page.
const snapshotPageLimit = 100

// CloneOfKey is the metadata key Clone puts on every clone (value: the
// snapshot id) so that clones whose create reply was lost can be found and
// removed.
const CloneOfKey = "clone-of"

// Snapshot snapshots a running sandbox (201). CubeAPI runs one snapshot per
// sandbox at a time and answers 409 meanwhile; Snapshot backs off and
// retries on that, never on a reply that may mean a snapshot was taken.
func (c *Client) Snapshot(ctx context.Context, id, name string) (SnapshotInfo, error) {
	body := []byte("{}")
	if name != "" {
		var err error
		if body, err = json.Marshal(struct {
			Name string `json:"name"`
		}{name}); err != nil {
			return SnapshotInfo{}, fmt.Errorf("cube: encode snapshot name: %w", err)
		}
	}
	op := "snapshot sandbox " + id
	rep, err := c.do(ctx, call{
		op: op, method: http.MethodPost, url: c.apiURL("/sandboxes/"+url.PathEscape(id)+"/snapshots", nil),
		body: body, contentType: "application/json", class: retrySnapshot, ok: []int{http.StatusCreated, http.StatusOK},
	})
	if err != nil {
		return SnapshotInfo{}, err
	}
	var info SnapshotInfo
	if err := decodeJSON(rep, &info); err != nil {
		return SnapshotInfo{}, fmt.Errorf("cube: %s: %w", op, err)
	}
	if info.SnapshotID == "" {
		return SnapshotInfo{}, fmt.Errorf("cube: %s: reply has no snapshotID", op)
	}
	if !strings.HasPrefix(info.SnapshotID, SnapshotIDPrefix) {
		// CubeAPI before the snapshot endpoint reached CubeMaster answered
		// a fresh request id without taking anything.
		return SnapshotInfo{}, fmt.Errorf("cube: %s: %w: the reply's id %q is not a %s… snapshot id (CubeMaster lacks the snapshot endpoint; upgrade CubeSandbox)",
			op, ErrSnapshotUnsupported, info.SnapshotID, SnapshotIDPrefix)
	}
	if info.SandboxID == "" {
		info.SandboxID = id
	}
	return info, nil
}

// ListSnapshots returns every snapshot of a sandbox (all sandboxes when id
// is empty), following the x-next-token cursor.
func (c *Client) ListSnapshots(ctx context.Context, sandboxID string) ([]SnapshotInfo, error) {
	var all []SnapshotInfo
	seen := map[string]bool{}
	token := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(snapshotPageLimit)}}
		if sandboxID != "" {
			q.Set("sandboxID", sandboxID)
		}
		if token != "" {
			q.Set("nextToken", token)
		}
		rep, err := c.do(ctx, call{
			op: "list snapshots", method: http.MethodGet, url: c.apiURL("/snapshots", q),
			class: retrySafe, ok: []int{http.StatusOK},
		})
		if err != nil {
			return nil, err
		}
		var page []SnapshotInfo
		if err := decodeJSON(rep, &page); err != nil {
			return nil, fmt.Errorf("cube: list snapshots: %w", err)
		}
		all = append(all, page...)
		token = rep.header.Get("x-next-token")
		if token == "" {
			return all, nil
		}
		if seen[token] {
			return nil, fmt.Errorf("cube: list snapshots: server repeated page token %q", token)
		}
		seen[token] = true
	}
}

// DeleteSnapshot removes a snapshot (DELETE /templates/{id} → 200). A 404
// on a retry counts as done.
func (c *Client) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	_, err := c.do(ctx, call{
		op: "delete snapshot " + snapshotID, method: http.MethodDelete, url: c.apiURL("/templates/"+url.PathEscape(snapshotID), nil),
		class: retrySafe, ok: []int{http.StatusOK, http.StatusNoContent}, goneOK: true,
	})
	return err
}

// Rollback restores a sandbox to one of its own snapshots; its id stays.
// The VM is replaced, so pooled connections to it are dropped afterwards.
func (c *Client) Rollback(ctx context.Context, id, snapshotID string) error {
	body, err := json.Marshal(struct {
		SnapshotID string `json:"snapshotID"`
	}{snapshotID})
	if err != nil {
		return fmt.Errorf("cube: encode rollback: %w", err)
	}
	_, err = c.do(ctx, call{
		op: "rollback sandbox " + id + " to " + snapshotID, method: http.MethodPost,
		url:  c.apiURL("/sandboxes/"+url.PathEscape(id)+"/rollback", nil),
		body: body, contentType: "application/json", class: retryUnsent, ok: []int{http.StatusOK, http.StatusCreated},
	})
	c.CloseIdleConnections()
	return err
}

// Clone makes n sandboxes from one new snapshot of sandbox id, with at most
// concurrency creates in flight (1 when concurrency <= 0). See CloneWith.
func (c *Client) Clone(ctx context.Context, id string, n, concurrency int) ([]*Sandbox, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cube: clone sandbox %s: count %d: want at least 1", id, n)
	}
	return c.CloneWith(ctx, id, make([]CreateRequest, n), concurrency)
}

// CloneWith snapshots sandbox id once, then creates one sandbox per request
// from that snapshot (each request's TemplateID is replaced by the snapshot
// id, and metadata[CloneOfKey] is set to it). If any create fails, the
// clones already made and the snapshot are deleted and the error returned.
// On success the snapshot is kept: every clone's TemplateID is its id, and
// the caller deletes it (DeleteSnapshot) once it has no further use.
func (c *Client) CloneWith(ctx context.Context, id string, reqs []CreateRequest, concurrency int) ([]*Sandbox, error) {
	if len(reqs) == 0 {
		return nil, fmt.Errorf("cube: clone sandbox %s: no clones requested", id)
	}
	concurrency = max(concurrency, 1)
	snap, err := c.Snapshot(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("cube: clone sandbox %s: %w", id, err)
	}

	// A failure stops new creates but lets those in flight finish: a create
	// cancelled mid-way could still happen on the server, unseen by us.
	failed := make(chan struct{})
	var failOnce sync.Once
	clones := make([]*Sandbox, len(reqs))
	errs := make([]error, len(reqs))
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
launch:
	for i, req := range reqs {
		req.TemplateID = snap.SnapshotID
		meta := make(map[string]string, len(req.Metadata)+1)
		for k, v := range req.Metadata {
			meta[k] = v
		}
		meta[CloneOfKey] = snap.SnapshotID
		req.Metadata = meta
		select {
		case slots <- struct{}{}:
		case <-failed:
			break launch
		case <-ctx.Done():
			errs[i] = ctx.Err()
			break launch
		}
		select {
		case <-failed:
			<-slots
			break launch
		default:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			sb, err := c.Create(ctx, req)
			if err != nil {
				errs[i] = err
				failOnce.Do(func() { close(failed) })
				return
			}
			sb.TemplateID = snap.SnapshotID
			clones[i] = sb
		}()
	}
	wg.Wait()

	var firstErr error
	for i, err := range errs {
		if err != nil {
			firstErr = fmt.Errorf("cube: clone sandbox %s: clone %d of %d: %w", id, i+1, len(reqs), err)
			break
		}
	}
	if firstErr == nil {
		return clones, nil
	}
	return nil, errors.Join(firstErr, c.removeClones(ctx, clones, snap.SnapshotID))
}

// removeClones deletes the clones of a failed CloneWith and its snapshot,
// even when ctx is already cancelled. Clones whose create reply was lost
// are found by their CloneOfKey metadata.
func (c *Client) removeClones(ctx context.Context, clones []*Sandbox, snapshotID string) error {
	cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	var errs []error
	deleted := map[string]bool{}
	for _, sb := range clones {
		if sb == nil {
			continue
		}
		if err := c.Delete(cleanupCtx, sb.SandboxID); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("clean up clone %s: %w", sb.SandboxID, err))
		}
		deleted[sb.SandboxID] = true
	}
	if leftovers, err := c.List(cleanupCtx, map[string]string{CloneOfKey: snapshotID}); err != nil {
		errs = append(errs, fmt.Errorf("clean up clones of %s: %w", snapshotID, err))
	} else {
		for _, sb := range leftovers {
			if deleted[sb.SandboxID] {
				continue
			}
			if err := c.Delete(cleanupCtx, sb.SandboxID); err != nil && !errors.Is(err, ErrNotFound) {
				errs = append(errs, fmt.Errorf("clean up clone %s: %w", sb.SandboxID, err))
			}
		}
	}
	if err := c.DeleteSnapshot(cleanupCtx, snapshotID); err != nil && !errors.Is(err, ErrNotFound) {
		errs = append(errs, fmt.Errorf("clean up snapshot: %w", err))
	}
	return errors.Join(errs...)
}
