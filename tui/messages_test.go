package tui

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/engine"
)

// A long error is cut in the status line; the message log (L) holds it
// whole, wrapped, newest first and timestamped, and strata.log gets it.
func TestMessageLogKeepsFullText(t *testing.T) {
	var logBuf bytes.Buffer
	eng, _ := testEngine(t, map[string]string{"a.txt": "a\n"})
	eng.Log = slog.New(slog.NewTextHandler(&logBuf, nil)) // strata.log
	d := newDriver(t, eng, Options{AllWorlds: true}, 80, 24)
	at := time.Date(2026, 12, 1, 9, 41, 7, 0, time.UTC)
	d.m.now = func() time.Time { return at }

	long := "apply refactor-auth: internal/auth/token.go moved in the source since it was picked; " +
		"review the diff again and pick it anew, then apply: ENDOFTHEERROR"
	d.send(doneMsg{err: errors.New(long)})
	status := strings.Split(d.screen(), "\n")[23]
	if strings.Contains(status, "ENDOFTHEERROR") {
		t.Fatalf("status line holds the whole error (test needs a longer one): %q", status)
	}
	if !strings.Contains(status, "L full text") {
		t.Errorf("a cut error does not say where its full text is: %q", status)
	}
	at = at.Add(time.Minute)
	d.send(doneMsg{info: "created World later-one"})

	d.keys("L")
	if d.m.msgLog() == nil {
		t.Fatal("L does not open the message log")
	}
	scr := d.screen()
	flat := strings.Join(strings.Fields(strings.ReplaceAll(scr, "║", " ")), " ")
	for _, w := range []string{"ENDOFTHEERROR", "09:41:07", "09:42:07", "later-one", "moved in the source since it was picked"} {
		if !strings.Contains(flat, w) {
			t.Errorf("message log lacks %q:\n%s", w, scr)
		}
	}
	if strings.Index(scr, "later-one") > strings.Index(scr, "09:41:07") {
		t.Errorf("message log is not newest first:\n%s", scr)
	}
	d.keys("esc")
	if d.m.msgLog() != nil {
		t.Error("esc does not close the message log")
	}
	if !strings.Contains(logBuf.String(), "ENDOFTHEERROR") {
		t.Errorf("the error is not in strata.log: %q", logBuf.String())
	}

	// The palette reaches it too.
	d.keys(":")
	d.typeText("message log")
	d.keys("enter")
	if d.m.msgLog() == nil {
		t.Error("the palette does not open the message log")
	}
}

// Info expires after its TTL through a tick; an older tick never clears a
// newer message; errors do not expire but go at the next key.
func TestStatusMessageLifetimes(t *testing.T) {
	eng, _ := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{AllWorlds: true}, 80, 24)

	d.send(doneMsg{info: "first"})
	stale := infoExpiredMsg{seq: d.m.infoSeq}
	d.send(doneMsg{info: "second"})
	d.send(stale)
	if d.m.info != "second" {
		t.Fatalf("an old expiry cleared a newer message: info %q", d.m.info)
	}

	d.m.infoTTL = 20 * time.Millisecond // the driver runs the tick inline
	d.send(doneMsg{info: "short-lived"})
	if d.m.info != "" || strings.Contains(d.screen(), "short-lived") {
		t.Errorf("info did not expire: %q", d.m.info)
	}
	d.send(doneMsg{err: errors.New("an error that stays")})
	if d.m.lastErr != "an error that stays" {
		t.Fatalf("error expired with the info TTL: %q", d.m.lastErr)
	}
	d.keys("tab")
	if d.m.lastErr != "" {
		t.Errorf("error outlived the next action: %q", d.m.lastErr)
	}
	if n := len(d.m.messages); n < 4 || !d.m.messages[n-1].Err {
		t.Errorf("message log %+v", d.m.messages)
	}
}

// The new-World form keeps what was typed and shows the engine's error
// when the name is refused; fixed, it creates the World and closes.
func TestNewWorldFormKeepsFieldsOnError(t *testing.T) {
	eng, _ := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{AllWorlds: true}, 80, 24)
	d.keys("n")
	if d.m.dialog() == nil {
		t.Fatal("n opens no form")
	}
	d.typeText("Bad Name")
	d.keys("enter")
	if d.m.dialog() == nil {
		t.Fatalf("the form closed on a refused name; status %q", d.m.lastErr)
	}
	if v := d.m.dialog().Values()[0]; v != "Bad Name" {
		t.Errorf("the name typed was lost: %q", v)
	}
	if !strings.Contains(d.m.dialog().Err, "invalid world name") || !strings.Contains(d.screen(), "invalid world name") {
		t.Errorf("form shows no error: %q\n%s", d.m.dialog().Err, d.screen())
	}
	for range len("Bad Name") {
		d.keys("backspace")
	}
	d.typeText("good")
	d.keys("enter")
	if d.m.dialog() != nil {
		t.Fatalf("form still open after a valid name: %q", d.m.dialog().Err)
	}
	if _, err := eng.World("good"); err != nil {
		t.Errorf("World not created: %v", err)
	}
	_ = engine.ErrInvalidName
}

// The same error again (a reload failing on every event) is one log entry.
func TestMessageLogFoldsRepeats(t *testing.T) {
	eng, _ := testEngine(t, map[string]string{"a.txt": "a\n"})
	d := newDriver(t, eng, Options{AllWorlds: true}, 80, 24)
	n := len(d.m.messages)
	for range 3 {
		d.send(doneMsg{err: errors.New("list worlds: permission denied")})
	}
	d.send(doneMsg{info: "reloaded"})
	d.send(doneMsg{err: errors.New("list worlds: permission denied")})
	if got := len(d.m.messages) - n; got != 3 {
		t.Errorf("%d entries for error×3, info, error: %+v", got, d.m.messages[n:])
	}
}
