package diffview

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func requireGit(t testing.TB) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not on PATH: the oracle tests need it")
	}
	return git
}

// gitMergeFile runs `git merge-file -p` (optionally --diff3) and returns
// its output and whether the merge was clean.
func gitMergeFile(t testing.TB, dir, base, ours, theirs string, diff3 bool) (string, bool) {
	t.Helper()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		return p
	}
	o := write("ours", ours)
	b := write("base", base)
	th := write("theirs", theirs)
	args := []string{"merge-file", "-p", "-L", "ours", "-L", "base", "-L", "theirs"}
	if diff3 {
		args = append(args, "--diff3")
	}
	args = append(args, o, b, th)
	cmd := exec.Command("git", args...)
	out, err := cmd.Output()
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() < 0 || ee.ExitCode() > 127 {
			t.Fatalf("git merge-file: %v", err)
		}
		return string(out), false
	}
	return string(out), true
}

// textGen makes line-based texts with a controllable amount of repetition,
// like real code (blank lines, closing braces) has.
type textGen struct {
	rng    *rand.Rand
	vocab  []string
	unique int
}

func newTextGen(seed uint64, vocabSize int) *textGen {
	g := &textGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	common := []string{"", "}", "{", "\treturn nil", "\t}", "// comment", "end"}
	for i := 0; i < vocabSize; i++ {
		if i < len(common) {
			g.vocab = append(g.vocab, common[i])
		} else {
			g.vocab = append(g.vocab, fmt.Sprintf("word%d", i))
		}
	}
	return g
}

// line returns a vocabulary line (repeats) or, half the time, a fresh one.
func (g *textGen) line() string {
	if len(g.vocab) > 0 && g.rng.IntN(2) == 0 {
		return g.vocab[g.rng.IntN(len(g.vocab))] + "\n"
	}
	g.unique++
	return fmt.Sprintf("line %d %x\n", g.unique, g.rng.Uint32())
}

func (g *textGen) lines(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = g.line()
	}
	return out
}

// edit applies k random edits (replace, insert or delete a short run) to
// lines[lo:hi] and returns the new slice.
func (g *textGen) edit(lines []string, lo, hi, k int) []string {
	out := append([]string(nil), lines...)
	for ; k > 0; k-- {
		if hi < lo {
			break
		}
		pos := lo + g.rng.IntN(hi-lo+1)
		n := 1 + g.rng.IntN(3)
		switch g.rng.IntN(3) {
		case 0: // insert
			out = append(out[:pos], append(g.lines(n), out[pos:]...)...)
			hi += n
		case 1: // delete
			end := min(pos+n, hi, len(out))
			out = append(out[:pos], out[end:]...)
			hi -= end - pos
		default: // replace
			end := min(pos+n, hi, len(out))
			repl := g.lines(1 + g.rng.IntN(3))
			out = append(out[:pos], append(repl, out[end:]...)...)
			hi += len(repl) - (end - pos)
		}
	}
	return out
}

func join(lines []string) string { return strings.Join(lines, "") }

// maybeDropFinalNewline removes the last "\n" now and then, to exercise
// "\ No newline at end of file" paths.
func (g *textGen) maybeDropFinalNewline(s string) string {
	if g.rng.IntN(8) == 0 {
		return strings.TrimSuffix(s, "\n")
	}
	return s
}
