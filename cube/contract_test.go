package cube_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

// contract is testdata/cube/contract/cubeapi.json: CubeAPI's request
// models and behaviours transcribed from the official sources.
type contract struct {
	Requests map[string]json.RawMessage `json:"requests"`
	Cases    []struct {
		Name        string `json:"name"`
		Method      string `json:"method"`
		Path        string `json:"path"`
		ContentType string `json:"contentType"`
		Body        string `json:"body"`
		Status      int    `json:"status"`
		Text        string `json:"text"`
		JSON        bool   `json:"json"`
	} `json:"cases"`
}

func loadContract(t *testing.T) contract {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtureDir, "contract", "cubeapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c contract
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("contract: %v", err)
	}
	return c
}

type objectSchema struct {
	Required []string                   `json:"required"`
	Fields   map[string]json.RawMessage `json:"fields"`
}

// checkSchema reports where v departs from a schema of the contract.
func checkSchema(where string, schema json.RawMessage, v any) []string {
	var name string
	if json.Unmarshal(schema, &name) == nil {
		ok := false
		switch name {
		case "any":
			ok = true
		case "string":
			_, ok = v.(string)
		case "bool":
			_, ok = v.(bool)
		case "int32":
			f, isNum := v.(float64)
			ok = isNum && f == float64(int32(f))
		case "int32>0":
			f, isNum := v.(float64)
			ok = isNum && f == float64(int32(f)) && f > 0
		case "map<string>":
			m, isMap := v.(map[string]any)
			ok = isMap
			for _, e := range m {
				if _, s := e.(string); !s {
					ok = false
				}
			}
		case "[string]":
			a, isArr := v.([]any)
			ok = isArr
			for _, e := range a {
				if _, s := e.(string); !s {
					ok = false
				}
			}
		}
		if !ok {
			return []string{where + ": want " + name}
		}
		return nil
	}
	var arr []json.RawMessage
	if json.Unmarshal(schema, &arr) == nil && len(arr) == 1 {
		a, ok := v.([]any)
		if !ok {
			return []string{where + ": want an array"}
		}
		var errs []string
		for _, e := range a {
			errs = append(errs, checkSchema(where+"[]", arr[0], e)...)
		}
		return errs
	}
	var obj objectSchema
	if err := json.Unmarshal(schema, &obj); err != nil {
		return []string{where + ": bad schema: " + err.Error()}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return []string{where + ": want an object"}
	}
	var errs []string
	for _, r := range obj.Required {
		if _, ok := m[r]; !ok {
			errs = append(errs, where+"."+r+": required by the server, missing")
		}
	}
	for k, e := range m {
		fs, known := obj.Fields[k]
		if !known {
			fs, known = obj.Fields["*"]
		}
		if !known {
			errs = append(errs, where+"."+k+": not a field of the server's model (ignored there)")
			continue
		}
		errs = append(errs, checkSchema(where+"."+k, fs, e)...)
	}
	return errs
}

// routeOf matches a recorded request to a contract route.
func routeOf(c contract, method, p string) (string, bool) {
	for route := range c.Requests {
		m, pattern, _ := strings.Cut(route, " ")
		pattern = strings.ReplaceAll(pattern, "{id}", "*")
		if ok, _ := path.Match(pattern, p); ok && m == method {
			return route, true
		}
	}
	return "", false
}

// TestContractClientRequests drives every CubeAPI call with a body and
// checks each body against the server's models: required fields present,
// types right, no field the server does not know.
func TestContractClientRequests(t *testing.T) {
	con := loadContract(t)
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	ctx := context.Background()
	sb, err := c.Create(ctx, cube.CreateRequest{
		TemplateID: "base", Timeout: cube.Seconds(30), EnvVars: map[string]string{"A": "1"},
		Metadata: map[string]string{"k": "v"}, HostMounts: []cube.HostMount{{HostPath: "/etc", MountPath: "/mnt/etc", ReadOnly: true}},
		AllowInternetAccess: cube.Bool(false), AutoPause: true, AutoResume: &cube.AutoResume{Enabled: true},
		Network: &cube.Network{AllowOut: []string{"10.1.0.0/16"}, DenyOut: []string{"0.0.0.0/0"}},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := c.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Connect(ctx, sb.SandboxID, 0); err != nil {
		t.Fatalf("connect without a timeout: %v", err)
	}
	snap, err := c.Snapshot(ctx, sb.SandboxID, "")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if _, err := c.Snapshot(ctx, sb.SandboxID, "named"); err != nil {
		t.Fatalf("named snapshot: %v", err)
	}
	if err := c.Rollback(ctx, sb.SandboxID, snap.SnapshotID); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	checked := map[string]bool{}
	for _, r := range srv.Requests() {
		if r.Server != "api" || len(r.Body) == 0 {
			continue
		}
		route, ok := routeOf(con, r.Method, r.Path)
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal(r.Body, &v); err != nil {
			t.Errorf("%s: body is not JSON: %v", route, err)
			continue
		}
		for _, e := range checkSchema(route, con.Requests[route], v) {
			t.Errorf("%s", e)
		}
		checked[route] = true
	}
	for _, route := range []string{"POST /sandboxes", "POST /sandboxes/{id}/connect", "POST /sandboxes/{id}/snapshots", "POST /sandboxes/{id}/rollback"} {
		if !checked[route] {
			t.Errorf("%s: no request checked", route)
		}
	}
}

// TestContractFakeCases sends the contract's cases to the fake: it must
// answer as CubeAPI does, status and body kind.
func TestContractFakeCases(t *testing.T) {
	con := loadContract(t)
	srv := cubetest.New(t, cubetest.Options{})
	c := newClient(t, srv)
	sb, err := c.Create(context.Background(), cube.CreateRequest{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range con.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			p := strings.ReplaceAll(tc.Path, "{id}", sb.SandboxID)
			req, err := http.NewRequest(tc.Method, srv.URL()+p, strings.NewReader(tc.Body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ContentType != "" {
				req.Header.Set("Content-Type", tc.ContentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.Status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.Status)
			}
			ct := resp.Header.Get("Content-Type")
			switch {
			case tc.JSON:
				var e struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				}
				if json.Unmarshal(body, &e) != nil || e.Code != tc.Status || e.Message == "" {
					t.Errorf("body %s, want {code: %d, message}", body, tc.Status)
				}
			case tc.Status == 400 || tc.Status == 415 || tc.Status == 422:
				if !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("content type %q, want text/plain (axum's rejection)", ct)
				}
			}
			if tc.Text != "" && !strings.Contains(string(body), tc.Text) {
				t.Errorf("body %q, want it to say %q", body, tc.Text)
			}
		})
	}
}
