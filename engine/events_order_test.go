package engine

import (
	"testing"
)

// A short command's session.ended never precedes its session.started in the
// activity log: the session's init logs both, the start before it tells the
// caller, so no caller scheduled late can log the start after the end (seen
// once under load by `strata events -f`).
func TestActivityStartBeforeEnd(t *testing.T) {
	e := netEngine(t, "127.0.0.2")
	for range 30 {
		if _, code := execOut(t, e, ExecOptions{}, "true"); code != 0 {
			t.Fatalf("exec true: exit %d", code)
		}
	}
	evs, _, err := e.ReadActivity(0)
	if err != nil {
		t.Fatal(err)
	}
	started, ended := map[string]int{}, map[string]int{}
	for i, ev := range evs {
		switch ev.Type {
		case EventSessionStarted:
			if _, dup := started[ev.Session]; dup {
				t.Errorf("session %s started twice", ev.Session)
			}
			started[ev.Session] = i
			if ev.Detail["argv"] == nil {
				t.Errorf("session.started without its argv: %+v", ev)
			}
		case EventSessionEnded:
			ended[ev.Session] = i
		}
	}
	if len(ended) != 30 {
		t.Fatalf("%d sessions ended in the log, want 30", len(ended))
	}
	for s, j := range ended {
		i, ok := started[s]
		if !ok || i > j {
			t.Errorf("session %s: started at %d (logged %v), ended at %d", s, i, ok, j)
		}
	}
}
