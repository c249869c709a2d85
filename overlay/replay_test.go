package overlay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stratahq/strata/overlay/overlaytest"
)

// fuzzNames are few on purpose, so random paths collide; they include the
// odd names that must survive.
var fuzzNames = []string{"a", "b", "d e", "-x", "n\nl", "\xff", ".wh"}

// fuzzBytes hands out bytes of the fuzz input, zeros once it runs dry.
type fuzzBytes struct{ data []byte }

func (f *fuzzBytes) next() byte {
	if len(f.data) == 0 {
		return 0
	}
	b := f.data[0]
	f.data = f.data[1:]
	return b
}

func (f *fuzzBytes) path() string {
	depth := 1 + int(f.next()%3)
	parts := make([]string, depth)
	for i := range parts {
		parts[i] = fuzzNames[int(f.next())%len(fuzzNames)]
	}
	return strings.Join(parts, "/")
}

func (f *fuzzBytes) content() string {
	return []string{"", "one", "two\n", "one"}[f.next()%4]
}

func (f *fuzzBytes) mode() uint32 { return []uint32{0o644, 0o600, 0o755, 0o4755}[f.next()%4] }

// fuzzLayers writes a random lower and a random upper in dialect d, as the
// tool of that dialect could have left them. Operations that clash with what
// is already on disk are skipped.
func fuzzLayers(t testing.TB, data []byte) Layers {
	t.Helper()
	f := &fuzzBytes{data: data}
	dialects := []Dialect{DialectKernel, DialectFuseOverlayfs, DialectUnionfs, DialectOCI}
	dir := t.TempDir()
	l := Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower"), Dialect: dialects[f.next()%4]}
	for _, d := range []string{l.Upper, l.Lower} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mkParents := func(root, p string) bool {
		return os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755) == nil
	}
	for n := int(f.next() % 12); n > 0; n-- {
		p := f.path()
		full := filepath.Join(l.Lower, p)
		if !mkParents(l.Lower, p) {
			continue
		}
		switch f.next() % 3 {
		case 0:
			if os.WriteFile(full, []byte(f.content()), 0o600) == nil {
				_ = syscall.Chmod(full, f.mode())
			}
		case 1:
			_ = os.Mkdir(full, 0o755)
		case 2:
			_ = os.Symlink(f.content(), full)
		}
	}
	upperPath := func(p string) string { return filepath.Join(l.Upper, p) }
	whiteout := func(p string) {
		full := upperPath(p)
		name := filepath.Base(p)
		switch l.Dialect {
		case DialectKernel:
			if f.next()%2 == 0 {
				_ = syscall.Mknod(full, syscall.S_IFCHR, 0)
			} else if os.WriteFile(full, nil, 0o600) == nil {
				_ = syscall.Setxattr(full, "trusted.overlay.whiteout", nil, 0)
			}
		case DialectFuseOverlayfs:
			if f.next()%2 == 0 {
				_ = syscall.Mknod(full, syscall.S_IFCHR, 0)
			} else {
				_ = os.WriteFile(filepath.Join(filepath.Dir(full), ".wh."+name), nil, 0o644)
			}
		case DialectOCI:
			_ = os.WriteFile(filepath.Join(filepath.Dir(full), ".wh."+name), nil, 0o644)
		case DialectUnionfs:
			marker := filepath.Join(l.Upper, ".unionfs-fuse", p+"_HIDDEN~")
			if os.MkdirAll(filepath.Dir(marker), 0o755) == nil {
				if f.next()%2 == 0 {
					_ = os.Mkdir(marker, 0o755)
				} else {
					_ = os.WriteFile(marker, nil, 0o644)
				}
			}
		}
	}
	for n := int(f.next() % 12); n > 0; n-- {
		p := f.path()
		full := upperPath(p)
		if l.Dialect == DialectUnionfs {
			if _, err := os.Lstat(filepath.Join(l.Upper, ".unionfs-fuse", p+"_HIDDEN~")); err == nil && f.next()%2 == 0 {
				continue // unionfs drops a marker when it recreates the path; sometimes keep it
			}
		}
		op := f.next() % 8
		if op != 5 && !mkParents(l.Upper, p) {
			continue
		}
		switch op {
		case 0, 1: // copy-up or new file, same or new content
			if os.WriteFile(full, []byte(f.content()), 0o600) == nil {
				_ = syscall.Chmod(full, f.mode())
			}
		case 2:
			_ = os.Mkdir(full, 0o755)
		case 3:
			_ = os.Symlink(f.content(), full)
		case 4, 5:
			if l.Dialect == DialectUnionfs || mkParents(l.Upper, p) {
				whiteout(p)
			}
		case 6: // an opaque dir in the dialect's way
			if os.Mkdir(full, 0o755) != nil {
				continue
			}
			switch l.Dialect {
			case DialectKernel:
				_ = syscall.Setxattr(full, "trusted.overlay.opaque", []byte("y"), 0)
			case DialectFuseOverlayfs, DialectOCI:
				_ = os.WriteFile(filepath.Join(full, ".wh..wh..opq"), nil, 0o644)
			case DialectUnionfs:
				whiteout(p)
				_ = os.Mkdir(filepath.Join(l.Upper, ".unionfs-fuse", p+"_HIDDEN~"), 0o755)
			}
		case 7: // a mode-only change of a lower file, kept as metacopy by the kernel
			info, err := os.Lstat(filepath.Join(l.Lower, p))
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			if l.Dialect == DialectKernel && f.next()%2 == 0 {
				if os.WriteFile(full, nil, 0o600) == nil && os.Truncate(full, info.Size()) == nil {
					_ = syscall.Setxattr(full, "trusted.overlay.metacopy", nil, 0)
					_ = syscall.Chmod(full, f.mode())
				}
			} else if data, err := os.ReadFile(filepath.Join(l.Lower, p)); err == nil {
				if os.WriteFile(full, data, 0o600) == nil {
					_ = syscall.Chmod(full, f.mode())
				}
			}
		}
	}
	return l
}

// checkChangeSetAgainstView is the fuzz property: the change set is sorted,
// has no duplicate or marker paths, and replaying it on a copy of the lower
// gives exactly the view Layers resolves.
func checkChangeSetAgainstView(t testing.TB, l Layers) {
	t.Helper()
	for _, opts := range []ReadOptions{{}, {SkipCompare: true}} {
		cs, err := ReadChanges(context.Background(), l, opts)
		if err != nil {
			t.Fatalf("ReadChanges(%+v): %v\nupper:\n%s", opts, err, overlaytest.Dump(t, l.Upper))
		}
		checkInvariants(t, cs)
		view := recordView(t, l)
		checkReplay(t, l, cs, view)
		if t.Failed() {
			t.Fatalf("dialect %s\nlower:\n%s\nupper:\n%s\nchanges:\n%s", l.Dialect,
				overlaytest.Dump(t, l.Lower), overlaytest.Dump(t, l.Upper), formatChanges(cs))
		}
	}
}

func FuzzReadChanges(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("needs root for whiteout devices and trusted xattrs")
	}
	f.Add([]byte{0, 5, 0, 0, 0, 1, 1, 0, 1, 2, 0, 4, 0, 0, 0, 6, 0, 1, 1, 0})
	f.Add([]byte{1, 6, 1, 0, 1, 1, 0, 2, 1, 1, 0, 6, 1, 0, 0, 0, 2, 0, 0, 6, 1, 0, 0, 1})
	f.Add([]byte{2, 8, 2, 0, 1, 2, 1, 0, 3, 0, 0, 0, 1, 2, 8, 1, 0, 1, 4, 0, 1, 0, 6, 1, 3, 1, 2})
	f.Add([]byte{3, 9, 1, 3, 0, 5, 0, 4, 2, 6, 1, 0, 1, 11, 1, 3, 4, 5, 0, 6, 0, 3, 2, 7, 0, 1, 6})
	f.Add([]byte("kernel metacopy and opaque \x00\x07\x01\x02\x03\x06\x07\x07\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkChangeSetAgainstView(t, fuzzLayers(t, data))
	})
}

// TestRandomLayers runs the fuzz property on a fixed sweep of inputs so
// plain `go test` exercises it in every dialect.
func TestRandomLayers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for whiteout devices and trusted xattrs")
	}
	for seed := 0; seed < 64; seed++ {
		data := make([]byte, 64)
		x := uint32(seed*2654435761 + 1)
		for i := range data {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			data[i] = byte(x)
		}
		data[0] = byte(seed % 4)
		checkChangeSetAgainstView(t, fuzzLayers(t, data))
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

func TestApplyChangeSetRefusesUnsafePaths(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	dst := filepath.Join(dir, "dst")
	for _, d := range []string{outside, dst, filepath.Join(dir, "upper"), filepath.Join(dir, "lower")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dst, "link")); err != nil {
		t.Fatal(err)
	}
	l := Layers{Upper: filepath.Join(dir, "upper"), Lower: filepath.Join(dir, "lower"), Dialect: DialectKernel}
	for _, p := range []string{"../escape", "/abs", "a/../../b", "link/file", ""} {
		cs := &ChangeSet{Dialect: DialectKernel, Changes: []Change{{Path: p, Kind: Added, Type: TypeDir, Mode: os.ModeDir | 0o755}}}
		if err := ApplyChangeSet(context.Background(), cs, l, dst); err == nil {
			t.Errorf("ApplyChangeSet accepted path %q", p)
		}
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 0 {
		t.Errorf("something was written outside dst: %v %v", entries, err)
	}
	if ctxErr := ApplyChangeSet(cancelledCtx(), &ChangeSet{Changes: []Change{{Path: "x", Kind: Added, Type: TypeDir, Mode: os.ModeDir | 0o755}}}, l, dst); !errors.Is(ctxErr, context.Canceled) {
		t.Errorf("ApplyChangeSet with a cancelled context = %v, want context.Canceled", ctxErr)
	}
}

func cancelledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
