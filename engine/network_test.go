package engine

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/session"
	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
)

// countingServer serves body on addr:0 (a host loopback address: outside
// any World's network namespace) and counts requests.
func countingServer(t *testing.T, addr, body string) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(body))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), &hits
}

// netEngine is an engine with World "w" over a small source, whose
// allow-list adds allowHost.
func netEngine(t *testing.T, allowHost string) *Engine {
	t.Helper()
	requireRoot(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl here")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "a.txt"), "a\n")
	cfg := (&Config{}).withDefaults()
	cfg.Boundary.Worlds = map[string]boundary.Policy{"w": {Allow: []string{allowHost}}}
	e, err := Open(context.Background(), Options{StateRoot: filepath.Join(base, "state"), Config: cfg, Exe: testExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(context.Background(), CreateOptions{Name: "w", Source: src, MountBackend: overlay.BackendKernel}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopEgress(t, e, "w")
		_ = mount.ForceUnmount(e.Paths.Merged("w"))
	})
	return e
}

// stopEgress kills World name's proxy, as a crash would, and returns once
// it is gone.
func stopEgress(t *testing.T, e *Engine, name string) {
	if pid := egressPID(e, name); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if st, err := session.ReadProcStat(pid); err != nil || st.State == 'Z' || st.State == 'X' {
				return
			}
		}
	}
}

func egressPID(e *Engine, name string) int {
	data, _ := os.ReadFile(filepath.Join(e.EgressDir(name), egressPIDFile))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// execOut runs script in World w and returns its stdout+stderr and exit code.
func execOut(t *testing.T, e *Engine, o ExecOptions, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o.Argv = []string{"/bin/sh", "-c", script}
	o.Env = []string{defaultPath, "HOME=/root", "HTTP_PROXY=http://host-proxy.invalid:1"}
	if o.Isolation == "" {
		o.Isolation = IsolationTree
	}
	m, err := e.Exec(ctx, "w", o)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return sessionOutput(ctx, t, e, "w", m.ID)
}

// sessionOutput waits for session id of World name to end and returns
// what its transcript holds and its exit code.
func sessionOutput(ctx context.Context, t *testing.T, e *Engine, name, id string) (string, int) {
	t.Helper()
	dir := e.SessionDir(name, id)
	m, err := WaitSession(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := ReadTranscript(filepath.Join(dir, TranscriptFile), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, r := range recs {
		out.Write(r.Data)
	}
	return out.String(), m.ExitCode
}

const ifaces = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"

// Each mode per its promise: none and proxy see only loopback and cannot
// reach an outside server directly (fast, not a hang); host can; proxy
// reaches the allowed host through $HTTP_PROXY (plain and CONNECT), gets the
// proxy's 403 naming the policy for another, which receives nothing, and the
// denial is an egress.denied event.
func TestNetworkModes(t *testing.T) {
	allowed, allowedHits := countingServer(t, "127.0.0.2", "allowed-ok")
	denied, deniedHits := countingServer(t, "127.0.0.3", "denied-reached")
	e := netEngine(t, "127.0.0.2")
	direct := "curl -sS --noproxy '*' -m 5 http://" + allowed + "/"

	for _, n := range []boundary.Network{boundary.NetworkNone, boundary.NetworkProxy} {
		out, code := execOut(t, e, ExecOptions{Network: n}, ifaces)
		if code != 0 || strings.TrimSpace(out) != "lo" {
			t.Errorf("%s: interfaces %q (exit %d), want only lo", n, out, code)
		}
		start := time.Now()
		if out, code := execOut(t, e, ExecOptions{Network: n}, direct); code == 0 {
			t.Errorf("%s: direct TCP to %s reached it: %s", n, allowed, out)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: a direct connection took %s to fail: want fast", n, d)
		}
	}
	// new --network: the World's own mode, below the session's request.
	if _, err := e.Create(context.Background(), CreateOptions{Name: "bad", Source: e.mustWorld(t, "w").Source, Network: "wifi"}); err == nil || !strings.Contains(err.Error(), "want proxy") {
		t.Errorf("new --network wifi: %v, want a refusal naming the modes", err)
	}
	w := e.mustWorld(t, "w")
	w.Network = "none"
	if err := writeWorldFile(e.Paths.WorldFile("w"), w); err != nil {
		t.Fatal(err)
	}
	if out, _ := execOut(t, e, ExecOptions{}, ifaces); strings.TrimSpace(out) != "lo" {
		t.Errorf("a World made with --network none: interfaces %q, want only lo", out)
	}
	if out, code := execOut(t, e, ExecOptions{Network: boundary.NetworkHost}, direct); code != 0 || out != "allowed-ok" {
		t.Errorf("exec --network host in a none World: %q (exit %d): the session's request wins", out, code)
	}
	w.Network = ""
	if err := writeWorldFile(e.Paths.WorldFile("w"), w); err != nil {
		t.Fatal(err)
	}
	if out, code := execOut(t, e, ExecOptions{NoNetwork: true}, ifaces); code != 0 || strings.TrimSpace(out) != "lo" {
		t.Errorf("--no-network: interfaces %q (exit %d), want only lo", out, code)
	}
	if out, code := execOut(t, e, ExecOptions{Network: boundary.NetworkHost}, direct); code != 0 || out != "allowed-ok" {
		t.Errorf("host: direct TCP to %s: %q (exit %d)", allowed, out, code)
	}
	// The level's default: strict has none, tree host.
	if out, code := execOut(t, e, ExecOptions{Isolation: IsolationStrict}, ifaces); code != 0 || strings.TrimSpace(out) != "lo" {
		t.Errorf("strict: interfaces %q (exit %d), want only lo", out, code)
	}

	proxy := ExecOptions{Network: boundary.NetworkProxy}
	out, code := execOut(t, e, proxy, `echo "$HTTP_PROXY $https_proxy $NO_PROXY"`)
	if code != 0 || !strings.HasPrefix(out, "http://127.0.0.1:") || strings.Contains(out, "host-proxy.invalid") || !strings.Contains(out, "127.0.0.1") {
		t.Errorf("proxy: environment %q: want HTTP_PROXY and https_proxy at the bridge, NO_PROXY for loopback", out)
	}
	before := allowedHits.Load()
	if out, code := execOut(t, e, proxy, "curl -sS -m 10 http://"+allowed+"/"); code != 0 || out != "allowed-ok" || allowedHits.Load() == before {
		t.Errorf("proxy: GET the allowed %s: %q (exit %d)", allowed, out, code)
	}
	// CONNECT (curl -p tunnels through the proxy).
	before = allowedHits.Load()
	if out, code := execOut(t, e, proxy, "curl -sS -p -m 10 http://"+allowed+"/"); code != 0 || out != "allowed-ok" || allowedHits.Load() == before {
		t.Errorf("proxy: CONNECT to the allowed %s: %q (exit %d)", allowed, out, code)
	}
	out, _ = execOut(t, e, proxy, "curl -sS -m 10 -w ' status %{http_code}' http://"+denied+"/")
	if !strings.Contains(out, "status 403") || !strings.Contains(out, "not on the allow-list") || !strings.Contains(out, "boundary.worlds.w.allow") {
		t.Errorf("proxy: GET the denied %s: %q, want a 403 naming the policy and the key", denied, out)
	}
	if out, code := execOut(t, e, proxy, "curl -sS -p -m 10 http://"+denied+"/"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("proxy: CONNECT to the denied %s: %q (exit %d), want the tunnel refused with 403", denied, out, code)
	}
	// The bridge leads to the proxy, not to its control socket: a command
	// posting an allow-list to it gets a 400 and changes nothing.
	out, _ = execOut(t, e, proxy, `curl -sS --noproxy '*' -m 5 -w ' status %{http_code}' -X POST -d '{"allow":["127.0.0.3"]}' "$HTTP_PROXY/allow"; curl -sS -m 5 -w ' status %{http_code}' http://`+denied+"/")
	if !strings.Contains(out, "status 400") || !strings.Contains(out, "status 403") {
		t.Errorf("posting an allow-list through the bridge: %q, want a 400 and the host still denied", out)
	}
	if deniedHits.Load() != 0 {
		t.Errorf("the denied server was reached %d times", deniedHits.Load())
	}
	evs, _, err := e.ReadActivity(0)
	if err != nil {
		t.Fatal(err)
	}
	deniedHost, deniedPort, _ := net.SplitHostPort(denied)
	n := 0
	for _, ev := range evs {
		if ev.Type == EventEgressDenied && ev.World == "w" && ev.Detail["host"] == deniedHost {
			n++
			if p, _ := ev.Detail["port"].(float64); strconv.Itoa(int(p)) != deniedPort || ev.Detail["allow_key"] != "boundary.worlds.w.allow" {
				t.Errorf("denial event %+v: want port %s and the allow key", ev, deniedPort)
			}
		}
		if ev.Type == EventEgressDenied && ev.Detail["host"] == "127.0.0.2" {
			t.Errorf("the allowed host was recorded as denied: %+v", ev)
		}
	}
	// Once per host per proxy run (the proxy may have restarted between two
	// sessions if the machine stalled past its idle time): not per request.
	if n < 1 || n > 2 {
		t.Errorf("%d egress.denied events for %s (denied 4 times), want one per proxy run: %+v", n, deniedHost, evs)
	}
}

// strata allow takes effect in a session that is already running, without
// restarting it; the host stays allowed for the World's later proxies.
func TestNetworkAllowIsLive(t *testing.T) {
	denied, deniedHits := countingServer(t, "127.0.0.3", "now-allowed")
	e := netEngine(t, "127.0.0.2")
	gate := filepath.Join(t.TempDir(), "go")
	ctx := context.Background()
	script := "curl -sS -m 10 -w ' status %{http_code}\\n' http://" + denied + "/; " +
		"while [ ! -e " + gate + " ]; do sleep 0.05; done; curl -sS -m 10 -w ' status %{http_code}\\n' http://" + denied + "/"
	done := make(chan struct{})
	var out string
	go func() {
		defer close(done)
		out, _ = execOut(t, e, ExecOptions{Network: boundary.NetworkProxy}, script)
	}()
	// Wait for the denial, then allow.
	host, _, _ := net.SplitHostPort(denied)
	waitUntil(t, 20*time.Second, func() bool {
		evs, _, _ := e.ReadActivity(0)
		for _, ev := range evs {
			if ev.Type == EventEgressDenied && ev.Detail["host"] == host {
				return true
			}
		}
		return false
	})
	res, err := e.AllowEgress(ctx, "w", host)
	if err != nil || !res.Live || res.Already {
		t.Fatalf("AllowEgress: %+v, %v: want live", res, err)
	}
	writeFile(t, gate, "")
	<-done
	first, second, _ := strings.Cut(out, " status 403\n")
	if !strings.Contains(first, "not on the allow-list") || second != "now-allowed status 200\n" {
		t.Fatalf("before and after allow: %q", out)
	}
	if deniedHits.Load() != 1 {
		t.Errorf("server hits %d, want 1 (after allow only)", deniedHits.Load())
	}
	// Kept with the World: a new proxy allows it too.
	stopEgress(t, e, "w")
	if out, code := execOut(t, e, ExecOptions{Network: boundary.NetworkProxy}, "curl -sS -m 10 http://"+denied+"/"); code != 0 || out != "now-allowed" {
		t.Errorf("after a proxy restart: %q (exit %d)", out, code)
	}
	if res, err := e.AllowEgress(ctx, "w", host); err != nil || !res.Already {
		t.Errorf("allowing again: %+v, %v: want already", res, err)
	}
	if _, err := e.AllowEgress(ctx, "w", "http://x.example/"); err == nil || !strings.Contains(err.Error(), "not a URL") {
		t.Errorf("allowing a URL: %v, want a refusal naming the form", err)
	}
}

// A proxy killed by a crash leaves a stale socket: the next exec replaces it,
// and a session that was running across the crash reaches the new proxy. The
// proxy ends by itself once the World has no session.
func TestNetworkProxyCrashAndIdle(t *testing.T) {
	allowed, _ := countingServer(t, "127.0.0.2", "ok")
	e := netEngine(t, "127.0.0.2")
	gate := filepath.Join(t.TempDir(), "go")
	done := make(chan struct{})
	var out string
	go func() {
		defer close(done)
		out, _ = execOut(t, e, ExecOptions{Network: boundary.NetworkProxy},
			"while [ ! -e "+gate+" ]; do sleep 0.05; done; curl -sS -m 10 http://"+allowed+"/")
	}()
	waitUntil(t, 20*time.Second, func() bool { return egressPID(e, "w") > 0 && e.worldLive("w") })
	old := egressPID(e, "w")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, func() bool { return syscall.Kill(old, 0) != nil })
	if _, err := os.Lstat(filepath.Join(e.EgressDir("w"), egressSocket)); err != nil {
		t.Fatalf("the killed proxy left no socket to test with: %v", err)
	}
	if out, code := execOut(t, e, ExecOptions{Network: boundary.NetworkProxy}, "curl -sS -m 10 http://"+allowed+"/"); code != 0 || out != "ok" {
		t.Fatalf("after the proxy was killed: %q (exit %d), want a new proxy", out, code)
	}
	if pid := egressPID(e, "w"); pid == old || pid == 0 {
		t.Fatalf("proxy pid %d after the crash of %d", pid, old)
	}
	writeFile(t, gate, "")
	<-done
	if out != "ok" {
		t.Errorf("the session running across the crash: %q, want it to reach the new proxy", out)
	}
	pid := egressPID(e, "w")
	waitUntil(t, 4*egressIdle+5*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	if _, err := os.Lstat(filepath.Join(e.EgressDir("w"), egressSocket)); err == nil {
		t.Errorf("the idle proxy left its socket")
	}
}

func waitUntil(t *testing.T, d time.Duration, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// npm install goes through the proxy (npm takes HTTP_PROXY from the
// environment) to a registry stub on a host address outside the World.
func TestNetworkNpmInstallThroughProxy(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("no npm here")
	}
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	base := "http://" + l.Addr().String()
	tgz := npmTarball(t, `{"name":"tinypkg","version":"1.0.0","main":"index.js"}`, "module.exports = 'tiny-ok';\n")
	sha1sum := sha1.Sum(tgz)
	sha512sum := sha512.Sum512(tgz)
	meta := fmt.Sprintf(`{"name":"tinypkg","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"tinypkg","version":"1.0.0","main":"index.js","dist":{"tarball":"%s/tinypkg/-/tinypkg-1.0.0.tgz","shasum":"%x","integrity":"sha512-%s"}}}}`,
		base, sha1sum, base64.StdEncoding.EncodeToString(sha512sum[:]))
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/tinypkg":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(meta))
		case "/tinypkg/-/tinypkg-1.0.0.tgz":
			w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	e := netEngine(t, "127.0.0.2")
	cache := t.TempDir()
	out, code := execOut(t, e, ExecOptions{Network: boundary.NetworkProxy},
		"npm install --registry "+base+"/ --cache "+cache+" --no-audit --no-fund --no-update-notifier tinypkg >/dev/null 2>&1 || { cat "+cache+"/_logs/*.log; exit 1; }; node -e 'console.log(require(\"tinypkg\"))'")
	if code != 0 || strings.TrimSpace(out) != "tiny-ok" {
		t.Fatalf("npm install through the proxy: exit %d: %s", code, out)
	}
	if hits.Load() < 2 {
		t.Errorf("the registry stub served %d requests, want metadata and tarball", hits.Load())
	}
	// It landed in the World, not in the source.
	if _, err := os.Stat(filepath.Join(e.Paths.Upper("w"), "node_modules", "tinypkg", "index.js")); err != nil {
		t.Errorf("node_modules not in the World's upper: %v", err)
	}
}

// npmTarball is a package tarball: package/package.json and package/index.js.
func npmTarball(t *testing.T, pkgJSON, index string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{"package/package.json": pkgJSON, "package/index.js": index} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func (e *Engine) mustWorld(t *testing.T, name string) *World {
	t.Helper()
	w, err := e.World(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Two hosts denied within the coalescing window are two events for the
// subscriber (the TUI): each is a message with its own allow action.
func TestEgressDeniedEventsAreNotCoalescedAcrossHosts(t *testing.T) {
	e, err := Open(context.Background(), Options{StateRoot: t.TempDir(), Config: (&Config{}).withDefaults()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := e.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"a.example", "b.example", "a.example"} {
		e.activity(ctx, Event{Type: EventEgressDenied, World: "w", Detail: map[string]any{"host": h, "port": 443}})
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case ev := <-sub:
			if ev.Type == EventEgressDenied {
				seen[fmt.Sprint(ev.Detail["host"])] = true
			}
		case <-ctx.Done():
			t.Fatalf("denials delivered: %v, want a.example and b.example", seen)
		}
	}
}
