package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/stratahq/strata/engine"
)

func cmdExec(a *app, in *input) error {
	tty := in.Bool("tty")
	detach := in.Bool("detach")
	cwd := in.String("cwd")
	noNet := in.Bool("no-network")
	network := engine.Network(*in.String("network"))
	iso := in.String("isolation")
	snap := in.Bool("snap")
	asJSON := in.Bool("json")
	worlds := in.String("worlds")
	all := in.Bool("all")
	envs := in.List("env")
	passEnv := in.List("pass-env")
	pos, rest := in.pos, in.rest
	env := os.Environ()
	for _, kv := range envs {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return usagef("--env %q: want KEY=VALUE", kv)
		}
		env = append(env, kv)
		passEnv = append(passEnv, name) // named by the person: passed
	}
	for _, n := range passEnv {
		if n == "" || strings.ContainsAny(n, "= ") {
			return usagef("--pass-env %q: want a variable name (NAME or a NAME_* prefix)", n)
		}
	}
	if *asJSON && !*detach {
		// Without --detach the command's own output is what exec prints.
		return usagef("exec: --json needs --detach (it prints the session; strata sessions NAME --json describes one afterwards)")
	}
	if *worlds != "" || *all {
		rest = append(pos, rest...)
		if len(rest) == 0 {
			return usagef("exec: missing command (strata exec --worlds a,b -- CMD ARGS...)")
		}
		if *tty || *detach {
			return usagef("exec: --tty and --detach cannot be used with --worlds or --all")
		}
		names, err := a.fanOutWorlds(*worlds, *all)
		if err != nil {
			return err
		}
		return fanOut(a, names, rest, engine.ExecOptions{Env: env, Cwd: *cwd, NoNetwork: *noNet, Isolation: engine.Isolation(*iso), Snapshot: *snap, Network: network, PassEnv: passEnv})
	}
	if len(pos) > 1 && len(rest) == 0 { // strata exec W cmd args (no --)
		rest, pos = pos[1:], pos[:1]
	}
	if err := in.cmd.checkArity(pos); err != nil {
		return a.usageOf(in, err)
	}
	if len(rest) == 0 {
		return usagef("exec: missing command (strata exec %s -- CMD ARGS...)", pos[0])
	}
	w, err := a.eng.World(pos[0])
	if err != nil {
		return err
	}
	engine.Trace("cli: world read")
	// Before anything else (strata shell's terminal check included):
	// the engine refuses too, but this is what the person must fix.
	if err := a.eng.CheckExec(w); err != nil {
		return err
	}
	if *tty && !*detach && !term.IsTerminal(int(os.Stdin.Fd())) {
		// Checked before starting: a terminal session nobody can attach to
		// here would be left running behind the error.
		return usagef("exec --tty: standard input is not a terminal; add --detach and attach later with strata attach %s", pos[0])
	}
	if eff := engine.Isolation(*iso); eff == engine.IsolationTree || eff == "" && w.Isolation == engine.IsolationTree {
		a.warnTree(w.Name, engine.IsolationTree)
	}
	dir, err := engine.DefaultWorkDir(w, a.eng.Paths.Merged(w.Name), callerDir(), *cwd)
	if err != nil {
		return &usageError{msg: err.Error(), err: err}
	}
	meta, err := a.eng.Exec(a.ctx, w.Name, engine.ExecOptions{Argv: rest, Env: env, Cwd: dir, TTY: *tty, NoNetwork: *noNet, Isolation: engine.Isolation(*iso), Snapshot: *snap, Network: network, PassEnv: passEnv})
	if errors.Is(err, engine.ErrStartFailed) && meta.ExitCode != 0 {
		return &exitError{code: meta.ExitCode, err: err} // 127 not found, 126 not executable, like a shell
	}
	if err != nil {
		return err
	}
	if *detach {
		if *asJSON {
			return a.printJSON(meta)
		}
		fmt.Fprintln(a.stdout, meta.ID)
		return nil
	}
	if *tty {
		return a.attach(w.Name, meta)
	}
	return a.follow(w.Name, meta)
}

// follow streams a session's output to the caller until it ends, forwards
// interrupts to it, and passes its exit status through.
func (a *app) follow(world string, meta engine.SessionMeta) error {
	dir := a.eng.SessionDir(world, meta.ID)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			_ = engine.KillSession(dir, s.(syscall.Signal))
		}
	}()
	err := engine.FollowTranscript(a.ctx, dir, 0, func(r engine.Record) error {
		if r.Stream == engine.StreamStderr {
			_, err := a.stderr.Write(r.Data)
			return err
		}
		_, err := a.stdout.Write(r.Data)
		return err
	})
	if err != nil {
		return err
	}
	engine.Trace("cli: transcript followed to its end")
	end, err := engine.WaitSession(a.ctx, dir)
	if err != nil {
		return err
	}
	engine.Trace("cli: session end read")
	return sessionExit(end)
}

func sessionExit(m engine.SessionMeta) error {
	if m.State == engine.SessionLost {
		// Its status is unknown; never 0. 255, as ssh exits when it lost
		// the command rather than the command failing.
		return &exitError{code: 255, err: fmt.Errorf("session %s of world %s: %s; its output so far: strata logs %s %s", m.ID, m.World, m.Error, m.World, m.ID)}
	}
	if m.Error != "" && m.ExitCode == 0 {
		return &exitError{code: 1, err: errors.New(m.Error)}
	}
	if m.ExitCode != 0 {
		return &exitError{code: m.ExitCode}
	}
	return nil
}

func (a *app) attach(world string, meta engine.SessionMeta) error {
	dir := a.eng.SessionDir(world, meta.ID)
	if !meta.TTY {
		return fmt.Errorf("session %s of world %s has no terminal; read its output with strata logs %s %s -f", meta.ID, world, world, meta.ID)
	}
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return fmt.Errorf("attach: standard input is not a terminal")
	}
	fmt.Fprintf(a.stderr, "attached to %s/%s; detach with ctrl-]\r\n", world, meta.ID)
	err := engine.AttachTerminal(a.ctx, dir, nil)
	if errors.Is(err, engine.ErrDetached) {
		fmt.Fprintf(a.stderr, "\r\ndetached; the session keeps running (strata attach %s %s)\n", world, meta.ID)
		return nil
	}
	if err != nil {
		// A short command can end before we connect (its attach socket goes
		// with it): then show what it printed and pass its status through,
		// as if we had been attached, instead of a dial error.
		wctx, cancel := context.WithTimeout(a.ctx, 2*time.Second)
		end, werr := engine.WaitSession(wctx, dir)
		cancel()
		if werr != nil || !end.State.Ended() {
			return err
		}
		if rerr := engine.FollowTranscript(a.ctx, dir, 0, func(r engine.Record) error {
			if r.Stream == engine.StreamResize {
				return nil
			}
			_, werr := a.stdout.Write(r.Data)
			return werr
		}); rerr != nil {
			return rerr
		}
		return sessionExit(end)
	}
	end, err := engine.WaitSession(a.ctx, dir)
	if err != nil {
		return err
	}
	return sessionExit(end)
}

func cmdShell(a *app, in *input) error {
	pos := in.pos
	argv, err := a.eng.ShellArgv(pos[0], "")
	if err != nil {
		return err
	}
	return a.call("exec", append([]string{pos[0], "--tty", "--"}, argv...))
}

func cmdAttach(a *app, in *input) error {
	pos := in.pos
	ref := ""
	if len(pos) == 2 {
		ref = pos[1]
	}
	meta, err := a.eng.Session(pos[0], ref)
	if err != nil {
		return err
	}
	if meta.State != engine.SessionRunning {
		return notRunning(fmt.Sprintf("session %s of world %s is %s; its output: strata logs %s %s", meta.ID, pos[0], meta.State, pos[0], meta.ID))
	}
	return a.attach(pos[0], meta)
}

func cmdSessions(a *app, in *input) error {
	asJSON := in.Bool("json")
	pos := in.pos
	if _, err := a.eng.World(pos[0]); err != nil {
		return err
	}
	ss, err := a.eng.Sessions(pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		if ss == nil {
			ss = []engine.SessionMeta{}
		}
		return a.printJSON(ss)
	}
	if len(ss) == 0 {
		fmt.Fprintf(a.stdout, "world %s has no sessions; start one with strata exec %s -- CMD\n", pos[0], pos[0])
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tEXIT\tSTARTED\tDURATION\tCOMMAND")
	broken := 0
	for _, s := range ss {
		if s.State == engine.SessionBroken {
			broken++
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, "?", s.StartedAt.Local().Format(time.TimeOnly), "?", "error: "+oneLine(s.Error))
			continue
		}
		exit := ""
		if s.State == engine.SessionLost {
			exit = "?"
		} else if s.State != engine.SessionRunning && s.State != engine.SessionStarting {
			exit = fmt.Sprint(s.ExitCode)
			if s.Signal != "" {
				exit += " (" + s.Signal + ")"
			}
		}
		dur := ""
		if !s.StartedAt.IsZero() {
			end := s.EndedAt
			if end.IsZero() {
				end = time.Now()
			}
			dur = end.Sub(s.StartedAt).Round(time.Millisecond).String()
		}
		state := string(s.State)
		if s.Attention == engine.AttentionWaiting {
			state = "waiting"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, state, exit, s.StartedAt.Local().Format(time.TimeOnly), dur, oneLine(shellQuote(s.Argv)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if broken > 0 {
		fmt.Fprintf(a.stderr, "%s with an unreadable meta.json; their output: strata logs %s SESSION\n", count(broken, "session", "sessions"), pos[0])
	}
	return nil
}

func cmdLogs(a *app, in *input) error {
	follow := in.Bool("f")
	raw := in.Bool("raw")
	asJSON := in.Bool("json")
	pos := in.pos
	var err error
	var meta engine.SessionMeta
	if len(pos) == 2 {
		meta, err = a.eng.Session(pos[0], pos[1])
	} else {
		meta, err = a.agentSession(pos[0])
	}
	if err != nil {
		return err
	}
	dir := a.eng.SessionDir(pos[0], meta.ID)
	stdout, stderr := a.stdout, a.stderr
	if !*raw {
		po, pe := &plainText{w: a.stdout}, &plainText{w: a.stderr}
		defer func() { _ = po.Close() }() // flushes what the filter holds back
		defer func() { _ = pe.Close() }()
		stdout, stderr = po, pe
	}
	emit := func(r engine.Record) error {
		if *asJSON {
			type rec struct {
				Time   time.Time `json:"time"`
				Stream string    `json:"stream"`
				Data   *string   `json:"data,omitempty"`
				Rows   uint16    `json:"rows,omitempty"`
				Cols   uint16    `json:"cols,omitempty"`
			}
			if ws, ok := r.WinSize(); ok {
				return a.printJSONLine(rec{Time: r.Time, Stream: r.Stream.String(), Rows: ws.Rows, Cols: ws.Cols})
			}
			data := string(r.Data)
			return a.printJSONLine(rec{Time: r.Time, Stream: r.Stream.String(), Data: &data})
		}
		var err error
		switch r.Stream {
		case engine.StreamResize: // a terminal size, not output
		case engine.StreamStderr:
			_, err = stderr.Write(r.Data)
		default:
			_, err = stdout.Write(r.Data)
		}
		return err
	}
	if meta.State == engine.SessionBroken {
		// No end can be learnt from a broken meta.json: print what is there.
		fmt.Fprintf(a.stderr, "session %s: %s\n", meta.ID, meta.Error)
		*follow = false
	}
	if *follow {
		return engine.FollowTranscript(a.ctx, dir, 0, emit)
	}
	recs, _, err := engine.ReadTranscript(dir+"/transcript", 0)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

// agentSession is the session a person means by `strata logs NAME`: the
// newest one running a command (an agent's, a build's), not the newest
// interactive shell or editor on a terminal, as `strata shell` and the
// TUI's edit key start them. A World with only those gives the newest.
func (a *app) agentSession(world string) (engine.SessionMeta, error) {
	ss, err := a.eng.Sessions(world)
	if err != nil || len(ss) == 0 {
		return a.eng.Session(world, "") // its error says how to start one
	}
	shell, _ := a.eng.ShellArgv(world, "")
	for i := len(ss) - 1; i >= 0; i-- {
		if !interactiveSession(ss[i], shell) {
			return ss[i], nil
		}
	}
	return ss[len(ss)-1], nil
}

// interactiveSession reports whether s is a person's shell or editor on a
// terminal rather than a command running on its own.
func interactiveSession(s engine.SessionMeta, shell []string) bool {
	if !s.TTY || len(s.Argv) == 0 {
		return false
	}
	if slices.Equal(s.Argv, shell) {
		return true
	}
	prog := filepath.Base(s.Argv[0])
	switch prog {
	case "sh", "bash", "zsh", "fish", "dash", "ksh", "mksh", "tcsh", "csh", "nu", "elvish":
		for _, arg := range s.Argv[1:] {
			if arg != "-i" && arg != "-l" && arg != "--login" && arg != "--interactive" {
				return false
			}
		}
		return true
	case "vi", "vim", "nvim", "view", "nano", "pico", "emacs", "emacsclient", "micro", "hx", "helix", "kak", "mg", "joe", "ne", "ed":
		return true
	}
	for _, v := range []string{"VISUAL", "EDITOR"} {
		if f := strings.Fields(os.Getenv(v)); len(f) > 0 && filepath.Base(f[0]) == prog {
			return true
		}
	}
	return false
}

func cmdKill(a *app, in *input) error {
	sig := in.String("signal")
	pos := in.pos
	if *sig == "" || *in.Bool("force") {
		return agentKill(a, in)
	}
	if len(pos) < 2 {
		return a.usageOf(in, usagef("kill --signal: name the SESSION (strata sessions %s lists them)", pos[0]))
	}
	s, err := parseSignal(*sig)
	if err != nil {
		return err
	}
	meta, err := a.eng.Kill(a.ctx, pos[0], pos[1], s)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "sent %s to session %s of world %s\n", *sig, meta.ID, pos[0])
	return nil
}

func parseSignal(s string) (syscall.Signal, error) {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "SIG"))
	for i := 1; i < 65; i++ {
		if strings.EqualFold(strings.TrimPrefix(unixSignalName(syscall.Signal(i)), "SIG"), name) {
			return syscall.Signal(i), nil
		}
	}
	return 0, usagef("unknown signal %q", s)
}

func (a *app) fanOutWorlds(list string, all bool) ([]string, error) {
	if all {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		ws, err := a.eng.WorldsOfSource(wd)
		if err != nil {
			return nil, err
		}
		if len(ws) == 0 {
			return nil, fmt.Errorf("exec --all: no Worlds over %s (strata ls --all lists every World)", wd)
		}
		names := make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.Name
		}
		// A broken World's source is unknown: say it was left out.
		if broken, err := a.eng.BrokenWorlds(); err == nil {
			for _, b := range broken {
				fmt.Fprintf(a.stderr, "strata: skipping broken world %s: %s\n", b.Name, b.Reason())
			}
		}
		return names, nil
	}
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		if _, err := a.eng.World(n); err != nil {
			return nil, err
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, nil
}
