package cubetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
)

// CubeAPI's per-route budgets (30 s default, 120 s pause/resume/connect,
// 240 s snapshot/rollback/DELETE /templates/{id}) answer 408 with an empty
// body when a request outlives them; the fake does too, with budgets set
// short here.
func TestRouteTimeoutsAnswer408(t *testing.T) {
	// Budgets short for a test, with room for the work itself on a slow
	// machine (-race): a request inside its budget has 190 ms or more to spare.
	s := New(t, Options{RouteTimeout: 200 * time.Millisecond, LongRouteTimeout: 600 * time.Millisecond, SnapshotRouteTimeout: 1500 * time.Millisecond})
	id := create(t, s, `{"templateID":"base"}`)
	check := func(route string, delay time.Duration, method, path, body string, want int) {
		t.Helper()
		s.Inject(Fault{Route: route, Delay: delay})
		start := time.Now()
		resp := call(t, s, method, s.URL()+path, "", "application/json", []byte(body))
		got, _ := io.ReadAll(resp.Body)
		s.ClearFaults()
		if resp.StatusCode != want {
			t.Errorf("%s with %s of work: %d %s, want %d", route, delay, resp.StatusCode, got, want)
		}
		if want == http.StatusRequestTimeout {
			if len(got) != 0 {
				t.Errorf("%s: 408 body %q, want empty (tower-http TimeoutLayer)", route, got)
			}
			if took := time.Since(start); took >= delay {
				t.Errorf("%s: 408 after %s, not at its budget", route, took)
			}
		}
	}
	check("GET /sandboxes/*", 400*time.Millisecond, "GET", "/sandboxes/"+id, "", http.StatusRequestTimeout)
	check("GET /sandboxes/*", 10*time.Millisecond, "GET", "/sandboxes/"+id, "", http.StatusOK)
	// 300 ms is past the default budget but within pause's.
	check("POST /sandboxes/*/pause", 300*time.Millisecond, "POST", "/sandboxes/"+id+"/pause", "", http.StatusNoContent)
	check("POST /sandboxes/*/connect", 900*time.Millisecond, "POST", "/sandboxes/"+id+"/connect", `{"timeout":60}`, http.StatusRequestTimeout)
	check("POST /sandboxes/*/connect", 300*time.Millisecond, "POST", "/sandboxes/"+id+"/connect", `{"timeout":60}`, http.StatusOK)
	check("POST /sandboxes/*/snapshots", 700*time.Millisecond, "POST", "/sandboxes/"+id+"/snapshots", `{}`, http.StatusCreated)
	check("POST /sandboxes/*/rollback", 1800*time.Millisecond, "POST", "/sandboxes/"+id+"/rollback", `{"snapshotID":"snap-x"}`, http.StatusRequestTimeout)

	// The client reads a 408 as a timeout and retries a safe call.
	c, err := cube.New(cube.Config{Endpoint: s.URL(), ProxyAddr: s.ProxyAddr(), Retry: cube.RetryPolicy{Max: 2, Base: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	s.Inject(Fault{Route: "GET /sandboxes/*", Delay: 400 * time.Millisecond})
	if _, err := c.Get(context.Background(), id); err != nil {
		t.Errorf("one 408 then a retry: %v", err)
	}
	s.Inject(Fault{Route: "GET /sandboxes/*", Delay: 400 * time.Millisecond, Count: -1})
	_, err = c.Get(context.Background(), id)
	var apiErr *cube.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusRequestTimeout {
		t.Errorf("408 every time: %v, want an APIError 408", err)
	}
	s.ClearFaults()
}
