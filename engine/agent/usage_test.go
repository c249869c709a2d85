package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClaudeTranscriptUsage(t *testing.T) {
	tr := strings.Join([]string{
		`{"type":"user","message":{"role":"user","content":"hi"}}`,
		`{"type":"assistant","message":{"id":"msg_1","usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":1}}}`,
		`{"type":"assistant","message":{"id":"msg_1","usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":1}}}`,
		`garbage {`,
		`{"type":"assistant","message":{"id":"` + strings.Repeat("x", 9<<20) + `","usage":{"input_tokens":1000000}}}`,
		`{"type":"assistant","message":{"id":"msg_2","usage":{"input_tokens":7,"output_tokens":3}},"costUSD":0.5}`,
		`{"type":"assistant","message":{"usage":{"output_tokens":1}}}`,
	}, "\n")
	u, err := ClaudeTranscriptUsage(strings.NewReader(tr))
	if err != nil {
		t.Fatal(err)
	}
	if u != (Usage{InputTokens: 107, OutputTokens: 24, CacheRead: 5, CacheWrite: 1, CostUSD: 0.5}) {
		t.Errorf("usage %+v", u)
	}
}

// FuzzRunHook: whatever an agent sends, exactly one record the reader
// accepts, with bounded, valid text.
func FuzzRunHook(f *testing.F) {
	f.Add("claude", "PreToolUse", []byte(`{"session_id":"s","tool_name":"Bash","tool_input":{"command":"ls"}}`))
	f.Add("codex", "", []byte(`{"type":"agent-turn-complete","input-messages":["a"]}`))
	f.Add("gemini", "BeforeTool", []byte("\xff\xfe"))
	f.Add("aider", "Stop", []byte(nil))
	f.Fuzz(func(t *testing.T, agent, event string, input []byte) {
		dir := t.TempDir()
		args := []string{agent, event}
		if agent == "codex" {
			args = []string{agent, string(input)}
		}
		err := RunHook(args, strings.NewReader(string(input)), hookEnv(dir), t0)
		evs, rerr := NewReader(dir).Read()
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			if len(evs) != 0 {
				t.Fatalf("rejected call left %d events", len(evs))
			}
			return
		}
		if len(evs) != 1 {
			t.Fatalf("%d events for one call", len(evs))
		}
		e := evs[0]
		for _, s := range []string{e.Kind, e.SessionID, e.Prompt, e.Tool, e.ToolInput, e.Message, e.Source, e.Error, e.Cwd} {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8 %q", s)
			}
		}
		if len(e.Prompt) > maxPromptText+4 || len(e.Message) > maxText+4 || len(e.Raw) > MaxRawJSON {
			t.Fatalf("unbounded fields: prompt %d message %d raw %d", len(e.Prompt), len(e.Message), len(e.Raw))
		}
	})
}
