package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/agent"
	"github.com/stratahq/strata/engine/session"
)

const usageLine = `{"type":"assistant","message":{"id":"m1","role":"assistant","usage":{"input_tokens":7,"output_tokens":1000}}}` + "\n"

// A hostile agent names its transcript: the supervisor reads usage only
// from inside the World's agent home, never a host file by a path with ..,
// an absolute path elsewhere, or a symlink out of the home.
func TestSupervisorUsageStaysInAgentHome(t *testing.T) {
	root := t.TempDir()
	e := &Engine{Paths: Paths{Root: root}}
	home := filepath.Join(e.Paths.World("w"), agentHomeDir)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(root, "host-secret.jsonl")
	if err := os.WriteFile(host, []byte(usageLine), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(home, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "mine.jsonl"), []byte(usageLine), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		agentWorldHome + "/../../../../" + host,
		host,
		agentWorldHome + "/link.jsonl",
	} {
		s := &supervisor{e: e, world: "w", rec: AgentRecord{Integration: agent.IntegrationClaude}, transcript: p}
		s.readUsage()
		if s.transcriptUsage.OutputTokens != 0 {
			t.Errorf("transcript %q: read a file outside the agent home: %+v", p, s.transcriptUsage)
		}
	}
	s := &supervisor{e: e, world: "w", rec: AgentRecord{Integration: agent.IntegrationClaude}, transcript: agentWorldHome + "/mine.jsonl"}
	s.readUsage()
	if s.transcriptUsage.OutputTokens != 1000 {
		t.Errorf("the World's own transcript: %+v", s.transcriptUsage)
	}
}

// A supervisor that crashed leaves a record claiming to be live; once the
// session has ended, the record reads the end (not the last hook state).
func TestAgentRecordAfterSupervisorCrash(t *testing.T) {
	root := t.TempDir()
	e := &Engine{Paths: Paths{Root: root}}
	sdir := e.SessionDir("w", "s1")
	adir := e.agentDir("w", "s1")
	for _, d := range []string{sdir, adir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ended := time.Now().Add(-time.Minute)
	if err := session.WriteMetaPath(sdir, SessionMeta{ID: "s1", World: "w", State: SessionKilled, Signal: "SIGKILL", ExitCode: 137, StartedAt: ended.Add(-time.Minute), EndedAt: ended}); err != nil {
		t.Fatal(err)
	}
	session.MarkKilled(sdir)
	rec := AgentRecord{Session: "s1", World: "w", Supervised: true, Status: agent.Status{State: agent.StatePermission, Reason: "allow Bash: x?"}}
	if err := writeJSONAtomic(filepath.Join(adir, agentRecordFile), rec); err != nil {
		t.Fatal(err)
	}
	r, ok := e.ReadAgentRecord("w", "s1")
	if !ok || r.Supervised || r.Status.State != agent.StateExited || r.NeedsYou() {
		t.Fatalf("record after the crash: %+v", r)
	}
}

// A turn keeps the conversation file the agent names, and a resume puts it
// back: a hostile agent naming a host file (by .., an absolute path, a
// symlink out of the home) gets nothing copied out, and a symlink planted
// at the transcript's place before the resume is not written through.
func TestTurnConversationStaysInAgentHome(t *testing.T) {
	root := t.TempDir()
	e := &Engine{Paths: Paths{Root: root}}
	home := filepath.Join(e.Paths.World("w"), agentHomeDir)
	if err := os.MkdirAll(filepath.Join(home, "p"), 0o700); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(root, "host-secret")
	if err := os.WriteFile(host, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(home, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{agentWorldHome + "/../../../../" + host, host, agentWorldHome + "/link.jsonl"} {
		if rel, err := e.saveTurnConversation("w", "s1", p); err == nil && rel != "" {
			t.Errorf("transcript %q: kept %q", p, rel)
		}
		if _, err := os.Stat(filepath.Join(e.Paths.World("w"), agentTurnConvDir, "s1.conv")); err == nil {
			t.Fatalf("transcript %q: a host file was copied into the World", p)
		}
	}
	conv := filepath.Join(home, "p", "c.jsonl")
	if err := os.WriteFile(conv, []byte("turn 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rel, err := e.saveTurnConversation("w", "s1", agentWorldHome+"/p/c.jsonl")
	if err != nil || rel != "p/c.jsonl" {
		t.Fatalf("save: %q %v", rel, err)
	}
	if err := os.WriteFile(conv, []byte("turn 1\nturn 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := AgentTurnSnap{Snapshot: "s1", Turn: 1, Conversation: "c", Transcript: rel, world: "w"}
	if err := e.restoreTurnConversation("w", ts); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(conv); string(data) != "turn 1\n" {
		t.Fatalf("restored conversation %q, want turn 1's", data)
	}
	// The agent swaps its transcript for a link to a host file: the restore
	// replaces the link, the host file is untouched.
	if err := os.Remove(conv); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, conv); err != nil {
		t.Fatal(err)
	}
	if err := e.restoreTurnConversation("w", ts); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(host); string(data) != "secret\n" {
		t.Fatalf("the restore wrote through a link to a host file: %q", data)
	}
	// A forged record naming a path out of the home is refused.
	ts.Transcript = "../../../../" + host
	if err := e.restoreTurnConversation("w", ts); err == nil {
		t.Fatal("a transcript path out of the agent home was written")
	}
	if data, _ := os.ReadFile(host); string(data) != "secret\n" {
		t.Fatalf("host file changed: %q", data)
	}
}
