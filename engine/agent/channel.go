package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The hook channel: a directory per session, writable from inside the World,
// where `strata __hook` leaves one file per event. A file is written under a
// dot-name and renamed into place, so a reader never sees half of one, and an
// event has no size limit from a pipe. The session's supervisor reads and
// removes them in name order (the name starts with the time).
const (
	// EnvHookDir names the channel directory in the agent's environment.
	EnvHookDir = "STRATA_HOOK_DIR"
	// WorldHookDir is where a session mounts its channel inside the World.
	WorldHookDir = "/run/strata/session/events"

	// MaxHookInput is how much of a hook's stdin is parsed; the rest is read
	// and dropped (so the agent never blocks writing it), up to maxDrain.
	MaxHookInput = 1 << 20
	maxDrain     = 64 << 20
	// MaxRawJSON is the largest agent JSON kept verbatim in an event.
	MaxRawJSON = 16 << 10
	// maxRecord bounds a record file the reader accepts.
	maxRecord = MaxRawJSON + 64<<10
	// maxBatch bounds the events one Read returns, so a flood is taken in turns.
	maxBatch = 512
	// Text fields are cut to these many bytes (on a rune boundary).
	maxPromptText = 8 << 10
	maxText       = 1 << 10
)

// Event is one report from an agent, as its hook saw it, normalised.
type Event struct {
	// ID is the record's name in the channel: its order.
	ID   string    `json:"-"`
	Time time.Time `json:"time"`
	// Agent is the integration that sent it: claude, codex, gemini, aider.
	Agent string `json:"agent"`
	// Kind is the event as the agent names it (SessionStart, PreToolUse,
	// agent-turn-complete, BeforeTool...).
	Kind string `json:"kind"`
	// SessionID is the agent's conversation id (Claude's session_id, Codex's thread-id).
	SessionID      string `json:"session_id,omitempty"`
	TurnID         string `json:"turn_id,omitempty"`
	Prompt         string `json:"prompt,omitempty"`
	Tool           string `json:"tool,omitempty"`
	ToolInput      string `json:"tool_input,omitempty"` // the command, file or URL the tool acts on
	Notification   string `json:"notification,omitempty"`
	Message        string `json:"message,omitempty"`
	Source         string `json:"source,omitempty"` // SessionStart source, SessionEnd reason
	Error          string `json:"error,omitempty"`
	TranscriptPath string `json:"transcript_path,omitempty"`
	Cwd            string `json:"cwd,omitempty"`
	Usage          *Usage `json:"usage,omitempty"`
	// Raw is the agent's JSON when it was small enough to keep; Truncated says
	// the input was cut (at MaxHookInput) or not kept.
	Raw       json.RawMessage `json:"raw,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	// Invalid says the input was not the JSON the agent documents.
	Invalid bool `json:"invalid,omitempty"`
}

// Usage is what an agent reports it spent.
type Usage struct {
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	CacheRead    int64   `json:"cache_read_tokens,omitempty"`
	CacheWrite   int64   `json:"cache_write_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

// Add sums u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheRead: u.CacheRead + v.CacheRead, CacheWrite: u.CacheWrite + v.CacheWrite,
		CostUSD: u.CostUSD + v.CostUSD,
	}
}

var (
	hookAgents = []string{"claude", "codex", "gemini", "aider"}
	// Compiled on first use, not at package init: every strata process
	// (a session's init too) links this package, few match an event name.
	eventName  = lazyRegexp(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	recordName = lazyRegexp(`^[0-9]{20}-[0-9]{1,10}-[0-9a-f]{16}\.json$`)
)

// ErrHookUsage is a `strata __hook` call with arguments it does not take.
var ErrHookUsage = errors.New("usage: strata __hook claude|gemini|aider EVENT, or strata __hook codex JSON")

// RunHook is `strata __hook ARGS...`, run by the agent inside the World: it
// reads the documented JSON (stdin for Claude and Gemini, the last argument for
// Codex, nothing for aider) and writes one event into the channel named by
// STRATA_HOOK_DIR. It prints nothing on stdout (Claude reads a hook's stdout
// as instructions) and the caller must exit 1, never 2, on error: exit 2
// makes Claude block the action.
func RunHook(args []string, stdin io.Reader, getenv func(string) string, now time.Time) error {
	if len(args) < 1 || !slices.Contains(hookAgents, args[0]) {
		return ErrHookUsage
	}
	dir := getenv(EnvHookDir)
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("strata __hook: %s is %q, not an absolute directory; the hook only works in a session strata started", EnvHookDir, dir)
	}
	ev := Event{Time: now.UTC(), Agent: args[0]}
	var input []byte
	switch args[0] {
	case "codex":
		// notify = [..., "codex"]: Codex appends the JSON as one argument.
		if len(args) != 2 {
			return ErrHookUsage
		}
		input = []byte(args[1])
		if len(input) > MaxHookInput {
			input, ev.Truncated = input[:MaxHookInput], true
		}
	default:
		if len(args) != 2 || !eventName().MatchString(args[1]) {
			return fmt.Errorf("strata __hook %s: event name %q: %w", args[0], strings.Join(args[1:], " "), ErrHookUsage)
		}
		ev.Kind = args[1]
		if args[0] != "aider" && stdin != nil {
			var err error
			input, err = io.ReadAll(io.LimitReader(stdin, MaxHookInput+1))
			if err != nil {
				return fmt.Errorf("strata __hook: read stdin: %w", err)
			}
			if len(input) > MaxHookInput {
				input, ev.Truncated = input[:MaxHookInput], true
				_, _ = io.Copy(io.Discard, io.LimitReader(stdin, maxDrain))
			}
		}
	}
	if len(bytes.TrimSpace(input)) > 0 {
		parseInput(&ev, input)
	}
	if ev.Kind == "" {
		ev.Kind = "unknown"
	}
	return WriteEvent(dir, ev)
}

// parseInput fills ev from the agent's JSON; input that is not a JSON object
// (or was truncated mid-way) leaves ev marked Invalid with only what the
// arguments said.
func parseInput(ev *Event, input []byte) {
	var m map[string]json.RawMessage
	if ev.Truncated || json.Unmarshal(input, &m) != nil {
		ev.Invalid = true
		return
	}
	if len(input) <= MaxRawJSON {
		ev.Raw = json.RawMessage(slices.Clone(input))
	} else {
		ev.Truncated = true
	}
	str := func(limit int, keys ...string) string {
		for _, k := range keys {
			var s string
			if raw, ok := m[k]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
				return cut(s, limit)
			}
		}
		return ""
	}
	ev.SessionID = str(maxText, "session_id", "thread-id", "thread_id")
	ev.TurnID = str(maxText, "turn-id", "turn_id")
	ev.TranscriptPath = str(maxText, "transcript_path")
	ev.Cwd = str(maxText, "cwd")
	ev.Prompt = str(maxPromptText, "prompt")
	ev.Tool = str(maxText, "tool_name")
	ev.Notification = str(maxText, "notification_type")
	ev.Message = str(maxText, "message", "last_assistant_message", "last-assistant-message")
	ev.Source = str(maxText, "source", "reason", "trigger")
	ev.Error = str(maxText, "error", "error_message")
	if ev.Agent == "codex" {
		ev.Kind = str(64, "type")
		var msgs []string
		if raw, ok := m["input-messages"]; ok && json.Unmarshal(raw, &msgs) == nil {
			ev.Prompt = cut(strings.Join(msgs, "\n"), maxPromptText)
		}
	}
	if raw, ok := m["tool_input"]; ok {
		var in map[string]any
		if json.Unmarshal(raw, &in) == nil {
			for _, k := range []string{"command", "file_path", "path", "url", "pattern", "query"} {
				if s, ok := in[k].(string); ok && s != "" {
					ev.ToolInput = cut(s, maxText)
					break
				}
			}
		}
	}
	if raw, ok := m["details"]; ok && ev.ToolInput == "" {
		// Gemini's Notification (ToolPermission) names the tool and what it
		// acts on only in details: the confirmation's type and its command,
		// file or URL.
		var d map[string]any
		if json.Unmarshal(raw, &d) == nil {
			for _, k := range []string{"command", "filePath", "fileName", "file_path", "path", "url", "urls", "prompt"} {
				if s, ok := d[k].(string); ok && s != "" {
					ev.ToolInput = cut(s, maxText)
					break
				}
			}
			if ev.Tool == "" {
				if s, _ := d["toolName"].(string); s != "" {
					ev.Tool = cut(s, maxText)
				} else if s, _ := d["type"].(string); geminiConfirmTool[s] != "" {
					ev.Tool = geminiConfirmTool[s]
				}
			}
		}
	}
	if raw, ok := m["usage"]; ok {
		var u struct {
			In  int64   `json:"input_tokens"`
			Out int64   `json:"output_tokens"`
			CR  int64   `json:"cache_read_input_tokens"`
			CW  int64   `json:"cache_creation_input_tokens"`
			USD float64 `json:"cost_usd"`
		}
		if json.Unmarshal(raw, &u) == nil {
			ev.Usage = &Usage{InputTokens: u.In, OutputTokens: u.Out, CacheRead: u.CR, CacheWrite: u.CW, CostUSD: u.USD}
		}
	}
	if ev.Kind != "" && !eventName().MatchString(ev.Kind) {
		ev.Kind, ev.Invalid = "unknown", true
	}
}

// geminiConfirmTool names the tool behind a Gemini confirmation's type.
var geminiConfirmTool = map[string]string{"exec": "shell", "edit": "edit", "info": "fetch", "mcp": "mcp"}

// cut shortens s to at most n bytes without splitting a rune, and makes it valid UTF-8.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// WriteEvent puts ev into the channel dir as one new file, atomically.
func WriteEvent(dir string, ev Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("strata __hook: encode event: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("%020d-%d-%s.json", ev.Time.UnixNano(), os.Getpid()%10_000_000_000, hex.EncodeToString(rnd[:]))
	tmp := "." + name + ".tmp"
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("strata __hook: open hook channel %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("strata __hook: create event in %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("strata __hook: write event in %s: %w", dir, err)
	}
	if err := unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_NOREPLACE); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("strata __hook: publish event in %s: %w", dir, err)
	}
	return nil
}

// Reader turns a channel directory into an ordered stream of events. One
// reader owns a channel: it removes what it has read, so the directory stays
// small whatever the agent sends. Not safe for concurrent use.
type Reader struct {
	dir string
	// Rejected counts files that were not events (wrong name, not a regular
	// file, too big, not JSON); they are removed.
	Rejected int
	// staleTmp is how old a dot-file must be to count as a crashed writer's.
	staleTmp time.Duration
}

// NewReader reads the channel at dir.
func NewReader(dir string) *Reader { return &Reader{dir: dir, staleTmp: time.Minute} }

// Read returns the events that arrived since the last Read, oldest first, at
// most a batch at a time (call again while it returns a full batch).
func (r *Reader) Read() ([]Event, error) {
	dfd, err := unix.Open(r.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("read hook channel %s: %w", r.dir, err)
	}
	d := os.NewFile(uintptr(dfd), r.dir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read hook channel %s: %w", r.dir, err)
	}
	slices.Sort(names)
	var out []Event
	for _, name := range names {
		if len(out) == maxBatch {
			break
		}
		if strings.HasPrefix(name, ".") {
			r.dropStaleTmp(dfd, name)
			continue
		}
		ev, ok := r.readRecord(dfd, name)
		_ = unix.Unlinkat(dfd, name, 0)
		if !ok {
			r.Rejected++
			// A directory by a record's name: remove it too if empty.
			_ = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
			continue
		}
		ev.ID = name
		out = append(out, ev)
	}
	return out, nil
}

func (r *Reader) readRecord(dfd int, name string) (Event, bool) {
	if !recordName().MatchString(name) {
		return Event{}, false
	}
	// O_NONBLOCK: a FIFO by that name must not hang the reader.
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Event{}, false
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxRecord {
		return Event{}, false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil || len(data) > maxRecord {
		return Event{}, false
	}
	var ev Event
	if json.Unmarshal(data, &ev) != nil || !eventName().MatchString(ev.Kind) || !slices.Contains(hookAgents, ev.Agent) {
		return Event{}, false
	}
	return ev, true
}

func (r *Reader) dropStaleTmp(dfd int, name string) {
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if time.Since(time.Unix(st.Mtim.Unix())) > r.staleTmp {
		_ = unix.Unlinkat(dfd, name, 0)
	}
}
