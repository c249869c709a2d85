package cube_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

func TestCreateSendsExactRequest(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{Templates: []string{"tpl-2c4g"}})
	c := newClient(t, srv, func(cfg *cube.Config) { cfg.APIKey = "k-123" })
	sb, err := c.Create(context.Background(), cube.CreateRequest{
		TemplateID:          "tpl-2c4g",
		Timeout:             cube.Seconds(30),
		EnvVars:             map[string]string{"WORLD": "a", "LANG": "C.UTF-8"},
		Metadata:            map[string]string{"strata.world": "a"},
		HostMounts:          []cube.HostMount{{HostPath: "/etc", MountPath: "/etc", ReadOnly: true}},
		AllowInternetAccess: cube.Bool(false),
		AutoPause:           true,
		AutoResume:          &cube.AutoResume{Enabled: true},
		Network:             &cube.Network{DenyOut: []string{"10.0.0.0/8"}},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if sb.SandboxID != "sb00000001" || sb.TemplateID != "tpl-2c4g" || sb.Domain != "cube.app" || sb.EnvdVersion == "" {
		t.Errorf("sandbox = %+v", sb)
	}
	checkFixture(t, "create", onlyRequest(t, srv, "POST /sandboxes"))

	listed, err := c.Get(context.Background(), sb.SandboxID)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	// CubeAPI moves host-mount into a CubeMaster annotation: it is not
	// listed back, and nothing may rely on reading it there.
	if v, ok := listed.Metadata[cube.HostMountKey]; ok {
		t.Errorf("metadata lists %s = %q; CubeAPI strips it", cube.HostMountKey, v)
	}
	if listed.State != cube.StateRunning || listed.Domain != "cube.app" || listed.Metadata["strata.world"] != "a" {
		t.Errorf("get = %+v", listed)
	}
}

func TestCreateRejectsHostMountsTwice(t *testing.T) {
	_, err := cube.EncodeCreateRequest(cube.CreateRequest{
		TemplateID: "base", Metadata: map[string]string{cube.HostMountKey: "[]"}, HostMounts: []cube.HostMount{{HostPath: "/a", MountPath: "/a"}},
	})
	if err == nil {
		t.Fatal("want an error when host mounts are given twice")
	}
}

func TestListFiltersByMetadata(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	ctx := context.Background()
	for _, meta := range []map[string]string{
		{"world": "a", "owner": "x y&z"},
		{"world": "a", "owner": "other"},
		{"world": "b", "owner": "x y&z"},
	} {
		if _, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base", Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}
	srv.ResetRequests()
	got, err := c.List(ctx, map[string]string{"world": "a", "owner": "x y&z"})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(got) != 1 || got[0].SandboxID != "sb00000001" {
		t.Fatalf("list = %+v, want only sb00000001", got)
	}
	checkFixture(t, "list", onlyRequest(t, srv, "GET /sandboxes"))
	all, err := c.List(ctx, nil)
	if err != nil || len(all) != 3 {
		t.Fatalf("unfiltered list = %d sandboxes, %v; want 3", len(all), err)
	}
}

func TestDeleteThenNotFound(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	if err := c.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	checkFixture(t, "delete", onlyRequest(t, srv, "DELETE /sandboxes/*"))
	if _, err := c.Get(ctx, sb.SandboxID); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	err := c.Delete(ctx, sb.SandboxID)
	var apiErr *cube.APIError
	if !errors.Is(err, cube.ErrNotFound) || !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != 404 {
		t.Errorf("second delete: %v, want a 404 APIError", err)
	}
	if ids := srv.SandboxIDs(); len(ids) != 0 {
		t.Errorf("fake still has %v", ids)
	}
}

func TestPauseAndConnect(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{}, cube.CreateRequest{})
	ctx := context.Background()
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	checkFixture(t, "pause", onlyRequest(t, srv, "POST /sandboxes/*/pause"))
	got, err := c.Get(ctx, sb.SandboxID)
	if err != nil || got.State != cube.StatePaused {
		t.Fatalf("state after pause = %+v, %v", got, err)
	}
	if _, err := c.Exec(ctx, sb, cube.ExecRequest{Cmd: "true"}, nil, nil); !errors.Is(err, cube.ErrUnavailable) {
		t.Errorf("exec in a paused sandbox: %v, want ErrUnavailable", err)
	}
	again, err := c.Connect(ctx, sb.SandboxID, 0)
	if err != nil || again.SandboxID != sb.SandboxID {
		t.Fatalf("connect: %+v, %v", again, err)
	}
	checkFixture(t, "connect", onlyRequest(t, srv, "POST /sandboxes/*/connect"))
	if got, _ := c.Get(ctx, sb.SandboxID); got.State != cube.StateRunning {
		t.Errorf("state after connect = %s", got.State)
	}
	if res, err := c.Exec(ctx, again, cube.ExecRequest{Cmd: "true"}, nil, nil); err != nil || res.ExitCode != 0 {
		t.Errorf("exec after connect: %+v, %v", res, err)
	}
	srv.ResetRequests()
	if _, err := c.Connect(ctx, sb.SandboxID, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if body := string(onlyRequest(t, srv, "POST /sandboxes/*/connect").Body); body != `{"timeout":90}` {
		t.Errorf("connect body = %s", body)
	}
}

func TestDeleteWaitsRetryAfterWhilePausing(t *testing.T) {
	srv, c, sb := newSandbox(t, cubetest.Options{PauseDelay: 300 * time.Millisecond, RetryAfterSeconds: 1}, cube.CreateRequest{})
	ctx := context.Background()
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatalf("delete while pausing: %v", err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("delete retried after %v, before the 1s Retry-After", waited)
	}
	dels := requestsTo(srv, "DELETE /sandboxes/*")
	if len(dels) != 2 || dels[0].Status != http.StatusServiceUnavailable || dels[1].Status != http.StatusNoContent {
		t.Errorf("deletes = %d (first %d), want a 503 then a 204", len(dels), dels[0].Status)
	}
	// A deadline shorter than Retry-After returns at once instead of waiting.
	sb2, _ := c.Create(ctx, cube.CreateRequest{TemplateID: "base"})
	c.Pause(ctx, sb2.SandboxID)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := c.Delete(short, sb2.SandboxID); !errors.Is(err, cube.ErrUnavailable) {
		t.Errorf("delete with a short deadline: %v, want ErrUnavailable", err)
	}
	if time.Since(start) > 150*time.Millisecond {
		t.Errorf("delete waited %v although the deadline could not be met", time.Since(start))
	}
}

func TestHealth(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	if _, err := c.Create(context.Background(), cube.CreateRequest{TemplateID: "base"}); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "ok" || h.Sandboxes != 1 {
		t.Fatalf("health = %+v, %v", h, err)
	}
	checkFixture(t, "health", onlyRequest(t, srv, "GET /health"))
}

func TestAuth(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{APIKey: "secret"})
	ctx := context.Background()
	if _, err := newClient(t, srv, func(c *cube.Config) { c.APIKey = "" }).List(ctx, nil); !errors.Is(err, cube.ErrUnauthorized) {
		t.Errorf("no key: %v, want ErrUnauthorized", err)
	}
	if _, err := newClient(t, srv, func(c *cube.Config) { c.APIKey = "wrong" }).List(ctx, nil); !errors.Is(err, cube.ErrUnauthorized) {
		t.Errorf("wrong key: %v, want ErrUnauthorized", err)
	}
	if n := len(requestsTo(srv, "GET /sandboxes")); n != 2 {
		t.Errorf("401 was retried: %d requests", n)
	}
	if _, err := newClient(t, srv).List(ctx, nil); err != nil {
		t.Errorf("x-api-key: %v", err)
	}
	srv.ResetRequests()
	bearer := newClient(t, srv, func(c *cube.Config) { c.AuthHeader = "bearer" })
	if _, err := bearer.List(ctx, nil); err != nil {
		t.Errorf("bearer: %v", err)
	}
	r := onlyRequest(t, srv, "GET /sandboxes")
	if r.Header.Get("Authorization") != "Bearer secret" || r.Header.Get("X-API-Key") != "" {
		t.Errorf("bearer headers = %v", r.Header)
	}
	if _, err := cube.New(cube.Config{Endpoint: srv.URL(), AuthHeader: "basic"}); err == nil {
		t.Error("unknown auth header accepted")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []cube.Config{
		{},
		{Endpoint: "ftp://x"},
		{Endpoint: "http://x", Scheme: "gopher"},
		{Endpoint: "http://x", ProxyAddr: "no-port"},
		{Endpoint: "http://x", ProxyAddr: "h:1", HTTPClient: &http.Client{Transport: roundTripFunc(nil)}},
	} {
		if _, err := cube.New(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestListMetadataFilterEncodedOnce: CubeAPI decodes the query once and
// splits the metadata value on & and =, so the pairs must be encoded once;
// values with + = % then match, and a value with & is checked on the reply.
func TestListMetadataFilterEncodedOnce(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	ctx := context.Background()
	odd := map[string]string{"v": "a+b=c%20d", "w": "x y"}
	if _, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base", Metadata: odd}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base", Metadata: map[string]string{"v": "a b=c d", "w": "x y"}}); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	got, err := c.List(ctx, odd)
	if err != nil || len(got) != 1 || got[0].SandboxID != "sb00000001" {
		t.Fatalf("list = %+v, %v; want sb00000001 alone", got, err)
	}
	r := onlyRequest(t, srv, "GET /sandboxes")
	q, err := url.ParseQuery(r.RawQuery)
	if err != nil {
		t.Fatal(err)
	}
	if v := q.Get("metadata"); v != "v=a+b=c%20d&w=x y" {
		t.Errorf("metadata decoded once = %q, want the raw pairs v=a+b=c%%20d&w=x y", v)
	}
	v2, err := c.ListV2(ctx, cube.StateRunning, 10, map[string]string{"w": "x y"})
	if err != nil || len(v2) != 2 {
		t.Fatalf("v2 list = %+v, %v", v2, err)
	}
	if err := c.Pause(ctx, "sb00000002"); err != nil {
		t.Fatal(err)
	}
	paused, err := c.ListV2(ctx, cube.StatePaused, 0, nil)
	if err != nil || len(paused) != 1 || paused[0].SandboxID != "sb00000002" {
		t.Fatalf("v2 paused = %+v, %v", paused, err)
	}
}
