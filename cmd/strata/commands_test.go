package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/engine"
)

// runHere runs strata in this process (no engine is opened by anything
// these tests call: help and usage errors are answered before).
func runHere(args ...string) (stdout, stderr string, code int) {
	var out, errs bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errs)
	return out.String(), errs.String(), code
}

// The usage line of VERB --help names every flag and every operand the
// command takes: it is generated from the table, so none can be left out
// (diff --binary, apply -m and exec --worlds/--all once were).
func TestUsageLineNamesEveryFlagAndOperand(t *testing.T) {
	for i := range commands {
		c := &commands[i]
		out, errs, code := runHere(c.name, "--help")
		if code != 0 || errs != "" {
			t.Errorf("strata %s --help: exit %d, stderr %q", c.name, code, errs)
			continue
		}
		line, _, _ := strings.Cut(out, "\n")
		if !strings.HasPrefix(line, "Usage: strata "+c.name) {
			t.Errorf("strata %s --help: first line %q", c.name, line)
			continue
		}
		words := strings.Fields(strings.NewReplacer("[", " ", "]", " ", "...", " ", "|", " ").Replace(line))
		flagSetOf(c).VisitAll(func(f *flag.Flag) {
			name := "--" + f.Name
			if len(f.Name) == 1 {
				name = "-" + f.Name
			}
			if !slices.Contains(words, name) {
				t.Errorf("strata %s --help: usage line %q lacks %s", c.name, line, name)
			}
			if !strings.Contains(out, f.Usage) {
				t.Errorf("strata %s --help lacks the help of %s", c.name, name)
			}
		})
		for _, s := range c.args {
			if !strings.Contains(line, s.name) {
				t.Errorf("strata %s --help: usage line %q lacks operand %s", c.name, line, s.name)
			}
		}
		// help VERB prints the same.
		if h, _, code := runHere("help", c.name); code != 0 || h != out {
			t.Errorf("strata help %s differs from strata %s --help (exit %d)", c.name, c.name, code)
		}
	}
}

// After "--" every argument is an operand, for every command of the table:
// a command taking paths gets it, a command taking a command line gets it
// there, and a command taking neither refuses it (exit 2) instead of
// dropping it.
func TestDoubleDashOperandNeverDropped(t *testing.T) {
	for i := range commands {
		c := &commands[i]
		var args []string
		for _, s := range c.args {
			for range max(s.min, 1) {
				args = append(args, "x")
			}
		}
		args = append(args, "--", "-y", "--json")
		a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
		in, err := a.parseArgs(c, args)
		takesMore := len(c.args) > 0 && c.args[len(c.args)-1].max < 0
		switch {
		case c.dashArgs != "":
			if err != nil || !slices.Equal(in.rest, []string{"-y", "--json"}) {
				t.Errorf("strata %s %q: rest %v, err %v; want the command line [-y --json]", c.name, args, in, err)
			}
		case takesMore:
			if err != nil || !slices.Contains(in.pos, "-y") || !slices.Contains(in.pos, "--json") || (c.flag("json") != nil && *in.Bool("json")) {
				t.Errorf("strata %s %q: err %v; want -y and --json as operands", c.name, args, err)
			}
		default:
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "unexpected argument") {
				t.Errorf("strata %s %q: err %v; want an unexpected argument usage error", c.name, args, err)
			}
		}
	}
}

// Exit statuses and --json codes come from the error's chain, never from
// its text: a message that merely ends like flag.ErrHelp's is an error.
func TestExitFollowsTheChain(t *testing.T) {
	hunkErr := func() error {
		_, err := diffview.ParseHunkNumbers("3-1")
		return err
	}()
	if hunkErr == nil {
		t.Fatal("ParseHunkNumbers(3-1) accepted")
	}
	for _, tc := range []struct {
		err  error
		code int
		json string
	}{
		{nil, 0, ""},
		{errHelp, 0, ""},
		{fmt.Errorf("asked: %w", flag.ErrHelp), 0, ""},
		{errors.New("restore world \"x\": " + flag.ErrHelp.Error()), 1, "error"},
		{usagef("apply: --hunks %q: %w", "a=3-1", hunkErr), 2, "usage"},
		{fmt.Errorf("open: %w", &engine.ConfigError{Path: "c", Err: errors.New("bad")}), 2, "config"},
		{fmt.Errorf("show: %w", engine.ErrWorldNotFound), 1, "not_found"},
		{&exitError{code: 7, err: errors.New("x")}, 7, ""},
		{notRunning("session s of world w is exited"), 1, "session_not_running"},
	} {
		var errs bytes.Buffer
		a := &app{stderr: &errs}
		if got := a.exit(tc.err); got != tc.code {
			t.Errorf("exit(%v) = %d, want %d", tc.err, got, tc.code)
		}
		if tc.json != "" {
			if got := errorCode(tc.err); got != tc.json {
				t.Errorf("errorCode(%v) = %q, want %q", tc.err, got, tc.json)
			}
		}
	}
	// The usage error keeps what it wraps.
	if err := usagef("apply: --hunks %q: %w", "a=3-1", hunkErr); !errors.Is(err, hunkErr) || err.Error() != `apply: --hunks "a=3-1": `+hunkErr.Error() {
		t.Errorf("usagef lost the chain or the text: %v", err)
	}
	// A flag package error keeps its chain too (flag.ErrHelp is the one
	// the flag package exports).
	a := &app{stdout: io.Discard, stderr: io.Discard}
	c, _ := commandNamed("ls")
	if _, err := a.parseArgs(c, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("ls -h: %v, want flag.ErrHelp in the chain", err)
	}
}

// Completion is generated from the table: each operand kind and flag
// value set is offered where the table puts it.
func TestCompletionFollowsTheTable(t *testing.T) {
	complete := func(words ...string) []string {
		var out bytes.Buffer
		a := &app{stdout: &out, stderr: io.Discard}
		if err := cmdComplete(a, words); err != nil {
			t.Fatal(err)
		}
		return strings.Fields(out.String())
	}
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"new", "--backend", ""}, []string{"local", "cube"}},
		{[]string{"diff", "w", "--against", ""}, []string{"base", "source"}},
		{[]string{"diff", "-"}, []string{"--stat", "--json", "--against", "--against-world", "-U", "--binary", "--tree"}},
		{[]string{"exec", "--w"}, []string{"--worlds"}},
		{[]string{"apply", "-"}, []string{"--hunks", "--expect-base", "--expect-world", "--dry-run", "--json", "--drop-applied", "--to-branch", "-m", "--allow-setuid", "--tree"}},
		{[]string{"exec", "w", "--", "-"}, nil}, // after --: the command's own words
		{[]string{"help", "ex"}, []string{"exec"}},
	} {
		if got := complete(tc.words...); !slices.Equal(got, tc.want) {
			t.Errorf("__complete %q = %q, want %q", tc.words, got, tc.want)
		}
	}
}
