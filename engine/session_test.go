package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/boundary"
	"github.com/stratahq/strata/engine/local"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sessions need root here (the rootless path runs in the e2e suite)")
	}
}

// testWorld is a fake World: a source tree, a "merged view" (a plain dir with other
// content: the init only binds it), and a state root that also holds another
// World's upper.
type testWorld struct {
	name, source, merged, stateRoot string
}

func newTestWorld(t testing.TB, name string) testWorld {
	t.Helper()
	w := testWorld{name: name, source: t.TempDir(), stateRoot: t.TempDir()}
	w.merged = filepath.Join(w.stateRoot, "worlds", name, "merged")
	writeFile(t, filepath.Join(w.source, "file.txt"), "source\n")
	writeFile(t, filepath.Join(w.merged, "file.txt"), "world\n")
	writeFile(t, filepath.Join(w.stateRoot, "worlds", "other", "upper", "secret.txt"), "secret\n")
	return w
}

func (w testWorld) worldDir() string { return filepath.Join(w.stateRoot, "worlds", w.name) }

func (w testWorld) spec(argv ...string) SessionSpec {
	return SessionSpec{
		World: w.name, Source: w.source, Merged: w.merged, StateRoot: w.stateRoot,
		SessionsDir: filepath.Join(w.worldDir(), "sessions"),
		Argv:        argv,
		Env:         []string{defaultPath, "SRC=" + w.source, "STATE=" + w.stateRoot, "HOME=/root"},
		// Today's tests; the sandbox level has its own (its scrubbed
		// environment drops SRC and STATE).
		Isolation: IsolationTree,
	}
}

func (w testWorld) sh(script string) SessionSpec { return w.spec("/bin/sh", "-c", script) }

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

type sessionResult struct {
	meta           SessionMeta
	stdout, stderr string
	records        []Record
}

func runSession(t testing.TB, spec SessionSpec) sessionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started, err := StartSession(ctx, spec)
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	dir := filepath.Join(spec.SessionsDir, started.ID)
	if spec.Dir != "" {
		dir = spec.Dir
	}
	meta, err := WaitSession(ctx, dir)
	if err != nil {
		t.Fatalf("WaitSession: %v", err)
	}
	records, _, err := ReadTranscript(filepath.Join(dir, TranscriptFile), 0)
	if err != nil {
		t.Fatalf("ReadTranscript: %v", err)
	}
	r := sessionResult{meta: meta, records: records}
	var out, errOut strings.Builder
	for _, rec := range records {
		switch rec.Stream {
		case StreamStdout:
			out.Write(rec.Data)
		case StreamStderr:
			errOut.Write(rec.Data)
		}
	}
	r.stdout, r.stderr = out.String(), errOut.String()
	return r
}

// killAndWait ends a session and waits for its init to record that, so the test's
// temp dirs can be removed.
func killAndWait(dir string) {
	_ = KillSession(dir, syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = WaitSession(ctx, dir)
}

func TestSessionSeesWorldAtSource(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "alpha")
	spec := w.sh(`cat "$SRC/file.txt"; echo made > "$SRC/new.txt"; echo out; echo err >&2; pwd; exit 3`)
	spec.Env = append(spec.Env, "API_TOKEN=hunter2", "MY_VAR=hunter3")
	spec.EnvRedact = []string{"*token*", "MY_*"}
	r := runSession(t, spec)
	if r.stdout != "world\nout\n"+w.source+"\n" {
		t.Errorf("stdout = %q, want the World's file, out, and the source path as cwd", r.stdout)
	}
	if r.stderr != "err\n" {
		t.Errorf("stderr = %q, want %q", r.stderr, "err\n")
	}
	if r.meta.State != SessionFailed || r.meta.ExitCode != 3 || r.meta.Attention != AttentionFailed {
		t.Errorf("meta = %s/%d/%s, want failed/3/failed", r.meta.State, r.meta.ExitCode, r.meta.Attention)
	}
	if got := readFile(t, filepath.Join(w.merged, "new.txt")); got != "made\n" {
		t.Errorf("write did not land in the World: %q", got)
	}
	if _, err := os.Stat(filepath.Join(w.source, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the source got the World's write: %v", err)
	}
	if got := readFile(t, filepath.Join(w.source, "file.txt")); got != "source\n" {
		t.Errorf("source file changed: %q", got)
	}
	if r.meta.InitPID == 0 || r.meta.PID == 0 || r.meta.PID == r.meta.InitPID || r.meta.EndedAt.Before(r.meta.StartedAt) {
		t.Errorf("meta pids/timings not recorded: %+v", r.meta)
	}
	if !slices.Contains(r.meta.Env, "API_TOKEN=[redacted]") || !slices.Contains(r.meta.Env, "MY_VAR=[redacted]") {
		t.Errorf("secret not redacted in meta: %v", r.meta.Env)
	}
	raw := readFile(t, filepath.Join(w.worldDir(), "sessions", r.meta.ID, MetaFile))
	if strings.Contains(raw, "hunter") {
		t.Error("meta.json holds the secret")
	}
	// The session dir holds no copy of the full env anywhere.
	entries, _ := os.ReadDir(filepath.Join(w.worldDir(), "sessions", r.meta.ID))
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if data, _ := os.ReadFile(filepath.Join(w.worldDir(), "sessions", r.meta.ID, e.Name())); strings.Contains(string(data), "hunter") {
			t.Errorf("%s holds the secret", e.Name())
		}
	}
}

func TestSessionExitCodesAndSignals(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "codes")
	for _, tc := range []struct {
		script string
		state  SessionState
		code   int
		signal string
	}{
		{"true", SessionExited, 0, ""},
		{"exit 3", SessionFailed, 3, ""},
		{"kill -9 $$", SessionKilled, 137, "SIGKILL"},
		{"kill -TERM $$", SessionKilled, 143, "SIGTERM"},
	} {
		r := runSession(t, w.sh(tc.script))
		if r.meta.State != tc.state || r.meta.ExitCode != tc.code || r.meta.Signal != tc.signal {
			t.Errorf("%q: got %s/%d/%q, want %s/%d/%q", tc.script, r.meta.State, r.meta.ExitCode, r.meta.Signal, tc.state, tc.code, tc.signal)
		}
	}
}

func TestSessionCommandNotFound(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "missing")
	spec := w.spec("no-such-command-here")
	meta, err := StartSession(context.Background(), spec)
	if !errors.Is(err, ErrStartFailed) || !strings.Contains(err.Error(), "exec: no-such-command-here: not found") {
		t.Fatalf("err = %v, want not found wrapping ErrStartFailed", err)
	}
	if meta.State != SessionFailed || meta.ExitCode != 127 {
		t.Errorf("meta = %s/%d, want failed/127", meta.State, meta.ExitCode)
	}
	// The command is looked up in the World: a script only the World has runs.
	writeFile(t, filepath.Join(w.merged, "tool.sh"), "#!/bin/sh\necho from-world\n")
	os.Chmod(filepath.Join(w.merged, "tool.sh"), 0o755)
	r := runSession(t, w.spec(filepath.Join(w.source, "tool.sh")))
	if r.stdout != "from-world\n" || r.meta.State != SessionExited {
		t.Errorf("World script: %q %s", r.stdout, r.meta.State)
	}
	writeFile(t, filepath.Join(w.merged, "noexec.sh"), "#!/bin/sh\n")
	meta, err = StartSession(context.Background(), w.spec(filepath.Join(w.source, "noexec.sh")))
	if err == nil || meta.ExitCode != 126 {
		t.Errorf("non-executable: %v, code %d, want 126", err, meta.ExitCode)
	}
}

// TestSessionIsolation tries, as root inside a tree session, every way out we know
// of; each success prints ESCAPED.
func TestSessionIsolation(t *testing.T) {
	requireRoot(t)
	for _, tool := range []string{"umount", "mount", "unshare", "mknod", "find"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	w := newTestWorld(t, "jail")
	script := `
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "ESCAPED:$name"; fi; }
try umount umount "$SRC"
try umount-lazy umount -l "$SRC"
try remount mount -o remount,ro "$SRC"
try bind mount --bind / "$SRC"
try unshare unshare -m true
try userns-umount unshare -Urm sh -c 'umount "$SRC"'
try userns-unhide unshare -Urm sh -c 'umount "$STATE" && cat "$STATE/worlds/other/upper/secret.txt"'
try read-other cat "$STATE/worlds/other/upper/secret.txt"
try read-other-proc cat "/proc/1/root$STATE/worlds/other/upper/secret.txt"
try init-fds sh -c 'for f in /proc/1/fd/*; do readlink "$f" && exit 0; ls "$f/" && exit 0; done; exit 1'
try init-cwd ls /proc/1/cwd/
try mknod mknod /dev/shm/blk b 7 0
try mount-proc mount -t proc proc /mnt
echo via-proc > "/proc/1/root$SRC/via-proc.txt" 2>/dev/null
echo "state:[$(ls -A "$STATE" 2>&1 | tr '\n' ' ')]"
echo "blockdevs:[$(find /dev -type b 2>/dev/null | tr '\n' ' ')]"
grep -E '^(CapEff|CapPrm|CapBnd|CapInh|CapAmb|NoNewPrivs):' /proc/self/status
`
	r := runSession(t, w.sh(script))
	t.Logf("session output:\n%s%s", r.stdout, r.stderr)
	if strings.Contains(r.stdout, "ESCAPED") {
		t.Errorf("escapes succeeded:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "state:[]") && !strings.Contains(r.stdout, "Permission denied") {
		t.Errorf("state root visible: %s", r.stdout)
	}
	if !strings.Contains(r.stdout, "blockdevs:[]") {
		t.Errorf("block devices reachable: %s", r.stdout)
	}
	caps := map[string]uint64{}
	for _, line := range strings.Split(r.stdout, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil {
			caps[k] = n
		}
	}
	var keep uint64
	for _, c := range local.KeptCapabilities() {
		keep |= 1 << uint(c)
	}
	for _, set := range []string{"CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"} {
		v, ok := caps[set]
		if !ok {
			t.Errorf("%s not reported", set)
			continue
		}
		if v&^keep != 0 {
			t.Errorf("%s = %#x has capabilities beyond the kept set %#x", set, v, keep)
		}
		if v&(1<<unix.CAP_SYS_ADMIN) != 0 || v&(1<<unix.CAP_DAC_READ_SEARCH) != 0 {
			t.Errorf("%s still holds SYS_ADMIN or DAC_READ_SEARCH", set)
		}
	}
	if caps["CapEff"]&(1<<unix.CAP_DAC_OVERRIDE) == 0 {
		t.Errorf("CapEff lost DAC_OVERRIDE, which root builds need")
	}
	if caps["NoNewPrivs"] != 1 {
		t.Errorf("no_new_privs not set")
	}
	// Whatever reached /proc/1/root landed in the World, never in the source.
	if _, err := os.Stat(filepath.Join(w.source, "via-proc.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("write through /proc/1/root reached the source")
	}
	if got := readFile(t, filepath.Join(w.source, "file.txt")); got != "source\n" {
		t.Errorf("source changed: %q", got)
	}
	entries, _ := os.ReadDir(w.source)
	if len(entries) != 1 {
		t.Errorf("source gained entries: %v", entries)
	}
	if got := readFile(t, filepath.Join(w.stateRoot, "worlds", "other", "upper", "secret.txt")); got != "secret\n" {
		t.Errorf("other World's upper changed: %q", got)
	}
	if _, err := os.Stat("/dev/shm/blk"); err == nil {
		os.Remove("/dev/shm/blk")
		t.Errorf("mknod reached the host's /dev/shm")
	}
}

func TestSessionRealOverlay(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "ovl")
	upper := filepath.Join(w.worldDir(), "upper")
	work := filepath.Join(w.worldDir(), "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.RemoveAll(w.merged)
	os.MkdirAll(w.merged, 0o755)
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", w.source, upper, work)
	if err := unix.Mount("overlay", w.merged, "overlay", 0, opts); err != nil {
		t.Skipf("kernel overlay not available: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(w.merged, 0); err != nil {
			unix.Unmount(w.merged, unix.MNT_DETACH)
		}
	})
	r := runSession(t, w.sh(`cat "$SRC/file.txt"; echo changed > "$SRC/file.txt"; echo new > "$SRC/new.txt"; rm "$SRC/file.txt"; ls "$SRC"`))
	if r.stdout != "source\nnew.txt\n" || r.meta.State != SessionExited {
		t.Fatalf("session: %q %q %s", r.stdout, r.stderr, r.meta.State)
	}
	if got := readFile(t, filepath.Join(upper, "new.txt")); got != "new\n" {
		t.Errorf("upper new.txt = %q", got)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(upper, "file.txt"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("no whiteout in the upper for the deleted file")
	}
	if got := readFile(t, filepath.Join(w.source, "file.txt")); got != "source\n" {
		t.Errorf("source changed: %q", got)
	}
}

func TestSessionStrict(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "strict")
	cache := t.TempDir()
	hostTmp, err := os.CreateTemp("", "strata-host-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	hostTmp.Close()
	t.Cleanup(func() { os.Remove(hostTmp.Name()) })
	spec := w.sh(`
touch /usr/strata-probe 2>&1 | grep -q 'Read-only' && echo usr-ro
touch "$HOME/strata-probe" 2>&1 | grep -q 'Read-only' && echo home-ro
echo private > /tmp/strata-private && echo tmp-rw
[ -e "` + hostTmp.Name() + `" ] || echo host-tmp-hidden
echo w > "` + w.source + `/w.txt" && echo world-rw
echo c > "` + cache + `/c.txt" && echo bind-rw
echo x > /dev/null && echo dev-ok
`)
	spec.Isolation = IsolationStrict
	spec.Binds = []Bind{{Source: cache, Target: cache}}
	r := runSession(t, spec)
	want := "usr-ro\nhome-ro\ntmp-rw\nhost-tmp-hidden\nworld-rw\nbind-rw\ndev-ok\n"
	if r.stdout != want {
		t.Errorf("strict session printed %q (stderr %q), want %q", r.stdout, r.stderr, want)
	}
	if _, err := os.Stat("/tmp/strata-private"); err == nil {
		os.Remove("/tmp/strata-private")
		t.Error("the session's /tmp is the host's")
	}
	if _, err := os.Stat("/usr/strata-probe"); err == nil {
		os.Remove("/usr/strata-probe")
		t.Error("/usr was writable")
	}
	if readFile(t, filepath.Join(w.merged, "w.txt")) != "w\n" || readFile(t, filepath.Join(cache, "c.txt")) != "c\n" {
		t.Error("World or bind writes lost")
	}
}

func TestSessionHostnameAndNetwork(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "netless")
	spec := w.sh(`hostname; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; cat /sys/class/net/lo/operstate 2>/dev/null >/dev/null; ip -o link show lo 2>/dev/null | grep -c UP`)
	spec.NoNetwork = true
	r := runSession(t, spec)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 2 || lines[0] != "netless" || lines[1] != "lo" {
		t.Fatalf("hostname and interfaces = %q, want netless then only lo", r.stdout)
	}
	if len(lines) != 3 || lines[2] != "1" {
		t.Errorf("lo not up: %q", r.stdout)
	}
	// Without NoNetwork the host's interfaces are there.
	r = runSession(t, w.sh(`tail -n +3 /proc/net/dev | wc -l`))
	if n, _ := strconv.Atoi(strings.TrimSpace(r.stdout)); n < 2 {
		t.Logf("host has only %d interfaces; network check is weak here", n)
	}
}

func TestSessionStdin(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "stdin")
	r := runSession(t, w.sh(`cat; echo end`))
	if r.stdout != "end\n" {
		t.Errorf("default stdin is not empty: %q", r.stdout)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { pw.WriteString("piped\n"); pw.Close() }()
	spec := w.sh(`cat`)
	spec.Stdin = pr
	r = runSession(t, spec)
	pr.Close()
	if r.stdout != "piped\n" {
		t.Errorf("stdin not passed: %q", r.stdout)
	}
}

func TestSessionsConcurrentWorlds(t *testing.T) {
	requireRoot(t)
	source := t.TempDir()
	stateRoot := t.TempDir()
	writeFile(t, filepath.Join(source, "file.txt"), "source\n")
	var worlds []testWorld
	for i := range 4 {
		w := testWorld{name: fmt.Sprintf("w%d", i), source: source, stateRoot: stateRoot}
		w.merged = filepath.Join(stateRoot, "worlds", w.name, "merged")
		writeFile(t, filepath.Join(w.merged, "file.txt"), w.name+"\n")
		worlds = append(worlds, w)
	}
	var wg sync.WaitGroup
	results := make(chan string, 20)
	for _, w := range worlds {
		for j := range 5 {
			wg.Go(func() {
				r := runSession(t, w.sh(fmt.Sprintf(`cat "$SRC/file.txt"; echo %d > "$SRC/s%d.txt"; sleep 0.2`, j, j)))
				if r.meta.State != SessionExited {
					results <- fmt.Sprintf("%s/%d: %s %s", w.name, j, r.meta.State, r.stderr)
				}
				if r.stdout != w.name+"\n" {
					results <- fmt.Sprintf("%s/%d saw %q", w.name, j, r.stdout)
				}
			})
		}
	}
	wg.Wait()
	close(results)
	for msg := range results {
		t.Error(msg)
	}
	for _, w := range worlds {
		entries, _ := os.ReadDir(w.merged)
		if len(entries) != 6 {
			t.Errorf("World %s has %d entries, want file.txt and its 5 sessions' files", w.name, len(entries))
		}
		sessions, err := ListSessions(w.worldDir())
		if err != nil || len(sessions) != 5 {
			t.Errorf("ListSessions(%s) = %d, %v", w.name, len(sessions), err)
		}
		if WorldAttention(sessions) != AttentionDone {
			t.Errorf("World %s attention %s, want done", w.name, WorldAttention(sessions))
		}
	}
	if entries, _ := os.ReadDir(source); len(entries) != 1 {
		t.Errorf("source gained files: %v", entries)
	}
}

func TestSessionSurvivesCaller(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "detached")
	spec := w.sh(`i=0; while [ $i -lt 30 ]; do echo line$i; i=$((i+1)); sleep 0.01; done; echo done`)
	spec.Dir = filepath.Join(w.worldDir(), "sessions", NewSessionID())
	specJSON, _ := json.Marshal(spec)
	caller := exec.Command(os.Args[0])
	caller.Env = append(os.Environ(), testCallerEnv+"="+string(specJSON))
	stdout, _ := caller.StdoutPipe()
	caller.Stderr = os.Stderr
	if err := caller.Start(); err != nil {
		t.Fatal(err)
	}
	var started SessionMeta
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&started); err != nil {
		t.Fatalf("caller did not report a started session: %v", err)
	}
	caller.Process.Kill()
	caller.Wait()
	meta, err := WaitSession(context.Background(), spec.Dir)
	if err != nil || meta.State != SessionExited {
		t.Fatalf("session after its caller died: %v %+v", err, meta)
	}
	var out strings.Builder
	err = FollowTranscript(context.Background(), spec.Dir, 0, func(r Record) error {
		out.Write(r.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range 30 {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	want.WriteString("done\n")
	if out.String() != want.String() {
		t.Errorf("transcript incomplete:\n%s", out.String())
	}
}

// A source gone by the time the init binds the World over it (moved after
// strata exec looked) fails the session; the init never makes the directory
// again on the host, where it would stand as an empty "source".
func TestSessionRefusesMissingSource(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "gone")
	if err := os.RemoveAll(w.source); err != nil {
		t.Fatal(err)
	}
	spec := w.spec("/bin/true")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, err := StartSession(ctx, spec)
	if err == nil {
		meta, err = WaitSession(ctx, filepath.Join(spec.SessionsDir, meta.ID))
	}
	if err == nil && meta.ExitCode == 0 && meta.Error == "" {
		t.Fatalf("a session over a missing source ran: %+v", meta)
	}
	if msg := fmt.Sprint(err) + meta.Error; !strings.Contains(msg, "no longer exists") {
		t.Errorf("error %q does not say the source is gone", msg)
	}
	if _, err := os.Lstat(w.source); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the session made %s again: %v", w.source, err)
	}
}

func TestSessionKillAndLost(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "kill")
	meta, err := StartSession(context.Background(), w.sh(`trap 'echo got-term; exit 7' TERM; while :; do sleep 0.01; done`))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(w.worldDir(), "sessions", meta.ID)
	time.Sleep(100 * time.Millisecond) // let the trap be installed
	if err := KillSession(dir, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r, err := WaitSession(context.Background(), dir)
	if err != nil || r.ExitCode != 7 || r.State != SessionFailed {
		t.Errorf("after SIGTERM: %v %s/%d", err, r.State, r.ExitCode)
	}
	if err := KillSession(dir, syscall.SIGTERM); !errors.Is(err, ErrSessionNotRunning) {
		t.Errorf("killing an ended session: %v", err)
	}

	// An init killed outright cannot record an end: the session reads as lost.
	meta, err = StartSession(context.Background(), w.sh(`sleep 30`))
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(w.worldDir(), "sessions", meta.ID)
	if m, _ := ReadSessionMeta(dir); m.State != SessionRunning {
		t.Fatalf("state %s, want running", m.State)
	}
	if err := unix.Kill(meta.InitPID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := WaitSession(ctx, dir)
	if err != nil || m.State != SessionLost || m.Attention != AttentionLost {
		t.Errorf("after killing the init: %v %s/%s, want lost", err, m.State, m.Attention)
	}
	if m.ExitCode != LostExitCode || !strings.Contains(m.Error, "session lost") {
		t.Errorf("a lost session reads as exit %d, error %q", m.ExitCode, m.Error)
	}
	// The command goes with its pid namespace (the kernel kills it while the
	// init's last thread exits).
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		err := unix.Kill(meta.PID, 0)
		if errors.Is(err, unix.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("command %d still alive 2 s after its init died: %v", meta.PID, err)
			break
		}
	}
}

func BenchmarkSessionTrue(b *testing.B) {
	requireRoot(b)
	w := newTestWorld(b, "bench")
	for b.Loop() {
		r := runSession(b, w.spec("/bin/true"))
		if r.meta.State != SessionExited {
			b.Fatalf("state %s", r.meta.State)
		}
	}
}

// TestSessionLatency measures what `strata exec W -- true` pays for the session:
// start (StartSession until the command runs) and the whole run (start, wait, read
// the transcript).
func TestSessionLatency(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "latency")
	var starts, totals []time.Duration
	for range 20 {
		t0 := time.Now()
		meta, err := StartSession(context.Background(), w.spec("/bin/true"))
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		dir := filepath.Join(w.worldDir(), "sessions", meta.ID)
		if m, err := WaitSession(context.Background(), dir); err != nil || m.State != SessionExited {
			t.Fatalf("%v %s", err, m.State)
		}
		if _, _, err := ReadTranscript(filepath.Join(dir, TranscriptFile), 0); err != nil {
			t.Fatal(err)
		}
		starts = append(starts, t1.Sub(t0))
		totals = append(totals, time.Since(t0))
	}
	slices.Sort(starts)
	slices.Sort(totals)
	t.Logf("session start median %v (min %v), whole true session median %v (min %v)", starts[10], starts[0], totals[10], totals[0])
	if totals[10] > 500*time.Millisecond {
		t.Errorf("a true session takes %v", totals[10])
	}
}

// TestSessionRootless runs a session as an unprivileged user: the init gets a user
// namespace mapping that user to root, and everything else works as for root.
func TestSessionRootless(t *testing.T) {
	requireRoot(t) // to set up a user to run as
	if data, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(data)) == "0" {
		t.Skip("user namespaces are disabled")
	}
	const uid, gid = 65534, 65534
	base, err := os.MkdirTemp("", "strata-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	exe := filepath.Join(base, "strata.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	w := testWorld{name: "rootless", source: filepath.Join(base, "src"), stateRoot: filepath.Join(base, "state")}
	w.merged = filepath.Join(w.stateRoot, "worlds", w.name, "merged")
	writeFile(t, filepath.Join(w.source, "file.txt"), "source\n")
	writeFile(t, filepath.Join(w.merged, "file.txt"), "world\n")
	writeFile(t, filepath.Join(w.stateRoot, "worlds", "other", "upper", "secret.txt"), "secret\n")
	for _, d := range []string{w.source, w.stateRoot} {
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
	}
	for _, iso := range []Isolation{IsolationTree, IsolationStrict, IsolationSandbox} {
		// Literal paths: the confined levels scrub SRC and STATE.
		spec := w.sh(strings.NewReplacer("$SRC", w.source, "$STATE", w.stateRoot).Replace(`id -u; cat "$SRC/file.txt"; echo new > "$SRC/new-` + string(iso) + `"; cat "$STATE/worlds/other/upper/secret.txt" 2>/dev/null && echo ESCAPED; umount "$SRC" 2>/dev/null && echo ESCAPED; touch /usr/x 2>&1 | grep -q Read-only && echo usr-ro; true`))
		spec.Isolation = iso
		spec.Dir = filepath.Join(w.worldDir(), "sessions", NewSessionID())
		spec.Exe = exe
		specJSON, _ := json.Marshal(spec)
		caller := exec.Command(exe)
		caller.Env = append(os.Environ(), testCallerEnv+"="+string(specJSON), testCallerWaitEnv+"=1")
		caller.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		caller.Dir = "/"
		out, err := caller.Output()
		if err != nil {
			t.Fatalf("%s: rootless caller: %v\n%s", iso, err, err.(*exec.ExitError).Stderr)
		}
		var meta SessionMeta
		if err := json.Unmarshal(out, &meta); err != nil || meta.State != SessionExited {
			t.Fatalf("%s: rootless session: %v %q", iso, err, out)
		}
		records, _, err := ReadTranscript(filepath.Join(spec.Dir, TranscriptFile), 0)
		if err != nil {
			t.Fatal(err)
		}
		var stdout strings.Builder
		for _, r := range records {
			if r.Stream == StreamStdout {
				stdout.Write(r.Data)
			}
		}
		want := "0\nworld\n"
		if iso != IsolationTree {
			want += "usr-ro\n"
		}
		if stdout.String() != want {
			t.Errorf("%s: rootless session printed %q, want %q", iso, stdout.String(), want)
		}
		if readFile(t, filepath.Join(w.merged, "new-"+string(iso))) != "new\n" {
			t.Errorf("%s: write did not land in the World", iso)
		}
	}
	if entries, _ := os.ReadDir(w.source); len(entries) != 1 {
		t.Errorf("source changed: %v", entries)
	}
}

// Row 7 of docs/security.md: a file descriptor the caller had open (a host
// dir, not close-on-exec) is not inherited by the command, nor are the
// init's own fds, at every level.
func TestSessionInheritsNoFDs(t *testing.T) {
	requireRoot(t)
	hostDir := t.TempDir()
	writeFile(t, filepath.Join(hostDir, "host-listing-marker"), "")
	d, err := os.Open(hostDir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// An inheritable copy at the lowest free fd from 7 (the test's own fds
	// below it belong to the runtime).
	fd, err := unix.FcntlInt(d.Fd(), unix.F_DUPFD, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, iso := range Isolations() {
		t.Run(string(iso), func(t *testing.T) {
			w := newTestWorld(t, "fds-"+string(iso))
			spec := w.sh(fmt.Sprintf(`ls /proc/self/fd/%d/ 2>&1; echo pwned > /proc/self/fd/%d/written 2>&1; echo FDS; ls /proc/$$/fd`, fd, fd))
			spec.Isolation = iso
			r := runSession(t, spec)
			if strings.Contains(r.stdout, "host-listing-marker") {
				t.Errorf("the command listed the host dir through inherited fd %d:\n%s", fd, r.stdout)
			}
			if _, err := os.Stat(filepath.Join(hostDir, "written")); err == nil {
				os.Remove(filepath.Join(hostDir, "written"))
				t.Errorf("the command wrote the host dir through inherited fd %d", fd)
			}
			_, fds, _ := strings.Cut(r.stdout, "FDS\n")
			if got := strings.Fields(fds); !slices.Equal(got, []string{"0", "1", "2"}) {
				t.Errorf("the command's shell has fds %q, want only 0 1 2 (stdout %q, stderr %q)", got, r.stdout, r.stderr)
			}
		})
	}
}

// The sandbox level through a real session (docs/security.md rows 2, 3, 5,
// 6, 8, 15, 16): host writes refused, home writes in the World's layer,
// a planted credential unreadable, secrets dropped from the environment,
// host sockets under /tmp unreachable, no host pids, the cgroupfs read-only.
func TestSessionSandbox(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "sbx")
	host, err := os.MkdirTemp("/var/lib", "strata-sbx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(host) })
	home := filepath.Join(host, "home")
	writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), "ssh-secret-marker\n")
	writeFile(t, filepath.Join(home, ".bashrc"), "# real\n")
	hostTmp, err := os.CreateTemp("", "strata-sbx-host-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	hostTmp.Close()
	t.Cleanup(func() { os.Remove(hostTmp.Name()) })
	upper, work := filepath.Join(w.worldDir(), "home", "upper"), filepath.Join(w.worldDir(), "home", "work")
	env := []string{defaultPath, "HOME=" + home, "FOO_TOKEN=token-marker", "SSH_AUTH_SOCK=/tmp/agent.sock", "KEEP_ME=kept"}
	b, err := boundary.Compute(&boundary.Config{}, boundary.World{
		Name: w.name, Source: w.source, StateRoot: w.stateRoot, Home: home, HomeUpper: upper, HomeWork: work,
	}, env, boundary.Request{Level: "sandbox", PassEnv: []string{"KEEP_ME"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := w.sh(`
cat "$HOME/.ssh/id_ed25519" 2>/dev/null
(echo evil > /usr/strata-sbx-probe) 2>&1 | grep -q Read-only && echo usr-ro
echo layer >> "$HOME/.bashrc" && echo home-rw
[ -e "` + hostTmp.Name() + `" ] || echo host-tmp-hidden
echo private > /tmp/strata-sbx-private && echo tmp-rw
echo w > "` + w.source + `/w.txt" && echo world-rw
env
ls /proc | grep -c '^[0-9]'
(echo $$ > /sys/fs/cgroup/cgroup.procs) 2>&1 | grep -q Read-only && echo cgroup-ro
`)
	spec.Isolation, spec.Boundary, spec.Env = IsolationSandbox, b, b.Env
	r := runSession(t, spec)
	for _, bad := range []string{"ssh-secret-marker", "token-marker", "SSH_AUTH_SOCK"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("the command saw %s:\n%s", bad, r.stdout)
		}
	}
	for _, want := range []string{"usr-ro\n", "home-rw\n", "host-tmp-hidden\n", "tmp-rw\n", "world-rw\n", "KEEP_ME=kept\n", "cgroup-ro\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in the sandboxed command's output:\n%s\nstderr %s", want, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat("/usr/strata-sbx-probe"); err == nil {
		os.Remove("/usr/strata-sbx-probe")
		t.Error("/usr was writable")
	}
	if _, err := os.Stat("/tmp/strata-sbx-private"); err == nil {
		os.Remove("/tmp/strata-sbx-private")
		t.Error("the session's /tmp is the host's")
	}
	if got := readFile(t, filepath.Join(home, ".bashrc")); got != "# real\n" {
		t.Errorf("the real ~/.bashrc changed: %q", got)
	}
	if got := readFile(t, filepath.Join(upper, ".bashrc")); got != "# real\nlayer\n" {
		t.Errorf("the World's home layer holds %q, want the write", got)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for i, l := range lines {
		if l == "world-rw" || strings.HasPrefix(l, "KEEP_ME") {
			continue
		}
		if n, err := strconv.Atoi(l); err == nil && i > 0 && n > 10 {
			t.Errorf("the command sees %d processes: host pids visible", n)
		}
	}
}
