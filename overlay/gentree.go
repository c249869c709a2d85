package overlay

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
)

// GenerateTree writes a synthetic source tree under dir for benchmarks:
// Files text files spread over dirs directories (grouped 50 to a parent, so
// paths look like g0003/d00172/f0012345.txt), with log-normal sizes of median
// ~3.6 KB. The same arguments always give the same tree. Contents are slices
// of one shared text block, so writing is cheap.
func GenerateTree(dir string, files, dirs int, seed int64) error {
	if files < 0 || dirs <= 0 {
		return fmt.Errorf("generate tree in %s: need files >= 0 and dirs > 0, got %d and %d", dir, files, dirs)
	}
	rng := rand.New(rand.NewSource(seed))
	block := textBlock(rng, 1<<20)
	dirPaths := make([]string, dirs)
	for i := range dirPaths {
		dirPaths[i] = filepath.Join(dir, fmt.Sprintf("g%04d", i/50), fmt.Sprintf("d%05d", i))
		if err := os.MkdirAll(dirPaths[i], 0o755); err != nil {
			return fmt.Errorf("generate tree: %w", err)
		}
	}
	const median, sigma = 3600.0, 0.8
	for i := 0; i < files; i++ {
		size := int(math.Exp(math.Log(median) + sigma*rng.NormFloat64()))
		size = min(max(size, 32), len(block)/2)
		off := rng.Intn(len(block) - size)
		header := fmt.Sprintf("// file %d\n", i)
		data := make([]byte, 0, len(header)+size)
		data = append(append(data, header...), block[off:off+size]...)
		name := filepath.Join(dirPaths[i%dirs], fmt.Sprintf("f%07d.txt", i))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			return fmt.Errorf("generate tree: %w", err)
		}
	}
	return nil
}

// textBlock makes n bytes of code-like text lines.
func textBlock(rng *rand.Rand, n int) []byte {
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "world", "layer", "upper", "lower", "x", "y", ":=", "{", "}", "(", ")", "0", "1"}
	b := make([]byte, 0, n+64)
	for len(b) < n {
		lineWords := 1 + rng.Intn(10)
		for w := 0; w < lineWords; w++ {
			if w > 0 {
				b = append(b, ' ')
			}
			b = append(b, words[rng.Intn(len(words))]...)
		}
		b = append(b, '\n')
	}
	return b[:n]
}
