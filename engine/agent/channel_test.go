package agent

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func hookEnv(dir string) func(string) string {
	return func(k string) string {
		if k == EnvHookDir {
			return dir
		}
		return ""
	}
}

func readAll(t *testing.T, r *Reader) []Event {
	t.Helper()
	var all []Event
	for {
		evs, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		if len(evs) < maxBatch {
			return all
		}
	}
}

func TestRunHookClaudeFields(t *testing.T) {
	dir := t.TempDir()
	in := `{"session_id":"abc-123","transcript_path":"/root/.claude/projects/x/abc-123.jsonl","cwd":"/src","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf build","description":"clean"}}`
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if err := RunHook([]string{"claude", "PreToolUse"}, strings.NewReader(in), hookEnv(dir), t0); err != nil {
		t.Fatal(err)
	}
	if err := RunHook([]string{"claude", "UserPromptSubmit"}, strings.NewReader(`{"session_id":"abc-123","prompt":"fix the build"}`), hookEnv(dir), t0.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	codex := `{"type":"agent-turn-complete","thread-id":"th-9","turn-id":"t1","cwd":"/src","input-messages":["do it","now"],"last-assistant-message":"done"}`
	if err := RunHook([]string{"codex", codex}, nil, hookEnv(dir), t0.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, NewReader(dir))
	if len(evs) != 3 {
		t.Fatalf("got %d events: %+v", len(evs), evs)
	}
	e := evs[0]
	if e.Kind != "PreToolUse" || e.Agent != "claude" || e.SessionID != "abc-123" || e.Tool != "Bash" || e.ToolInput != "rm -rf build" || e.Cwd != "/src" || !e.Time.Equal(t0) || e.Invalid || len(e.Raw) == 0 {
		t.Errorf("PreToolUse: %+v", e)
	}
	if evs[1].Prompt != "fix the build" || evs[1].Kind != "UserPromptSubmit" {
		t.Errorf("prompt: %+v", evs[1])
	}
	c := evs[2]
	if c.Kind != "agent-turn-complete" || c.SessionID != "th-9" || c.TurnID != "t1" || c.Prompt != "do it\nnow" || c.Message != "done" {
		t.Errorf("codex: %+v", c)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("reader left %d files", len(ents))
	}
}

// pipeOf feeds data through a real pipe and reports whether the writer
// finished (a hook that stops reading would leave the agent blocked).
func pipeOf(t *testing.T, data []byte) (io.Reader, func() bool) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { w.Write(data); w.Close(); close(done) }()
	t.Cleanup(func() { r.Close() })
	return r, func() bool {
		select {
		case <-done:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
}

func TestRunHookHostileInput(t *testing.T) {
	dir := t.TempDir()
	env := hookEnv(dir)
	now := time.Now()

	// 5 MiB of JSON: cut, marked, the agent's write completes.
	huge := []byte(`{"session_id":"s","prompt":"` + strings.Repeat("A", 5<<20) + `"}`)
	r, finished := pipeOf(t, huge)
	if err := RunHook([]string{"claude", "UserPromptSubmit"}, r, env, now); err != nil {
		t.Fatal(err)
	}
	if !finished() {
		t.Fatal("hook stopped reading stdin: the agent would block writing it")
	}
	// A big but complete prompt: kept, cut to maxPromptText, raw dropped.
	big := []byte(`{"session_id":"s","prompt":"` + strings.Repeat("é", 100<<10) + `"}`)
	if err := RunHook([]string{"claude", "UserPromptSubmit"}, bytes.NewReader(big), env, now.Add(1)); err != nil {
		t.Fatal(err)
	}
	// Garbage and binary.
	for i, g := range []string{"not json", "\x00\xff\xfe{", `["array"]`, `{"session_id": 5}`} {
		if err := RunHook([]string{"claude", "Stop"}, strings.NewReader(g), env, now.Add(time.Duration(2+i))); err != nil {
			t.Fatal(err)
		}
	}
	// Codex with a hostile type.
	if err := RunHook([]string{"codex", `{"type":"../../etc/passwd"}`}, nil, env, now.Add(10)); err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, NewReader(dir))
	if len(evs) != 7 {
		t.Fatalf("got %d events, want 7", len(evs))
	}
	if e := evs[0]; !e.Truncated || !e.Invalid || e.Prompt != "" || len(e.Raw) != 0 {
		t.Errorf("huge: truncated=%v invalid=%v prompt=%d raw=%d", e.Truncated, e.Invalid, len(e.Prompt), len(e.Raw))
	}
	if e := evs[1]; e.Invalid || !e.Truncated || len(e.Prompt) > maxPromptText+len("…") || !strings.HasPrefix(e.Prompt, "éé") || len(e.Raw) != 0 {
		t.Errorf("big: invalid=%v truncated=%v prompt=%d raw=%d", e.Invalid, e.Truncated, len(e.Prompt), len(e.Raw))
	}
	for _, e := range evs[2:5] {
		if !e.Invalid || e.Kind != "Stop" {
			t.Errorf("garbage: %+v", e)
		}
	}
	if e := evs[5]; e.Invalid || e.SessionID != "" {
		t.Errorf("non-string session_id: %+v", e)
	}
	if e := evs[6]; e.Kind != "unknown" || !e.Invalid {
		t.Errorf("codex type: %+v", e)
	}
}

func TestRunHookRejectsBadArgs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "chan")
	os.Mkdir(dir, 0o755)
	for _, args := range [][]string{
		nil,
		{"vim", "Stop"},
		{"claude"},
		{"claude", "../../x"},
		{"claude", "a/b"},
		{"claude", ""},
		{"claude", "Stop", "extra"},
		{"claude", strings.Repeat("A", 65)},
		{"codex"},
		{"gemini", ".hidden"},
	} {
		if err := RunHook(args, strings.NewReader("{}"), hookEnv(dir), time.Now()); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	for _, bad := range []string{"", "relative/dir", filepath.Join(root, "missing")} {
		if err := RunHook([]string{"claude", "Stop"}, strings.NewReader("{}"), hookEnv(bad), time.Now()); err == nil {
			t.Errorf("hook dir %q accepted", bad)
		}
	}
	var found []string
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if p != root && p != dir {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 0 {
		t.Errorf("rejected calls wrote %q", found)
	}
}

func TestReaderRejectsForgedFiles(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(secret, []byte(`{"agent":"claude","kind":"Stop","message":"leaked"}`), 0o644)
	name := func(i int) string { return fmt.Sprintf("%020d-1-%016x.json", 1000+i, i) }
	os.Symlink(secret, filepath.Join(dir, name(1)))
	if err := unix.Mkfifo(filepath.Join(dir, name(2)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, name(3)), bytes.Repeat([]byte("x"), maxRecord+1), 0o644)
	os.Mkdir(filepath.Join(dir, name(4)), 0o755)
	os.WriteFile(filepath.Join(dir, name(5)), []byte("garbage"), 0o644)
	os.WriteFile(filepath.Join(dir, name(6)), []byte(`{"agent":"evil","kind":"Stop"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "../"+filepath.Base(dir)+"/notarecord.json"), []byte(`{"agent":"claude","kind":"Stop"}`), 0o644)
	os.WriteFile(filepath.Join(dir, name(7)), []byte(`{"agent":"claude","kind":"Stop","message":"ok"}`), 0o644)
	os.WriteFile(filepath.Join(dir, ".fresh.tmp"), []byte("half"), 0o644)
	old := filepath.Join(dir, ".old.tmp")
	os.WriteFile(old, []byte("half"), 0o644)
	os.Chtimes(old, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))

	r := NewReader(dir)
	done := make(chan []Event)
	go func() { evs, _ := r.Read(); done <- evs }()
	var evs []Event
	select {
	case evs = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reader hung (on the FIFO?)")
	}
	if len(evs) != 1 || evs[0].Message != "ok" {
		t.Fatalf("got %+v, want only the genuine event", evs)
	}
	if r.Rejected != 7 {
		t.Errorf("Rejected = %d, want 7", r.Rejected)
	}
	left, _ := os.ReadDir(dir)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{".fresh.tmp"}) {
		t.Errorf("left in channel: %q (a fresh temp file stays, the rest goes)", names)
	}
	if _, err := os.Stat(secret); err != nil {
		t.Errorf("symlink target removed: %v", err)
	}
}

func TestReaderFlood(t *testing.T) {
	dir := t.TempDir()
	const writers, each = 8, 400
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				in := fmt.Sprintf(`{"session_id":"s","prompt":"%d-%d"}`, w, i)
				if err := RunHook([]string{"claude", "UserPromptSubmit"}, strings.NewReader(in), hookEnv(dir), time.Now()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Read while they write: nothing half-written, nothing twice, nothing lost.
	r := NewReader(dir)
	seen := map[string]bool{}
	var ids []string
	stop := make(chan struct{})
	go func() { wg.Wait(); close(stop) }()
	read := func() {
		evs, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(evs, func(a, b Event) int { return strings.Compare(a.ID, b.ID) }) {
			t.Fatal("a batch is out of order")
		}
		if len(evs) > maxBatch {
			t.Fatalf("batch of %d", len(evs))
		}
		for _, e := range evs {
			if seen[e.Prompt] {
				t.Fatalf("event %s read twice", e.Prompt)
			}
			seen[e.Prompt] = true
			ids = append(ids, e.ID)
		}
	}
	for running := true; running; {
		select {
		case <-stop:
			running = false
		default:
			read()
		}
	}
	for range 20 {
		read()
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != writers*each || r.Rejected != 0 {
		t.Fatalf("read %d of %d events, %d rejected", len(seen), writers*each, r.Rejected)
	}
	// Concurrent writers may publish an earlier-stamped event after a later
	// one was read, so order across batches is only promised for a writer
	// that waits for each hook (as agents do): see TestReaderSequentialOrder.
	_ = ids
}

func TestReaderSequentialOrder(t *testing.T) {
	dir := t.TempDir()
	r := NewReader(dir)
	var got []string
	for i := range 3*maxBatch + 7 {
		in := fmt.Sprintf(`{"prompt":"%05d"}`, i)
		if err := RunHook([]string{"claude", "UserPromptSubmit"}, strings.NewReader(in), hookEnv(dir), time.Now()); err != nil {
			t.Fatal(err)
		}
		if i%300 == 0 {
			for _, e := range readAll(t, r) {
				got = append(got, e.Prompt)
			}
		}
	}
	for _, e := range readAll(t, r) {
		got = append(got, e.Prompt)
	}
	if len(got) != 3*maxBatch+7 || !slices.IsSorted(got) {
		t.Fatalf("read %d events, sorted=%v", len(got), slices.IsSorted(got))
	}
}
