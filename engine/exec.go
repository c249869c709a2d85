package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/mount"
)

// ErrSourceMissing is matched (errors.Is) by a *SourceMissingError.
var ErrSourceMissing = errors.New("world's source no longer exists")

// SourceMissingError: the directory a World is over was moved or deleted.
// Nothing may run in the World or publish from it then: a session would bind
// the World over a freshly made empty directory at the old path, and a
// publication would rebuild a partial tree there.
type SourceMissingError struct {
	World, Source string
}

func (e *SourceMissingError) Error() string {
	return fmt.Sprintf("world %q: its source %s no longer exists (moved or deleted?); strata ls shows Worlds whose source is missing", e.World, e.Source)
}

func (e *SourceMissingError) Is(target error) bool { return target == ErrSourceMissing }

// CheckSource returns a *SourceMissingError unless the World's source is a
// directory on this machine.
func (e *Engine) CheckSource(w *World) error {
	fi, err := os.Stat(w.Source)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), err == nil && !fi.IsDir():
		return &SourceMissingError{World: w.Name, Source: w.Source}
	case err != nil:
		return fmt.Errorf("world %q: its source: %w", w.Name, err)
	}
	return e.checkTrees(w) // the source's path and every tree's (trees.go)
}

// Exec starts a session in the World and returns once the command runs.
func (e *Engine) Exec(ctx context.Context, name string, o ExecOptions) (SessionMeta, error) {
	w, err := e.World(name)
	if err != nil {
		return SessionMeta{}, err
	}
	if len(o.Argv) == 0 {
		return SessionMeta{}, fmt.Errorf("exec in world %q: no command given (strata exec %s -- CMD ARGS...)", name, name)
	}
	return e.runtimeFor(w).StartSession(ctx, w, o)
}

// execLocal starts a session of a local World: in namespaces of its own,
// over the World's overlay.
func (e *Engine) execLocal(ctx context.Context, w *World, o ExecOptions) (SessionMeta, error) {
	name := w.Name
	if err := e.CheckExec(w); err != nil {
		return SessionMeta{}, err // names the World already
	}
	e.thawStale(w)
	Trace("exec: checked, thawed")
	if o.Snapshot || e.Config.AutoSnapshot {
		if _, err := e.Snapshot(ctx, name, SnapshotOptions{Message: "before exec: " + shellQuote(o.Argv), Auto: true}); err != nil {
			return SessionMeta{}, fmt.Errorf("exec in world %q: snapshot before exec: %w", name, err)
		}
	}
	var inSession *mount.MountSpec
	if !isRoot() && w.MountBackend == overlay.BackendKernel {
		// Rootless kernel overlay: only a user namespace may mount it, so the
		// session init mounts it inside its own namespaces.
		inSession = &mount.MountSpec{Lower: w.Source, Upper: e.Paths.Upper(w.Name), Work: e.Paths.Work(w.Name), Target: e.Paths.Merged(w.Name), Backend: overlay.BackendKernel, UserXattr: true}
	} else if err := e.ensureMountedFast(ctx, w); err != nil {
		return SessionMeta{}, err
	}
	Trace("exec: mounted")
	iso := o.Isolation
	if iso == "" {
		iso = w.Isolation
	}
	if err := iso.Validate(); err != nil {
		return SessionMeta{}, fmt.Errorf("exec in world %q: isolation %w", name, err)
	}
	env, cwd := o.EnvAndCwd(w)
	b, err := e.boundaryOf(w, o, env)
	if err != nil {
		return SessionMeta{}, fmt.Errorf("exec in world %q: %w", name, err)
	}
	if b != nil {
		env = b.Env // scrubbed; strict_binds are among its shared caches
	}
	// The spec's own binds (agents: the hook channel, the strata binary);
	// strict_binds are shared caches of the boundary now.
	Trace("exec: boundary computed")
	binds := slices.Clone(o.Binds)
	binds = append(binds, e.treeBinds(w)...) // the World's extra trees (trees.go)
	id := o.ID
	if id == "" {
		id = NewSessionID()
	}
	spec := SessionSpec{
		ID:         id,
		World:      w.Name,
		Source:     w.Source,
		Merged:     e.Paths.Merged(w.Name),
		Overlay:    inSession,
		StateRoot:  e.Paths.Root,
		Dir:        filepath.Join(e.Paths.Sessions(w.Name), id),
		Argv:       o.Argv,
		Env:        env,
		EnvRedact:  e.Config.EnvRedact,
		Cwd:        cwd,
		TTY:        o.TTY,
		NoNetwork:  o.NoNetwork,
		Isolation:  iso,
		Binds:      binds,
		Boundary:   b,
		Exe:        e.exe,
		WorldState: w,
		Watch: &SessionWatch{
			Upper: e.Paths.Upper(w.Name), Lower: w.Source, Objects: e.Paths.Objects(),
			Bases: e.bases(w.Name).Dir, Provenance: filepath.Join(e.Paths.World(w.Name), "provenance"),
			Dialect: w.Dialect, Ignore: e.Config.Ignore,
		},
	}
	release, err := e.prepareNetwork(ctx, w, iso, o, &spec)
	if err != nil {
		return SessionMeta{}, err
	}
	Trace("exec: network prepared")
	if spec.Boundary != nil && spec.Network != "" {
		// One mode: the one the session's namespaces get is the one its
		// boundary (mount plan, strata show) describes.
		spec.Boundary.Network = spec.Network
	}
	meta, err := StartSession(ctx, spec)
	release()
	if err != nil {
		return meta, fmt.Errorf("exec in world %q: %w", name, err)
	}
	// The session's init logged session.started (and will log its end).
	return meta, nil
}

// SessionDir is where a session of a World keeps its files.
func (e *Engine) SessionDir(world, id string) string {
	return filepath.Join(e.Paths.Sessions(world), id)
}

// Sessions lists a World's sessions, oldest first.
func (e *Engine) Sessions(name string) ([]SessionMeta, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	ss, err := ListSessions(e.Paths.World(name))
	for i, s := range ss {
		if s.State == SessionLost {
			ss[i] = runtimeOf(e, s.Runtime).ReviveSession(context.Background(), name, s)
		}
		if r, ok := e.ReadAgentRecord(name, ss[i].ID); ok {
			ss[i].Agent = &r.Status
		}
	}
	return ss, err
}

// Session finds one session by id or unique id prefix; "" = the newest.
func (e *Engine) Session(name, ref string) (SessionMeta, error) {
	ss, err := e.Sessions(name)
	if err != nil {
		return SessionMeta{}, err
	}
	if len(ss) == 0 {
		if _, err := os.Lstat(e.Paths.World(name)); errors.Is(err, fs.ErrNotExist) {
			return SessionMeta{}, fmt.Errorf("%w: %q (strata ls --all lists every World)", ErrWorldNotFound, name)
		}
		return SessionMeta{}, noSessionError(fmt.Sprintf("world %q has no sessions (strata exec %s -- CMD starts one)", name, name))
	}
	if ref == "" {
		return ss[len(ss)-1], nil
	}
	var found []SessionMeta
	for _, s := range ss {
		if s.ID == ref {
			return s, nil
		}
		if len(ref) >= 3 && len(s.ID) > len(ref) && s.ID[:len(ref)] == ref {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return SessionMeta{}, noSessionError(fmt.Sprintf("world %q has no session %q (strata sessions %s lists them)", name, ref, name))
	}
	return SessionMeta{}, fmt.Errorf("session %q of world %q is ambiguous: %d sessions start with it", ref, name, len(found))
}

// noSessionError says which session is missing in its own words and is
// ErrNoSession to errors.Is (strata's --json reports it as not_found).
type noSessionError string

func (e noSessionError) Error() string { return string(e) }
func (e noSessionError) Unwrap() error { return ErrNoSession }

func (e *Engine) runningSessions(w *World) []string {
	ss, err := ListSessions(e.Paths.World(w.Name))
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range ss {
		if s.State == SessionRunning || s.State == SessionStarting {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

func (e *Engine) killSession(w *World, id string) error {
	return KillSession(e.SessionDir(w.Name, id), syscall.SIGKILL)
}

// Kill signals a session's command.
func (e *Engine) Kill(ctx context.Context, name, ref string, sig syscall.Signal) (SessionMeta, error) {
	s, err := e.Session(name, ref)
	if err != nil {
		return s, err
	}
	if err := KillSession(e.SessionDir(name, s.ID), sig); err != nil {
		return s, fmt.Errorf("kill session %s of world %q: %w", s.ID, name, err)
	}
	return s, nil
}

// Shell scripts that pick a cube sandbox's shell: bash when its template
// has it, else sh. $1 is the command line.
// ShellArgv is the argv that runs a person's command line in a shell in
// the World, or an interactive shell when command is "". A local World's
// sessions see this machine's file system: its $SHELL (else /bin/sh). A
// cube sandbox has its own root file system, where that shell may not be:
// its bash, else sh.
func (e *Engine) ShellArgv(name, command string) ([]string, error) {
	w, err := e.World(name)
	if err != nil {
		return nil, err
	}
	return e.runtimeFor(w).ShellArgv(command), nil
}

// ShellQuote renders argv the way a shell user would type it.
func ShellQuote(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("-_./=:,+@%", r)
		}) < 0 {
			b.WriteString(a)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String()
}

func shellQuote(argv []string) string { return ShellQuote(argv) }
