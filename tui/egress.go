package tui

import (
	"fmt"
	"net"
	"strconv"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/keymap"
)

// deniedHost is a host a World's egress proxy refused (an egress.denied
// event).
type deniedHost struct {
	world, host string
	port        int
}

// egressAllowedMsg is the end of the allow action.
type egressAllowedMsg struct {
	world string
	res   engine.AllowResult
	err   error
}

// egressDenied shows a denial in the status line and the message log, with
// the key that allows the host, and remembers it for that key.
func (m Model) egressDenied(ev engine.Event) Model {
	host, _ := ev.Detail["host"].(string)
	if host == "" || ev.World == "" {
		return m
	}
	port := 0
	if p, ok := ev.Detail["port"].(float64); ok {
		port = int(p)
	}
	m.denied = &deniedHost{world: ev.World, host: host, port: port}
	target := host
	if port > 0 {
		target = net.JoinHostPort(host, strconv.Itoa(port))
	}
	hint := ""
	if k := m.env.Keys.Binding(keymap.AllowEgress).Help().Key; k != "" {
		hint = " — " + k + " to allow"
	}
	m.note(fmt.Sprintf("%s: egress to %s denied by the proxy allow-list%s", ev.World, target, hint))
	return m
}

// allowDenied allows the last denied host, through the engine in a tea.Cmd.
func (m Model) allowDenied() (tea.Model, tea.Cmd) {
	d := m.denied
	if d == nil {
		m.note("no host denied by an egress proxy since strata opened (strata events lists earlier denials; strata allow W HOST allows one)")
		return m, nil
	}
	m.denied = nil
	eng, ctx := m.eng, m.ctx
	return m, func() tea.Msg {
		if eng == nil {
			return egressAllowedMsg{world: d.world, err: fmt.Errorf("no engine")}
		}
		res, err := eng.AllowEgress(ctx, d.world, d.host)
		return egressAllowedMsg{world: d.world, res: res, err: err}
	}
}

func (m Model) egressResult(msg tea.Msg) (Model, tea.Cmd, bool) {
	r, ok := msg.(egressAllowedMsg)
	if !ok {
		return m, nil, false
	}
	if r.err != nil {
		m.fail(fmt.Sprintf("allow in %s: %v", r.world, r.err))
		return m, nil, true
	}
	switch {
	case r.res.Already:
		m.note(fmt.Sprintf("%s: %s was already allowed", r.world, r.res.Entry))
	case r.res.Live:
		m.note(fmt.Sprintf("%s: allowed %s (the running proxy has it now: retry the request)", r.world, r.res.Entry))
	default:
		m.note(fmt.Sprintf("%s: allowed %s (from its next session on)", r.world, r.res.Entry))
	}
	return m, nil, true
}
