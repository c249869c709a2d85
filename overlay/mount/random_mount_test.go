package mount

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay"
	"github.com/stratahq/strata/overlay/overlaytest"
)

// randomNames are the path components random operations draw from: few, so
// operations collide, and odd, so names survive every step.
var randomNames = []string{"a", "b", "s p", "-\xff\n"}

// randomPaths lists every path of up to three randomNames, parents first.
var randomPaths = func() []string {
	var paths []string
	level := []string{""}
	for range 3 {
		var next []string
		for _, parent := range level {
			for _, n := range randomNames {
				next = append(next, strings.TrimPrefix(parent+"/"+n, "/"))
			}
		}
		paths = append(paths, next...)
		level = next
	}
	return paths
}()

var (
	randomFileModes = []os.FileMode{0o644, 0o600, 0o755, 0o444}
	randomDirModes  = []os.FileMode{0o755, 0o700, 0o750}
	// Symlink targets are relative names without "..": whatever an
	// operation follows stays inside the tree.
	randomTargets = []string{"a", "b", "missing", "s p/a"}
)

// fsOp is one operation on a tree. Its arguments are fixed before it runs, so
// the same sequence can run on a mount and on a plain copy.
type fsOp struct {
	code    byte
	path    string
	other   string // rename destination or symlink target
	mode    os.FileMode
	content string
}

const opCodes = 10

func (o fsOp) String() string {
	names := [...]string{"write", "append", "remove", "mkdir", "rename", "chmod", "symlink", "recreate-dir", "rewrite-same", "truncate"}
	return fmt.Sprintf("%s %q %q %o %q", names[o.code], o.path, o.other, o.mode, o.content)
}

// apply runs the operation under root. Failures (ENOENT, ENOTDIR, EISDIR...)
// are part of the game: the step just does nothing, alike on both trees.
func (o fsOp) apply(root string) {
	p := filepath.Join(root, o.path)
	switch o.code {
	case 0:
		_ = os.WriteFile(p, []byte(o.content), 0o644)
	case 1:
		_ = overlaytest.Append(p, o.content)
	case 2:
		_ = os.RemoveAll(p)
	case 3:
		_ = os.MkdirAll(p, 0o755)
	case 4:
		// mv semantics only where rename and the copy fallback agree: onto
		// a free name, not into itself.
		if o.path == o.other || strings.HasPrefix(o.other, o.path+"/") {
			return
		}
		q := filepath.Join(root, o.other)
		if _, err := os.Lstat(q); err == nil {
			return
		}
		_ = overlaytest.Move(p, q)
	case 5:
		_ = os.Chmod(p, o.mode)
	case 6:
		_ = os.Symlink(o.other, p)
	case 7:
		if err := os.RemoveAll(p); err == nil {
			_ = os.Mkdir(p, o.mode)
		}
	case 8:
		if data, err := os.ReadFile(p); err == nil {
			_ = os.WriteFile(p, data, 0o644)
		}
	case 9:
		_ = os.Truncate(p, 0)
	}
}

// decodeOps reads an operation sequence from bytes, four per operation, so
// any byte string is a valid program.
func decodeOps(data []byte) []fsOp {
	var ops []fsOp
	for len(data) >= 4 {
		b := data[:4]
		data = data[4:]
		op := fsOp{
			code:    b[0] % opCodes,
			path:    randomPaths[int(b[1])%len(randomPaths)],
			other:   randomPaths[int(b[2])%len(randomPaths)],
			content: "c" + strconv.Itoa(int(b[3])),
		}
		switch op.code {
		case 5:
			op.mode = randomFileModes[int(b[3])%len(randomFileModes)]
			if b[3]&4 != 0 {
				op.mode = randomDirModes[int(b[3])%len(randomDirModes)]
			}
		case 6:
			op.other = randomTargets[int(b[2])%len(randomTargets)]
		case 7:
			op.mode = randomDirModes[int(b[3])%len(randomDirModes)]
		}
		ops = append(ops, op)
	}
	return ops
}

// randomLowerSpec builds a lower tree of files, dirs and symlinks.
func randomLowerSpec(r *rand.Rand) string {
	var spec strings.Builder
	isDir := map[string]bool{"": true}
	for _, p := range randomPaths {
		parent := ""
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			parent = p[:i]
		}
		if !isDir[parent] {
			continue
		}
		switch n := r.IntN(10); {
		case n < 3:
			mode := randomFileModes[r.IntN(len(randomFileModes))]
			content := "lower " + strconv.Itoa(r.IntN(4))
			fmt.Fprintf(&spec, "file %q %04o %q\n", p, mode, content)
		case n < 6:
			fmt.Fprintf(&spec, "dir %q %04o\n", p, randomDirModes[r.IntN(len(randomDirModes))])
			isDir[p] = true
		case n < 7:
			fmt.Fprintf(&spec, "symlink %q %q\n", p, randomTargets[r.IntN(len(randomTargets))])
		}
	}
	return spec.String()
}

// checkKernelOps runs ops on a kernel overlay of lowerSpec and on a plain copy
// of the lower, and returns what breaks the reconstruction property: the
// merged view must equal the plain copy, and replaying ReadChanges onto a
// copy of the lower must reproduce the merged view.
func checkKernelOps(t *testing.T, lowerSpec string, ops []fsOp) (problems []string, changes int) {
	t.Helper()
	ctx := context.Background()
	s := scratchLayers(t, overlay.BackendKernel, "random")
	overlaytest.Build(t, s.Lower, lowerSpec)
	plain := filepath.Join(t.TempDir(), "plain")
	copyTreeCpA(t, s.Lower, plain)
	for _, op := range ops {
		op.apply(plain)
	}
	mountForTest(t, s)
	for _, op := range ops {
		op.apply(s.Target)
	}
	merged := overlaytest.Record(t, s.Target)
	if err := Unmount(ctx, s.Target); err != nil {
		t.Fatal(err)
	}
	if diff := overlaytest.DiffTrees(overlaytest.Record(t, plain), merged); diff != nil {
		problems = append(problems, "merged view differs from a plain copy (plain vs merged):")
		problems = append(problems, diff...)
	}
	layers := overlay.Layers{Upper: s.Upper, Lower: s.Lower}
	cs, err := overlay.ReadChanges(ctx, layers, overlay.ReadOptions{})
	if err != nil {
		return append(problems, "ReadChanges: "+err.Error()), 0
	}
	if cs.Dialect != overlay.DialectKernel {
		problems = append(problems, fmt.Sprintf("dialect detected as %q", cs.Dialect))
	}
	replayed := filepath.Join(t.TempDir(), "replayed")
	copyTreeCpA(t, s.Lower, replayed)
	if err := overlay.ApplyChangeSet(ctx, cs, layers, replayed); err != nil {
		return append(problems, "ApplyChangeSet: "+err.Error()), len(cs.Changes)
	}
	if diff := overlaytest.DiffTrees(merged, overlaytest.Record(t, replayed)); diff != nil {
		problems = append(problems, "replayed change set differs from the merged view (merged vs replayed):")
		problems = append(problems, diff...)
		for _, c := range cs.Changes {
			problems = append(problems, "  change: "+c.String())
		}
	}
	return problems, len(cs.Changes)
}

func describeRun(lowerSpec string, ops []fsOp) string {
	var b strings.Builder
	b.WriteString("lower:\n" + lowerSpec + "ops:\n")
	for _, op := range ops {
		b.WriteString("  " + op.String() + "\n")
	}
	return b.String()
}

// TestRandomKernelOps runs seeded random operation sequences on kernel
// overlay mounts. Set OVERLAY_RANDOM_SEED to replay a failing seed.
func TestRandomKernelOps(t *testing.T) {
	skipWithoutBackend(t, overlay.BackendKernel)
	seed := uint64(time.Now().UnixNano())
	runs := 60
	if env := os.Getenv("OVERLAY_RANDOM_SEED"); env != "" {
		v, err := strconv.ParseUint(env, 10, 64)
		if err != nil {
			t.Fatalf("OVERLAY_RANDOM_SEED: %v", err)
		}
		seed, runs = v, 1
	}
	total := 0
	for i := range runs {
		runSeed := seed + uint64(i)
		r := rand.New(rand.NewPCG(runSeed, runSeed))
		lowerSpec := randomLowerSpec(r)
		program := make([]byte, 4*(10+r.IntN(40)))
		for j := range program {
			program[j] = byte(r.Uint32())
		}
		ops := decodeOps(program)
		problems, changes := checkKernelOps(t, lowerSpec, ops)
		total += changes
		if problems != nil {
			t.Fatalf("seed %d (rerun with OVERLAY_RANDOM_SEED=%d):\n%s\n%s", runSeed, runSeed,
				strings.Join(problems, "\n"), describeRun(lowerSpec, ops))
		}
	}
	// The property is vacuous if the operations rarely change anything.
	if total < 3*runs {
		t.Errorf("%d runs made only %d changes in all", runs, total)
	}
	t.Logf("%d runs from seed %d: %d changes", runs, seed, total)
}

// FuzzKernelOps reads the fuzz input as an operation sequence (four bytes an
// operation) on a kernel overlay of a fixed random lower.
func FuzzKernelOps(f *testing.F) {
	f.Add([]byte{
		2, 0, 0, 0, // remove a
		3, 0, 0, 0, // mkdir a
		0, 4, 0, 9, // write a/a
	})
	f.Add([]byte{
		4, 1, 2, 0, // rename b -> s p
		6, 1, 1, 0, // symlink b -> b
		7, 2, 0, 1, // recreate dir s p
		5, 3, 0, 4, // chmod
		8, 5, 0, 0, // rewrite same
		9, 6, 0, 0, // truncate
		1, 7, 0, 3, // append
	})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox"))
	lowerSpec := randomLowerSpec(rand.New(rand.NewPCG(1, 2)))
	f.Fuzz(func(t *testing.T, program []byte) {
		skipWithoutBackend(t, overlay.BackendKernel)
		if len(program) > 4*64 {
			program = program[:4*64]
		}
		ops := decodeOps(program)
		if problems, _ := checkKernelOps(t, lowerSpec, ops); problems != nil {
			t.Fatalf("%s\n%s", strings.Join(problems, "\n"), describeRun(lowerSpec, ops))
		}
	})
}
