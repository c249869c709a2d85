package cube_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

func TestSafeCallsRetryServerErrors(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	for _, status := range []int{500, 502, 503, 504, 408, 429} {
		srv.ResetRequests()
		srv.Inject(cubetest.Fault{Route: "GET /sandboxes/*", Status: status, Count: 2})
		if _, err := c.Get(ctx, sb.SandboxID); err != nil {
			t.Errorf("get after two %d: %v", status, err)
		}
		if n := len(requestsTo(srv, "GET /sandboxes/*")); n != 3 {
			t.Errorf("get after two %d: %d requests, want 3", status, n)
		}
	}
	// Retries are bounded.
	srv.ResetRequests()
	srv.Inject(cubetest.Fault{Route: "GET /health", Status: 503, Count: -1})
	_, err := c.Health(ctx)
	if !errors.Is(err, cube.ErrUnavailable) {
		t.Errorf("health under a permanent 503: %v", err)
	}
	if n := len(requestsTo(srv, "GET /health")); n != 5 {
		t.Errorf("health: %d attempts, want 1 + Max(4)", n)
	}
	srv.ClearFaults()
	// A 404 is an answer, not a failure to retry.
	srv.ResetRequests()
	if _, err := c.Get(ctx, "nope"); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	if n := len(requestsTo(srv, "GET /sandboxes/*")); n != 1 {
		t.Errorf("404 retried: %d requests", n)
	}
}

func TestCreateIsNotRetriedOnceProcessed(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	ctx := context.Background()

	for _, status := range []int{500, 502, 503, 504, 408} {
		srv.ResetRequests()
		srv.Inject(cubetest.Fault{Route: "POST /sandboxes", Status: status})
		_, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
		var apiErr *cube.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != status {
			t.Errorf("create after %d: %v", status, err)
		}
		if n := len(requestsTo(srv, "POST /sandboxes")); n != 1 {
			t.Errorf("create after %d was retried: %d requests", status, n)
		}
	}

	// The server created it but the reply was lost: no second create; the
	// sandbox stays findable by its metadata.
	srv.ResetRequests()
	srv.Inject(cubetest.Fault{Route: "POST /sandboxes", DropReply: true})
	_, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base", Metadata: map[string]string{"world": "lost"}})
	var transport *cube.TransportError
	if !errors.As(err, &transport) || !transport.Sent || errors.Is(err, cube.ErrUnavailable) {
		t.Fatalf("create with a lost reply: %v, want a sent TransportError", err)
	}
	if n := len(requestsTo(srv, "POST /sandboxes")); n != 1 {
		t.Errorf("create with a lost reply was retried: %d requests", n)
	}
	if left, _ := c.List(ctx, map[string]string{"world": "lost"}); len(left) != 1 {
		t.Errorf("lost-reply sandbox not findable by metadata: %+v", left)
	}
}

func TestCreateRetriesWhenNotProcessed(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	ctx := context.Background()

	srv.Inject(cubetest.Fault{Route: "POST /sandboxes", Status: http.StatusServiceUnavailable, RetryAfter: time.Second})
	srv.Inject(cubetest.Fault{Route: "POST /sandboxes", Status: http.StatusTooManyRequests})
	start := time.Now()
	sb, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	if err != nil {
		t.Fatalf("create after 503+Retry-After and 429: %v", err)
	}
	if time.Since(start) < 900*time.Millisecond {
		t.Errorf("Retry-After: 1 not honoured (%v)", time.Since(start))
	}
	if n := len(requestsTo(srv, "POST /sandboxes")); n != 3 {
		t.Errorf("%d create requests, want 3", n)
	}
	if ids := srv.SandboxIDs(); len(ids) != 1 || ids[0] != sb.SandboxID {
		t.Errorf("sandboxes = %v, want exactly %s", ids, sb.SandboxID)
	}
}

func TestUnreachableThenUp(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	ctx := context.Background()
	srv.Down()
	c := newClient(t, srv, func(cfg *cube.Config) { cfg.Retry = cube.RetryPolicy{Max: 2, Base: time.Millisecond} })
	_, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	var transport *cube.TransportError
	if !errors.Is(err, cube.ErrUnavailable) || !errors.As(err, &transport) || transport.Sent {
		t.Fatalf("create while down: %v, want an unsent ErrUnavailable", err)
	}
	// Connection refused is retried even for create; Cube coming back
	// during the retries is enough.
	patient := newClient(t, srv, func(cfg *cube.Config) {
		cfg.Retry = cube.RetryPolicy{Max: 20, Base: 20 * time.Millisecond, MaxDelay: 40 * time.Millisecond}
	})
	go func() {
		time.Sleep(100 * time.Millisecond)
		if err := srv.Up(); err != nil {
			t.Errorf("up: %v", err)
		}
	}()
	sb, err := patient.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	if err != nil {
		t.Fatalf("create while coming up: %v", err)
	}
	if ids := srv.SandboxIDs(); len(ids) != 1 || ids[0] != sb.SandboxID {
		t.Errorf("sandboxes = %v", ids)
	}
}

func TestLostDeleteReplyCountsAsDone(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	srv.Inject(cubetest.Fault{Route: "DELETE /sandboxes/*", DropReply: true})
	if err := c.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatalf("delete with a lost reply: %v", err)
	}
	dels := requestsTo(srv, "DELETE /sandboxes/*")
	if len(dels) != 2 || dels[1].Status != http.StatusNotFound {
		t.Errorf("deletes = %d, want the lost one then a 404", len(dels))
	}
	if ids := srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
}

func TestUnknownTemplate(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	_, err := c.Create(context.Background(), cube.CreateRequest{TemplateID: "no-such"})
	var apiErr *cube.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 500 || !errors.Is(err, cube.ErrNotFound) {
		t.Fatalf("unknown template: %v, want a 500 that is ErrNotFound", err)
	}
	if n := len(requestsTo(srv, "POST /sandboxes")); n != 1 {
		t.Errorf("unknown template retried: %d requests", n)
	}
}

func TestPlainTextErrorKept(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	const text = "Failed to deserialize the JSON body into the target type: missing field `snapshotID`"
	srv.Inject(cubetest.Fault{Route: "POST /sandboxes/*/rollback", Status: 422, PlainText: true, Message: text})
	err := c.Rollback(context.Background(), "sb1", "snap-1")
	var apiErr *cube.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 422 || apiErr.Message != text || apiErr.Code != 0 {
		t.Fatalf("422: %#v", err)
	}
}

func TestDeadlineRespected(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	srv.Inject(cubetest.Fault{Route: "GET /health", Delay: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Health(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, cube.ErrTimeout) {
		t.Errorf("slow health: %v, want a deadline error", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("deadline ignored: returned after %v", time.Since(start))
	}
}
