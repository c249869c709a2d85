package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/keymap"
)

// A host the World's egress proxy denied is a message naming the World, the
// host and the key; that key allows it through the engine (kept with the
// World, where the next proxy and a running one read it).
func TestEgressDeniedMessageAndAllow(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "w", "")
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	d.keys("E")
	if !strings.Contains(d.m.info, "no host denied") {
		t.Errorf("E with nothing denied: %q", d.m.info)
	}
	d.send(eventMsg{Type: engine.EventEgressDenied, World: "w", Detail: map[string]any{"host": "example.com", "port": float64(443), "allow_key": "boundary.worlds.w.allow"}})
	want := "w: egress to example.com:443 denied by the proxy allow-list — E to allow"
	if !strings.Contains(d.screen(), want) {
		t.Fatalf("status line lacks %q:\n%s", want, d.screen())
	}
	if n := len(d.m.messages); n == 0 || d.m.messages[n-1].Text != want {
		t.Errorf("the message log lacks the denial: %+v", d.m.messages)
	}
	d.keys("E")
	if d.m.lastErr != "" || !strings.Contains(d.m.info, "allowed example.com") {
		t.Fatalf("after E: info %q, error %q", d.m.info, d.m.lastErr)
	}
	data, err := os.ReadFile(filepath.Join(eng.EgressDir("w"), "allow"))
	if err != nil || !strings.Contains(string(data), "\nexample.com\n") {
		t.Fatalf("the World's allowed hosts: %q, %v", data, err)
	}
	list, err := eng.EgressAllowlist("w")
	if err != nil || !list.Allows("example.com", 443) {
		t.Errorf("the World's allow-list does not allow example.com: %v", err)
	}
	// The palette offers the action too.
	d.keys(":", "e", "g", "r", "e", "s", "s")
	p := d.m.palette()
	if p == nil || len(p.Matches()) == 0 || p.Matches()[0].Name != keymap.AllowEgress {
		t.Fatalf("the palette does not offer the allow action first for \"egress\":\n%s", d.screen())
	}
}
