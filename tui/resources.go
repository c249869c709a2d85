package tui

import (
	"context"
	"fmt"
	"time"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/panes"
)

// Resources: the Worlds pane's CPU, memory and sparkline. Sampling runs
// only while some World has sessions running: each sample, taken over
// resourceInterval in a Cmd, schedules the next only if it still found
// sessions running, so an idle workstation does no work.

// resourceInterval is the sampling period (tests shorten it).
var resourceInterval = 2 * time.Second

type resourcesMsg struct {
	samples []engine.Resources
	err     error
}

func sampleResources(ctx context.Context, eng *engine.Engine, names []string) tea.Cmd {
	return func() tea.Msg {
		s, err := eng.SampleResources(ctx, names, resourceInterval)
		if err != nil {
			err = fmt.Errorf("sample resources: %w", err)
		}
		return resourcesMsg{samples: s, err: err}
	}
}

// maybeSample starts a sample when Worlds run and none is in flight.
func (m Model) maybeSample() (Model, tea.Cmd) {
	if m.sampling || m.eng == nil {
		return m, nil
	}
	var names []string
	for _, r := range m.worlds.Rows() {
		if r.Running > 0 {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return m, nil
	}
	m.sampling = true
	return m, sampleResources(m.ctx, m.eng, names)
}

func (m Model) resourcesSampled(msg resourcesMsg) (tea.Model, tea.Cmd) {
	m.sampling = false
	if msg.err != nil && len(msg.samples) == 0 {
		// A World removed mid-sample is not worth a red status bar; the
		// next list of Worlds restarts sampling for the ones left.
		return m, nil
	}
	res := map[string]panes.WorldResources{}
	for _, r := range m.worlds.Rows() {
		if old, ok := m.worlds.Resources(r.Name); ok {
			res[r.Name] = old
		}
	}
	running := false
	for _, s := range msg.samples {
		if s.World == "" {
			continue
		}
		r := res[s.World]
		r.CPU, r.Memory, r.Processes, r.Live = s.CPUPercent, s.MemoryBytes, s.Processes, s.Running > 0
		r.History = append(append([]float64(nil), r.History...), s.CPUPercent)
		if len(r.History) > panes.SparkWidth {
			r.History = r.History[len(r.History)-panes.SparkWidth:]
		}
		res[s.World] = r
		running = running || s.Running > 0
	}
	m.worlds = m.worlds.SetResources(res)
	if !running {
		return m, nil
	}
	return m.maybeSample()
}
