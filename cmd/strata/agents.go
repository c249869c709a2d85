package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/engine/agent"
)

// exitWaitTimeout is strata wait's status when the state was not reached in
// time (1 stays "an error", 2 "a usage mistake").
const exitWaitTimeout = 3

// hookMain is `strata __hook AGENT EVENT`: run by the agent inside the
// World. Exit 1 on error, never 2 (Claude blocks the action on 2), nothing on
// stdout (Claude reads it as instructions).
func hookMain(args []string) int {
	if err := agent.RunHook(args, os.Stdin, os.Getenv, time.Now()); err != nil {
		fmt.Fprintf(os.Stderr, "strata __hook: %v\n", err)
		return 1
	}
	return 0
}

// agentFlags reads --agent, --prompt, --prompt-file and the command after --.
func agentOptions(in *input) (presets []string, o engine.AgentOptions, err error) {
	prompt := *in.String("prompt")
	if pf := *in.String("prompt-file"); pf != "" {
		if prompt != "" {
			return nil, o, usagef("--prompt and --prompt-file: give one")
		}
		data, err := os.ReadFile(pf)
		if err != nil {
			return nil, o, fmt.Errorf("read --prompt-file: %w", err)
		}
		prompt = strings.TrimRight(string(data), "\n")
	}
	if a := *in.String("agent"); a != "" {
		for _, p := range strings.Split(a, ",") {
			if p = strings.TrimSpace(p); p != "" {
				presets = append(presets, p)
			}
		}
	}
	o.Prompt, o.Argv = prompt, in.rest
	if len(presets) == 0 && prompt != "" && len(in.rest) == 0 {
		return nil, o, usagef("--prompt needs an agent: pass --agent PRESET (strata run --help)")
	}
	return presets, o, nil
}

// startAgents starts o (with preset, or the plain command) in world and
// prints what started.
func (a *app) startAgent(world, preset string, o engine.AgentOptions, quiet bool) (engine.SessionMeta, error) {
	o.Preset = preset
	meta, err := a.eng.StartAgent(a.ctx, world, o)
	if err != nil {
		return meta, err
	}
	if quiet {
		return meta, nil
	}
	what := preset
	if what == "" {
		what = engine.ShellQuote(meta.Argv)
	}
	fmt.Fprintf(a.stdout, "started %s in world %s: session %s (strata attach %s; strata wait %s --for needs-input)\n", what, world, meta.ID, world, world)
	return meta, nil
}

func cmdRun(a *app, in *input) error {
	presets, o, err := agentOptions(in)
	if err != nil {
		return a.usageOf(in, err)
	}
	if len(presets) > 1 {
		return a.usageOf(in, usagef("run: one --agent for one World (strata new NAME --agent a,b makes one World per preset)"))
	}
	if len(presets) == 0 && len(o.Argv) == 0 {
		return a.usageOf(in, usagef("run: pass --agent PRESET or -- CMD ARGS..."))
	}
	o.Muted = *in.Bool("mute")
	preset := ""
	if len(presets) == 1 {
		preset = presets[0]
	}
	meta, err := a.startAgent(in.pos[0], preset, o, *in.Bool("json"))
	if err != nil {
		return err
	}
	if *in.Bool("json") {
		return a.printJSON(meta)
	}
	return nil
}

// newWithAgents is strata new NAME --agent a[,b] [--prompt ...] [-- CMD].
func newWithAgents(a *app, in *input, create func(name string) error) (bool, error) {
	presets, o, err := agentOptions(in)
	if err != nil {
		return true, a.usageOf(in, err)
	}
	if len(presets) == 0 && len(o.Argv) == 0 {
		return false, nil
	}
	name := in.pos[0]
	quiet := *in.Bool("json")
	type started struct {
		World   string             `json:"world"`
		Session engine.SessionMeta `json:"session"`
	}
	var out []started
	var errs []error
	worlds := []string{name}
	if len(presets) > 1 {
		worlds = worlds[:0]
		for _, p := range presets {
			worlds = append(worlds, name+"-"+p)
		}
	}
	for i, n := range worlds {
		preset := ""
		if len(presets) > 0 {
			preset = presets[i]
		}
		if err := create(n); err != nil {
			errs = append(errs, err)
			continue
		}
		meta, err := a.startAgent(n, preset, o, quiet)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, started{n, meta})
	}
	if quiet && len(out) > 0 {
		if err := a.printJSON(out); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

func cmdSend(a *app, in *input) error {
	text := strings.Join(in.pos[1:], " ")
	queued, err := a.eng.SendInput(a.ctx, in.pos[0], text, *in.Bool("now"))
	if err != nil {
		return err
	}
	if queued {
		fmt.Fprintf(a.stdout, "queued for world %s: its agent is working; delivered when the turn ends (--now sends at once)\n", in.pos[0])
	} else {
		fmt.Fprintf(a.stdout, "sent to world %s\n", in.pos[0])
	}
	return nil
}

func cmdMute(a *app, in *input) error {
	off := *in.Bool("off")
	if err := a.eng.SetMuted(in.pos[0], !off); err != nil {
		return err
	}
	if off {
		fmt.Fprintf(a.stdout, "world %s counts again when it needs you\n", in.pos[0])
	} else {
		fmt.Fprintf(a.stdout, "world %s muted: it no longer counts as needing you (strata mute %s --off)\n", in.pos[0], in.pos[0])
	}
	return nil
}

// waitReached says whether an agent record is in the state asked for.
func waitReached(r engine.AgentRecord, m engine.SessionMeta, forState string) bool {
	switch forState {
	case "needs-input":
		return r.Status.State.NeedsYou() || m.State.Ended()
	case "done":
		return r.Status.State == agent.StateWaiting || r.Status.State == agent.StateFailed || r.Status.State == agent.StateExited || m.State.Ended()
	case "exit":
		return m.State.Ended() && !r.Supervised
	}
	return false
}

func cmdWait(a *app, in *input) error {
	name := in.pos[0]
	forState := *in.String("for")
	timeout := *in.Duration("timeout")
	ctx := a.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		r, err := a.eng.AgentStatus(name)
		if err != nil {
			return err
		}
		m, err := a.eng.Session(name, r.Session)
		if err != nil {
			return err
		}
		if waitReached(r, m, forState) {
			if *in.Bool("json") {
				return a.printJSON(r)
			}
			reason := ""
			if r.Status.Reason != "" {
				reason = ": " + r.Status.Reason
			}
			fmt.Fprintf(a.stdout, "world %s: %s%s\n", name, r.Status.State, reason)
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &exitError{code: exitWaitTimeout, err: fmt.Errorf("wait for world %s to reach %s: timed out after %s; it is %s (strata attach %s to look)", name, forState, timeout, r.Status.State, name)}
			}
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// agentKill is strata kill W [SESSION] without --signal: TERM, then KILL
// after the grace period (or at once with --force).
func agentKill(a *app, in *input) error {
	ref := ""
	if len(in.pos) > 1 {
		ref = in.pos[1]
	}
	m, err := a.eng.KillAgent(a.ctx, in.pos[0], ref, *in.Bool("force"), 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "stopped session %s of world %s (%s, killed by strata)\n", m.ID, in.pos[0], m.State)
	return nil
}

// resumeAfterRollback restarts the agent of a turn snapshot after a rollback to it.
func resumeAfterRollback(a *app, world, snap string) error {
	t, ok := a.eng.TurnSnapshot(world, snap)
	if !ok || t.Preset == "" {
		return nil
	}
	if t.Conversation == "" && t.Turn == 0 {
		fmt.Fprintf(a.stdout, "snapshot %s is from before the agent's first turn: start it again with strata run %s --agent %s\n", snap, world, t.Preset)
		return nil
	}
	meta, err := agentAfterRollback(a, world, t)
	if err != nil {
		return err
	}
	if t.Conversation == "" {
		fmt.Fprintf(a.stdout, "%s cannot resume a conversation: started it afresh in world %s (session %s); it does not remember turns 1-%d, tell it what it needs\n", t.Preset, world, meta.ID, t.Turn)
		return nil
	}
	fmt.Fprintf(a.stdout, "resumed %s conversation %s (turn %d) in world %s: session %s\n", t.Preset, t.Conversation, t.Turn, world, meta.ID)
	return nil
}

// agentAfterRollback restarts the agent of turn snapshot t after a rollback
// to it: resuming its conversation, or, for an agent that keeps none strata
// can name (aider has no resume), afresh and without a prompt (the turn's
// prompt again would redo the turn).
func agentAfterRollback(a *app, world string, t engine.AgentTurnSnap) (engine.SessionMeta, error) {
	if t.Conversation != "" {
		meta, err := a.eng.ResumeAgent(a.ctx, world, t, "", false, engine.AgentOptions{})
		if err != nil {
			return meta, fmt.Errorf("rolled back, but the agent did not resume conversation %s: %w", t.Conversation, err)
		}
		return meta, nil
	}
	meta, err := a.eng.StartAgent(a.ctx, world, engine.AgentOptions{Preset: t.Preset})
	if err != nil {
		return meta, fmt.Errorf("rolled back, but %s did not start again: %w (start it with strata run %s --agent %s)", t.Preset, err, world, t.Preset)
	}
	return meta, nil
}

// checkForkAgents refuses, before anything is forked, --prompt without an
// agent to give it to and a prompt count that does not match -n.
func checkForkAgents(a *app, in *input, from, snap string, n int) error {
	prompts := in.List("prompt")
	if len(prompts) == 0 {
		return nil
	}
	turn := false
	if snap != "" {
		_, turn = a.eng.TurnSnapshot(from, snap)
	}
	if !turn && *in.String("agent") == "" {
		return usagef("fork --prompt needs --agent PRESET, or --snap of a turn snapshot")
	}
	if len(prompts) > 1 && len(prompts) != n {
		return usagef("fork: %s for %s: give one, or one per World", count(len(prompts), "prompt", "prompts"), count(n, "World", "Worlds"))
	}
	return nil
}

// agentsAfterFork starts the agent in each fork: continuing the turn
// snapshot's conversation (as a new one each) or a fresh --agent.
func agentsAfterFork(a *app, in *input, from, snap string, ws []*engine.World) error {
	prompts := in.List("prompt")
	quiet := *in.Bool("json")
	preset := *in.String("agent")
	t, turn := engine.AgentTurnSnap{}, false
	if snap != "" {
		t, turn = a.eng.TurnSnapshot(from, snap)
	}
	if !turn && preset == "" {
		if len(prompts) > 0 {
			return usagef("fork --prompt needs --agent PRESET, or --snap of a turn snapshot")
		}
		return nil
	}
	if len(prompts) > 1 && len(prompts) != len(ws) {
		return usagef("fork: %s for %s: give one, or one per World", count(len(prompts), "prompt", "prompts"), count(len(ws), "World", "Worlds"))
	}
	var errs []error
	for i, w := range ws {
		p := ""
		if len(prompts) == 1 {
			p = prompts[0]
		} else if len(prompts) > 1 {
			p = prompts[i]
		}
		if turn && (preset == "" || preset == t.Preset) {
			if err := a.eng.CopyAgentHome(from, w.Name); err != nil {
				errs = append(errs, err)
				continue
			}
			meta, err := a.eng.ResumeAgent(a.ctx, w.Name, t, p, true, engine.AgentOptions{})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !quiet {
				fmt.Fprintf(a.stdout, "world %s: %s continues conversation %s (turn %d) as a new one: session %s\n", w.Name, t.Preset, t.Conversation, t.Turn, meta.ID)
			}
			continue
		}
		if _, err := a.startAgent(w.Name, preset, engine.AgentOptions{Prompt: p}, quiet); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
