package cubetest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// call sends a raw request to the fake, routing proxy requests by Host.
func call(t *testing.T, s *Server, method, url, host, contentType string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func create(t *testing.T, s *Server, body string) string {
	t.Helper()
	resp := call(t, s, "POST", s.URL()+"/sandboxes", "", "application/json", []byte(body))
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var sb struct {
		SandboxID string `json:"sandboxID"`
	}
	json.NewDecoder(resp.Body).Decode(&sb)
	return sb.SandboxID
}

func envdHost(s *Server, id string) string { return "49983-" + id + "." + s.Domain() }

func TestAPIStatuses(t *testing.T) {
	s := New(t, Options{APIKey: "k"})
	for _, tc := range []struct {
		method, path, contentType, body string
		key                             bool
		status                          int
		text                            string // expected in the body
	}{
		{"GET", "/health", "", "", false, 200, `"status":"ok"`},
		{"GET", "/sandboxes", "", "", false, 401, `"code":401`},
		{"POST", "/sandboxes", "application/json", `{"templateID":"nope"}`, true, 500, "130404"},
		{"POST", "/sandboxes", "application/json", `{"templateID":`, true, 400, "Failed to parse the request body as JSON"},
		{"POST", "/sandboxes", "text/plain", `{"templateID":"base"}`, true, 415, "application/json"},
		{"POST", "/sandboxes", "application/json", `{}`, true, 422, "missing field `templateID`"},
		{"POST", "/sandboxes", "application/json", `{"templateID":"base","timeout":"15"}`, true, 422, "Failed to deserialize"},
		{"POST", "/sandboxes", "application/json", `{"templateID":"base","envVars":{"PATH":"/x"}}`, true, 400, "PATH"},
		{"POST", "/sandboxes", "application/json", `{"templateID":"base","metadata":{"host-mount":"[{\"hostPath\":\"/no/such\",\"mountPath\":\"/x\"}]"}}`, true, 400, "host mount"},
		{"POST", "/v2/sandboxes", "application/json", `{"templateID":"base"}`, true, 405, ""},
		{"GET", "/sandboxes/none", "", "", true, 404, `"code":404`},
		{"DELETE", "/templates/none", "", "", true, 404, `"code":404`},
		{"GET", "/snapshots?limit=101", "", "", true, 400, "limit"},
	} {
		req, _ := http.NewRequest(tc.method, s.URL()+tc.path, strings.NewReader(tc.body))
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		if tc.key {
			req.Header.Set("X-API-Key", "k")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.text) {
			t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, resp.StatusCode, b, tc.status, tc.text)
		}
		if tc.status == 422 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("422 must be plain text, got %s", resp.Header.Get("Content-Type"))
		}
	}
}

func TestSnapshotBodyMustBeObject(t *testing.T) {
	s := New(t, Options{})
	id := create(t, s, `{"templateID":"base"}`)
	for body, want := range map[string]int{`{}`: 201, `{"name":"n"}`: 201, `null`: 422, `[]`: 422, ``: 400, `{"name":1}`: 422} {
		resp := call(t, s, "POST", s.URL()+"/sandboxes/"+id+"/snapshots", "", "application/json", []byte(body))
		if resp.StatusCode != want {
			t.Errorf("snapshot body %q: %d, want %d", body, resp.StatusCode, want)
		}
	}
}

func TestProxyRouting(t *testing.T) {
	s := New(t, Options{})
	id := create(t, s, `{"templateID":"base"}`)
	proxy := "http://" + s.ProxyAddr()
	for host, want := range map[string]int{
		envdHost(s, id):                 204,
		"garbage":                       400,
		"49983-" + id + ".other.domain": 204, // CubeProxy reads only the first label
		"abc-" + id + "." + s.Domain():  400,
		"49983-nobody." + s.Domain():    500,
		"8080-" + id + "." + s.Domain(): 500,
		envdHost(s, id) + ":443":        204,
	} {
		if got := call(t, s, "GET", proxy+"/health", host, "", nil).StatusCode; got != want {
			t.Errorf("Host %q: %d, want %d", host, got, want)
		}
	}
	call(t, s, "DELETE", s.URL()+"/sandboxes/"+id, "", "", nil)
	// A killed sandbox has no route: CubeProxy answers 500 with retcode
	// 310507 (CubeProxy/lua/rewrite_phase.lua), not 410 or 502.
	resp := call(t, s, "GET", proxy+"/health", envdHost(s, id), "", nil)
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("X-Cube-Retcode") != "310507" {
		t.Errorf("killed sandbox: %d retcode %q, want 500 retcode 310507", resp.StatusCode, resp.Header.Get("X-Cube-Retcode"))
	}
}

type envelope struct {
	flags byte
	body  string
}

func readEnvelopes(t *testing.T, r io.Reader) []envelope {
	t.Helper()
	br := bufio.NewReader(r)
	var out []envelope
	for {
		var head [5]byte
		if _, err := io.ReadFull(br, head[:]); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("read envelope: %v", err)
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatalf("read envelope body: %v", err)
		}
		out = append(out, envelope{head[0], string(body)})
	}
}

func startRequest(cmd string, args ...string) []byte {
	payload, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": cmd, "args": args, "envs": map[string]string{}}})
	head := make([]byte, 5)
	binary.BigEndian.PutUint32(head[1:], uint32(len(payload)))
	return append(head, payload...)
}

func TestExecWireFormat(t *testing.T) {
	s := New(t, Options{KeepaliveEvery: 40 * time.Millisecond})
	id := create(t, s, `{"templateID":"base"}`)
	run := func(script string) []envelope {
		resp := call(t, s, "POST", "http://"+s.ProxyAddr()+"/process.Process/Start", envdHost(s, id),
			"application/connect+json", startRequest("/bin/sh", "-c", script))
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/connect+json" {
			t.Fatalf("start: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return readEnvelopes(t, resp.Body)
	}

	evs := run(`printf hi; sleep 0.2`)
	if len(evs) < 4 {
		t.Fatalf("envelopes = %+v", evs)
	}
	if !strings.HasPrefix(evs[0].body, `{"event":{"start":{"pid":`) {
		t.Errorf("first = %s", evs[0].body)
	}
	// A keepalive may come before the data on a slow machine (-race).
	keepalives, data := 0, ""
	for _, e := range evs[1 : len(evs)-2] {
		switch {
		case e.body == `{"event":{"keepalive":{}}}`:
			keepalives++
		case data == "":
			data = e.body
		default:
			t.Errorf("a second event that is not a keepalive: %s", e.body)
		}
	}
	if data != `{"event":{"data":{"stdout":"aGk="}}}` {
		t.Errorf("data = %s", data)
	}
	if keepalives == 0 {
		t.Errorf("no keepalive during a 200ms command with a 40ms interval: %+v", evs)
	}
	// exitCode is omitted for 0.
	if end := evs[len(evs)-2]; end.body != `{"event":{"end":{"exited":true,"status":"exit status 0"}}}` {
		t.Errorf("end = %s", end.body)
	}
	if last := evs[len(evs)-1]; last.flags != 0x02 || last.body != `{}` {
		t.Errorf("trailer = %+v", last)
	}

	evs = run(`echo oops >&2; exit 3`)
	if evs[1].body != `{"event":{"data":{"stderr":"b29wcwo="}}}` {
		t.Errorf("stderr data = %s", evs[1].body)
	}
	if end := evs[len(evs)-2]; end.body != `{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3"}}}` {
		t.Errorf("end = %s", end.body)
	}
	evs = run(`kill -9 $$`)
	if end := evs[len(evs)-2]; end.body != `{"event":{"end":{"exitCode":-1,"status":"signal: killed"}}}` {
		t.Errorf("end = %s", end.body)
	}
}

func TestPausedSandboxAndAutoResume(t *testing.T) {
	s := New(t, Options{})
	plain := create(t, s, `{"templateID":"base"}`)
	auto := create(t, s, `{"templateID":"base","autoPause":true,"autoResume":{"enabled":true}}`)
	for _, id := range []string{plain, auto} {
		if got := call(t, s, "POST", s.URL()+"/sandboxes/"+id+"/pause", "", "", nil).StatusCode; got != 204 {
			t.Fatalf("pause: %d", got)
		}
	}
	proxy := "http://" + s.ProxyAddr()
	if got := call(t, s, "GET", proxy+"/health", envdHost(s, plain), "", nil); got.StatusCode != 503 || got.Header.Get("Retry-After") == "" {
		t.Errorf("paused envd: %d, want 503 with Retry-After", got.StatusCode)
	}
	if got := call(t, s, "GET", proxy+"/health", envdHost(s, auto), "", nil).StatusCode; got != 204 {
		t.Errorf("auto-resume envd: %d", got)
	}
	if got := call(t, s, "POST", s.URL()+"/sandboxes/"+plain+"/pause", "", "", nil).StatusCode; got != 409 {
		t.Errorf("pausing a paused sandbox: %d, want 409", got)
	}
}

// Every process a sandbox started, background ones included, dies with it.
func TestDeleteKillsEverything(t *testing.T) {
	s := New(t, Options{})
	id := create(t, s, `{"templateID":"base"}`)
	resp := call(t, s, "POST", "http://"+s.ProxyAddr()+"/process.Process/Start", envdHost(s, id), "application/connect+json",
		startRequest("/bin/sh", "-c", `setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $!`))
	var pid int
	for _, e := range readEnvelopes(t, resp.Body) {
		var ev struct {
			Event struct {
				Data *struct{ Stdout []byte } `json:"data"`
			} `json:"event"`
		}
		json.Unmarshal([]byte(e.body), &ev)
		if ev.Event.Data != nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(ev.Event.Data.Stdout)))
		}
	}
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("background process %d not running", pid)
	}
	scratch := s.ScratchDir(id)
	if _, err := os.Stat(scratch); err != nil {
		t.Fatalf("scratch dir: %v", err)
	}
	call(t, s, "DELETE", s.URL()+"/sandboxes/"+id, "", "", nil)
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(stat), ") Z ") {
			break // killed, waiting for its reaper
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d survived its sandbox", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(scratch); err == nil {
		t.Error("scratch dir of a deleted sandbox remains")
	}
}

func TestMountPointUnderRootRefused(t *testing.T) {
	s := New(t, Options{})
	resp := call(t, s, "POST", s.URL()+"/sandboxes", "", "application/json",
		[]byte(`{"templateID":"base","metadata":{"host-mount":"[{\"hostPath\":\"/etc\",\"mountPath\":\"/cubetest-no-such-top/x\"}]"}}`))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), "top-level") {
		t.Errorf("top-level mount point: %d %s", resp.StatusCode, b)
	}
	if _, err := os.Stat("/cubetest-no-such-top"); err == nil {
		t.Error("top-level directory created on the host")
	}
	if ids := s.SandboxIDs(); len(ids) != 0 {
		t.Errorf("failed create left %v", ids)
	}
}
