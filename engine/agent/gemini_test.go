package agent

import (
	"strings"
	"testing"
	"time"
)

// Gemini asks for confirmation before BeforeTool fires, and its
// Notification (ToolPermission) says what is asked only in details (the
// documented JSON, as Gemini CLI's fireToolNotificationEvent sends it): the
// reason must still name the command, not just "Tool ... requires execution".
func TestGeminiToolPermissionReasonFromDetails(t *testing.T) {
	dir := t.TempDir()
	base := `"session_id":"g-1","transcript_path":"/h/.gemini/tmp/x/chats/session-1.json","cwd":"/src","timestamp":"2026-12-01T12:00:00Z"`
	for i, h := range []struct{ event, json string }{
		{"SessionStart", `{` + base + `,"hook_event_name":"SessionStart","source":"startup"}`},
		{"BeforeAgent", `{` + base + `,"hook_event_name":"BeforeAgent","prompt":"clean up"}`},
		{"Notification", `{` + base + `,"hook_event_name":"Notification","notification_type":"ToolPermission","message":"Tool Confirm Shell Command requires execution","details":{"type":"exec","title":"Confirm Shell Command","command":"rm -rf build","rootCommand":"rm"}}`},
		{"Notification", `{` + base + `,"hook_event_name":"Notification","notification_type":"ToolPermission","message":"Tool Edit requires editing","details":{"type":"edit","title":"Edit","fileName":"a.go","filePath":"/src/a.go","fileDiff":"+x"}}`},
	} {
		if err := RunHook([]string{"gemini", h.event}, strings.NewReader(h.json), hookEnv(dir), t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	evs := readAll(t, NewReader(dir))
	if len(evs) != 4 {
		t.Fatalf("got %d events", len(evs))
	}
	if e := evs[2]; e.Notification != "ToolPermission" || e.Tool != "shell" || e.ToolInput != "rm -rf build" {
		t.Fatalf("exec notification: %+v", e)
	}
	if e := evs[3]; e.Tool != "edit" || e.ToolInput != "/src/a.go" {
		t.Fatalf("edit notification: %+v", e)
	}
	tr := NewTracker(IntegrationGemini, t0)
	tr.ExpectPrompt()
	for _, e := range evs[:3] {
		tr.Apply(e)
	}
	want(t, tr, StatePermission, "allow shell: rm -rf build?", at(2))
	if tr.Status().SessionID != "g-1" || tr.Status().Turn != 1 {
		t.Fatalf("status %+v", tr.Status())
	}
}
