package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/panes"
)

// While a World runs a CPU-bound loop, the Worlds pane samples it: CPU
// near one core, a sparkline; the idle World shows none. When the loop
// ends, sampling stops by itself.
func TestWorldsResources(t *testing.T) {
	eng, src := testEngine(t, map[string]string{"a.txt": "a\n"})
	newWorld(t, eng, src, "busy", "")
	newWorld(t, eng, src, "idle", "")
	ctx := context.Background()
	// About a second of busy loop: long enough for several samples, short
	// enough that the synchronous driver's sampling chain ends.
	meta, err := eng.Exec(ctx, "busy", engine.ExecOptions{Argv: []string{"/bin/sh", "-c", `end=$(($(date +%s)+2)); while [ $(date +%s) -lt $end ]; do :; done`}})
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, eng, Options{Source: src, Exe: "/bin/false"}, 120, 40)
	if _, err := engine.WaitSession(ctx, eng.SessionDir("busy", meta.ID)); err != nil {
		t.Fatal(err)
	}
	r, ok := d.m.worlds.Resources("busy")
	if !ok || len(r.History) < 3 {
		t.Fatalf("busy World not sampled: %+v", r)
	}
	top := 0.0
	for _, c := range r.History {
		top = max(top, c)
	}
	if top < 10 { // a share of a core: under a load of 15 on 2 cores it got 26%
		t.Errorf("CPU samples of a busy loop: %v", r.History)
	}
	if ir, ok := d.m.worlds.Resources("idle"); ok && ir.Live {
		t.Errorf("idle World sampled as live: %+v", ir)
	}
	if d.m.sampling {
		t.Error("still sampling after the loop ended")
	}
	spark := panes.Sparkline(r.History, panes.SparkWidth)
	if !strings.Contains(d.screen(), strings.TrimSpace(spark)) {
		t.Errorf("sparkline %q not on screen:\n%s", spark, d.screen())
	}
	// Nothing running: a reload does not start sampling again.
	d.keys("ctrl+r")
	if d.m.sampling {
		t.Error("sampling with nothing running")
	}
	_ = time.Second
}

func TestSparkline(t *testing.T) {
	if got := panes.Sparkline([]float64{0, 50, 100}, 5); got != "  ▁▄█" {
		t.Errorf("%q", got)
	}
	if got := panes.Sparkline([]float64{100, 200}, 2); got != "▄█" {
		t.Errorf("two cores: %q", got)
	}
}
