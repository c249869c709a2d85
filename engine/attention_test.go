package engine

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/engine/session"
)

func TestWorldAttention(t *testing.T) {
	s := func(state SessionState, att Attention) SessionMeta { return SessionMeta{State: state, Attention: att} }
	for _, tc := range []struct {
		sessions []SessionMeta
		want     Attention
	}{
		{nil, AttentionIdle},
		{[]SessionMeta{s(SessionExited, AttentionDone)}, AttentionDone},
		{[]SessionMeta{s(SessionExited, AttentionDone), s(SessionLost, AttentionLost)}, AttentionLost},
		{[]SessionMeta{s(SessionLost, AttentionLost), s(SessionRunning, AttentionRunning)}, AttentionRunning},
		{[]SessionMeta{s(SessionRunning, AttentionRunning), s(SessionKilled, AttentionFailed)}, AttentionFailed},
		{[]SessionMeta{s(SessionFailed, AttentionFailed), s(SessionRunning, AttentionWaiting), s(SessionExited, AttentionDone)}, AttentionWaiting},
		{[]SessionMeta{s(SessionStarting, AttentionRunning)}, AttentionRunning},
		// A stale "waiting" left in an ended session's meta does not count.
		{[]SessionMeta{s(SessionExited, AttentionWaiting)}, AttentionDone},
	} {
		if got := WorldAttention(tc.sessions); got != tc.want {
			t.Errorf("WorldAttention(%v) = %s, want %s", tc.sessions, got, tc.want)
		}
	}
}

// TestSessionWaitingForInput: a TTY session blocked in read(2) on its terminal and
// quiet for 2 s is "waiting"; one sleeping is not.
func TestSessionWaitingForInput(t *testing.T) {
	requireRoot(t)
	w := newTestWorld(t, "attn")
	start := func(script string) string {
		spec := w.sh(script)
		spec.TTY = true
		meta, err := StartSession(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(w.worldDir(), "sessions", meta.ID)
		t.Cleanup(func() { killAndWait(dir) })
		return dir
	}
	t0 := time.Now()
	reader := start(`echo ready; read x`)
	sleeper := start(`echo ready; sleep 5`)
	waitFor(t, "the reader to be waiting", func() bool {
		m, _ := ReadSessionMeta(reader)
		return m.Attention == AttentionWaiting
	})
	if took := time.Since(t0); took < session.QuietBeforeWaiting {
		t.Errorf("waiting after %v, before the %v quiet period", took, session.QuietBeforeWaiting)
	}
	m, _ := ReadSessionMeta(sleeper)
	if m.Attention != AttentionRunning || m.State != SessionRunning {
		t.Errorf("sleeping session: %s/%s, want running/running", m.State, m.Attention)
	}
	sessions, _ := ListSessions(w.worldDir())
	if got := WorldAttention(sessions); got != AttentionWaiting {
		t.Errorf("World attention %s, want waiting", got)
	}
	if err := KillSession(reader, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m, err := WaitSession(context.Background(), reader)
	// Killed by strata on purpose: not a failure (issue 15).
	if err != nil || m.State != SessionKilled || !m.KilledByStrata || SessionAttention(m) != AttentionDone {
		t.Errorf("killed reader: %v %s/%s killed by strata %v", err, m.State, SessionAttention(m), m.KilledByStrata)
	}
	// Killed by anyone else: still a failure.
	m.KilledByStrata = false
	if SessionAttention(m) != AttentionFailed {
		t.Errorf("a session killed by someone else reads %s", SessionAttention(m))
	}
}
