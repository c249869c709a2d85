package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/publish"
)

// applyToBranch commits the same picks on a new branch of a git source,
// merged against the branch point (HEAD), without touching the working
// tree or the index: a private index file and git plumbing do the work.
func (e *Engine) applyToBranch(ctx context.Context, w *World, changes []overlay.Change, picks map[string]Pick, o ApplyOptions, res *ApplyResult, start time.Time) (*ApplyResult, error) {
	git := func(env []string, stdin []byte, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = w.Source
		cmd.Env = append(os.Environ(), env...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	top, err := git(nil, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("apply world %q --to-branch: the source is not a git work tree: %w", w.Name, err)
	}
	if real, err := filepath.EvalSymlinks(top); err == nil {
		top = real
	}
	prefix, err := filepath.Rel(top, w.Source)
	if err != nil {
		return nil, err
	}
	prefix = filepath.ToSlash(prefix)
	if prefix == "." {
		prefix = ""
	} else {
		prefix += "/"
	}
	if _, err := git(nil, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+o.ToBranch); err == nil {
		return nil, fmt.Errorf("apply world %q --to-branch: branch %q exists; pick a new name", w.Name, o.ToBranch)
	}
	if _, err := git(nil, nil, "check-ref-format", "--branch", o.ToBranch); err != nil {
		return nil, fmt.Errorf("apply world %q --to-branch: %q is not a valid branch name", w.Name, o.ToBranch)
	}
	head, err := git(nil, nil, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	// theirs is HEAD's version of each path.
	theirsOf := func(rel string) (version, error) {
		out, err := git(nil, nil, "ls-tree", "-z", "HEAD", "--", prefix+rel)
		if err != nil || out == "" {
			return version{}, err
		}
		meta, _, _ := strings.Cut(out, "\t")
		f := strings.Fields(meta)
		if len(f) != 3 {
			return version{}, fmt.Errorf("ls-tree %s: %q", rel, out)
		}
		switch f[1] {
		case "tree":
			return version{typ: overlay.TypeDir, mode: 0o755}, nil
		case "blob":
		default:
			return version{}, nil // a submodule is left alone
		}
		cmd := exec.CommandContext(ctx, "git", "cat-file", "blob", f[2])
		cmd.Dir = w.Source
		data, err := cmd.Output()
		if err != nil {
			return version{}, fmt.Errorf("git cat-file %s: %w", f[2], err)
		}
		switch f[0] {
		case "120000":
			return version{typ: overlay.TypeSymlink, target: string(data)}, nil
		case "100755":
			return version{typ: overlay.TypeFile, mode: 0o755, data: data}, nil
		}
		return version{typ: overlay.TypeFile, mode: 0o644, data: data}, nil
	}
	// A commit holds whole contents: the World's are read into memory, at
	// one paused instant as for a publication to the working tree.
	ours, release, err := e.captureOurs(ctx, w, changes, false)
	release()
	if err != nil {
		return nil, fmt.Errorf("apply world %q --to-branch: %w", w.Name, err)
	}
	p, err := e.planApply(ctx, w, changes, picks, o, ours, theirsOf)
	if err != nil {
		return nil, fmt.Errorf("apply world %q --to-branch: %w", w.Name, err)
	}
	res.Paths, res.Branch = p.paths, o.ToBranch
	res.Warnings = append(slices.Clip(res.others), p.warnings...)
	if len(p.conflicts) > 0 {
		return res, &ConflictError{World: w.Name, Conflicts: p.conflicts}
	}
	if o.DryRun {
		res.Duration = time.Since(start).Round(time.Microsecond).String()
		return res, nil
	}
	idx, err := os.CreateTemp(e.Paths.Scratch(), "index-")
	if err != nil {
		return nil, err
	}
	idx.Close()
	defer os.Remove(idx.Name())
	env := []string{"GIT_INDEX_FILE=" + idx.Name()}
	if _, err := git(env, nil, "read-tree", "HEAD"); err != nil {
		return nil, err
	}
	for _, op := range p.ops {
		path := prefix + op.Path
		switch op.Kind {
		case publish.OpDelete, publish.OpRmdir:
			if _, err := git(env, nil, "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", path); err != nil {
				return nil, err
			}
		case publish.OpWrite, publish.OpSymlink:
			content, mode := op.Data, "100644"
			if op.Kind == publish.OpSymlink {
				content, mode = []byte(op.Target), "120000"
			} else if op.Mode&0o111 != 0 {
				mode = "100755"
			}
			sha, err := git(nil, content, "hash-object", "-w", "--stdin")
			if err != nil {
				return nil, err
			}
			if _, err := git(env, nil, "update-index", "--add", "--cacheinfo", mode+","+sha+","+path); err != nil {
				return nil, err
			}
		}
	}
	tree, err := git(env, nil, "write-tree")
	if err != nil {
		return nil, err
	}
	msg := o.Message
	if msg == "" {
		msg = fmt.Sprintf("Apply changes from strata world %s", w.Name)
	}
	commit, err := git(nil, nil, "commit-tree", tree, "-p", head, "-m", msg)
	if err != nil {
		return nil, err
	}
	if _, err := git(nil, nil, "update-ref", "refs/heads/"+o.ToBranch, commit, ""); err != nil {
		return nil, errors.New("create branch: " + err.Error())
	}
	res.Commit = commit
	res.Duration = time.Since(start).Round(time.Microsecond).String()
	_ = e.appendHistory(HistoryEntry{World: w.Name, Source: w.Source, Time: time.Now().UTC(), Branch: o.ToBranch, Commit: commit, Paths: res.Paths})
	e.activity(ctx, Event{Type: EventApplyDone, World: w.Name, Detail: map[string]any{"branch": o.ToBranch, "commit": commit, "paths": len(res.Paths)}})
	return res, nil
}
