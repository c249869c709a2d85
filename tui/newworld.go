package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/panes"
)

// The New World form's fields, in order.
const (
	formName = iota
	formSource
	formBackend
	formAgent
	formPrompt
	formCommand
)

// newWorldForm asks for a World and, optionally, what to start in it: an
// agent preset (↑↓ go through the configured ones), its first prompt, and
// a command (without an agent, run on a terminal; with one, more arguments
// for it). It stays open until the World exists, showing why not with
// everything typed kept.
func (m Model) newWorldForm(src, backend string) panes.Dialog {
	var presets []string
	if m.eng != nil {
		if reg, err := m.eng.Registry(); err == nil {
			presets = reg.Names()
		}
	}
	agentLabel := "agent (empty: none)"
	if len(presets) > 0 {
		agentLabel = "agent: " + strings.Join(presets, ", ") + " (↑↓ choose; empty: none)"
	}
	d := panes.NewForm(m.env, "New World",
		[]string{"name", "source", "backend (local or cube)", agentLabel, "first prompt for the agent", "command (no agent: runs on a terminal; with one: extra arguments)"},
		[]string{"", src, backend}, func(v []string) tea.Msg {
			return createWorldReq{
				name: strings.TrimSpace(v[formName]), source: strings.TrimSpace(v[formSource]), backend: strings.TrimSpace(v[formBackend]),
				agent: strings.TrimSpace(v[formAgent]), prompt: strings.TrimSpace(v[formPrompt]), command: strings.TrimSpace(v[formCommand]),
			}
		})
	d.Fields[formAgent].Input = panes.NewInput("", presets)
	d.Hold = true
	return d
}

// checkAgentReq refuses, before any World is made, what cannot start.
func checkAgentReq(eng *engine.Engine, r createWorldReq) error {
	if r.agent == "" {
		if r.prompt != "" {
			return errors.New("a first prompt needs an agent: choose one in the agent field (↑↓), or clear the prompt")
		}
		return nil
	}
	reg, err := eng.Registry()
	if err != nil {
		return err
	}
	if _, err := reg.Get(r.agent); err != nil {
		return fmt.Errorf("agent %q: %w (choose one of %s with ↑↓, or add [agents.%s] to config.toml)", r.agent, err, strings.Join(reg.Names(), ", "), r.agent)
	}
	return nil
}

// startAgentIn starts what the form asked for in the new World. If it
// cannot start, the World just made is removed again, so the form (kept
// open with what was typed) can be sent once more.
func startAgentIn(ctx context.Context, eng *engine.Engine, name string, r createWorldReq) tea.Msg {
	if r.agent == "" && r.command == "" {
		return createDoneMsg{name: name}
	}
	o := engine.AgentOptions{Preset: r.agent, Prompt: r.prompt}
	switch {
	case r.agent != "":
		o.Argv = strings.Fields(r.command)
	default:
		argv, err := eng.ShellArgv(name, r.command)
		if err != nil {
			return createDoneMsg{name: name, err: undoCreate(ctx, eng, name, err)}
		}
		o.Argv = argv
	}
	meta, err := eng.StartAgent(ctx, name, o)
	if err != nil {
		return createDoneMsg{name: name, err: undoCreate(ctx, eng, name, err)}
	}
	what := r.agent
	if what == "" {
		what = r.command
	}
	return createDoneMsg{name: name, started: fmt.Sprintf("%s (session %s)", what, shortRef(meta.ID))}
}

func undoCreate(ctx context.Context, eng *engine.Engine, name string, err error) error {
	if _, rerr := eng.Remove(ctx, name, engine.RemoveOptions{Force: true, Purge: true, Kill: true}); rerr != nil {
		return fmt.Errorf("new world %q: start: %w (and removing the World again failed: %v)", name, err, rerr)
	}
	return fmt.Errorf("new world %q: start: %w (the World was not kept)", name, err)
}
