package cube_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

var update = flag.Bool("update", false, "rewrite the request fixtures in testdata/cube")

// fixtureDir holds the golden request fixtures of this package.
const fixtureDir = "../testdata/cube"

func newClient(t testing.TB, srv *cubetest.Server, edit ...func(*cube.Config)) *cube.Client {
	t.Helper()
	cfg := srv.Config()
	for _, e := range edit {
		e(&cfg)
	}
	c, err := cube.New(cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

// requestsTo returns the recorded requests whose "METHOD /path" matches
// the path.Match pattern route.
func requestsTo(srv *cubetest.Server, route string) []cubetest.Request {
	var out []cubetest.Request
	for _, r := range srv.Requests() {
		if ok, _ := path.Match(route, r.Method+" "+r.Path); ok {
			out = append(out, r)
		}
	}
	return out
}

func onlyRequest(t *testing.T, srv *cubetest.Server, route string) cubetest.Request {
	t.Helper()
	reqs := requestsTo(srv, route)
	if len(reqs) != 1 {
		t.Fatalf("%s: got %d requests, want 1", route, len(reqs))
	}
	return reqs[0]
}

// fixture is the golden form of a request: everything the server sees.
type fixture struct {
	Method     string            `json:"method"`
	Host       string            `json:"host,omitempty"`
	Path       string            `json:"path"`
	Query      string            `json:"query,omitempty"`
	Header     map[string]string `json:"header"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 string            `json:"bodyBase64,omitempty"`
}

// checkFixture compares a recorded request with testdata/cube/<name>.json
// byte for byte (headers, query, body); -update rewrites the file.
func checkFixture(t *testing.T, name string, r cubetest.Request) {
	t.Helper()
	f := fixture{Method: r.Method, Path: r.Path, Query: r.RawQuery, Header: map[string]string{}}
	if r.Server == "proxy" {
		f.Host = r.Host
	}
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f.Header[k] = strings.Join(r.Header[k], ", ")
	}
	if len(r.Body) > 0 {
		if utf8.Valid(r.Body) {
			body := string(r.Body)
			f.Body = &body
		} else {
			f.BodyBase64 = base64.StdEncoding.EncodeToString(r.Body)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	file := filepath.Join(fixtureDir, name+".json")
	if *update {
		if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read fixture (run with -update to create it): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("request differs from %s:\n--- got\n%s--- want\n%s", file, got, want)
	}
}
