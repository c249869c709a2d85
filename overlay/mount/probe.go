package mount

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/overlay"
)

// ProbeResult says whether one backend works here and, if not, why.
type ProbeResult struct {
	Backend  overlay.Backend
	OK       bool
	Reason   string // why it fails; empty when OK
	Duration time.Duration
}

// ProbeOptions changes what Probe looks at; the zero value probes the real
// machine.
type ProbeOptions struct {
	// Backends to probe, in this order; nil probes all three.
	Backends []overlay.Backend
	// LookPath finds FUSE tools; nil means exec.LookPath.
	LookPath func(file string) (string, error)
	// DevFuse is the FUSE device; empty means /dev/fuse.
	DevFuse string
}

// probeOrder is the order of preference: kernel overlayfs is fastest and
// writes the kernel dialect; the FUSE tools are fallbacks.
var probeOrder = []overlay.Backend{overlay.BackendKernel, overlay.BackendFuseOverlayfs, overlay.BackendUnionfs}

// Probe tries every backend on scratch directories under scratch.
func Probe(ctx context.Context, scratch string) []ProbeResult {
	return ProbeWith(ctx, scratch, ProbeOptions{})
}

// ProbeWith is Probe with options. For each backend it mounts a scratch lower
// and upper, reads a lower file, writes a file, deletes a lower file, deletes
// and recreates a lower dir, checks the merged view, unmounts and checks that
// the upper holds the marks the backend's dialect promises.
func ProbeWith(ctx context.Context, scratch string, opts ProbeOptions) []ProbeResult {
	backends := opts.Backends
	if backends == nil {
		backends = probeOrder
	}
	if opts.LookPath == nil {
		opts.LookPath = exec.LookPath
	}
	if opts.DevFuse == "" {
		opts.DevFuse = "/dev/fuse"
	}
	results := make([]ProbeResult, 0, len(backends))
	for _, b := range backends {
		start := time.Now()
		err := probeBackend(ctx, scratch, b, opts)
		r := ProbeResult{Backend: b, OK: err == nil, Duration: time.Since(start)}
		if err != nil {
			r.Reason = err.Error()
		}
		results = append(results, r)
	}
	return results
}

// PickBackend chooses the backend to mount with: want itself when it works,
// or for BackendAuto (or "") the first that works in the order kernel,
// fuse-overlayfs, unionfs-fuse. The error wraps ErrNoBackend and lists why
// each candidate fails.
func PickBackend(results []ProbeResult, want overlay.Backend) (overlay.Backend, error) {
	byBackend := map[overlay.Backend]ProbeResult{}
	for _, r := range results {
		byBackend[r.Backend] = r
	}
	if want != "" && want != overlay.BackendAuto {
		r, probed := byBackend[want]
		switch {
		case !probed:
			return "", fmt.Errorf("backend %s: not probed: %w", want, ErrNoBackend)
		case !r.OK:
			return "", fmt.Errorf("backend %s does not work here: %s: %w", want, r.Reason, ErrNoBackend)
		}
		return want, nil
	}
	var reasons []string
	for _, b := range probeOrder {
		r, probed := byBackend[b]
		switch {
		case !probed:
			reasons = append(reasons, string(b)+": not probed")
		case r.OK:
			return b, nil
		default:
			reasons = append(reasons, string(b)+": "+r.Reason)
		}
	}
	return "", fmt.Errorf("%w: %s", ErrNoBackend, strings.Join(reasons, "; "))
}

// InUserNamespace reports whether this process runs in a user namespace
// other than the initial one, where a kernel overlay needs userxattr.
func InUserNamespace() bool {
	data, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	return strings.Join(strings.Fields(string(data)), " ") != "0 0 4294967295"
}

func probePrerequisites(b overlay.Backend, opts ProbeOptions) (bin string, err error) {
	switch b {
	case overlay.BackendKernel:
		if os.Geteuid() != 0 && !InUserNamespace() {
			return "", errors.New("not root and not in a user namespace: kernel overlayfs needs CAP_SYS_ADMIN (run as root, or rootless inside `unshare -r -m` with userxattr)")
		}
		return "", nil
	case overlay.BackendFuseOverlayfs, overlay.BackendUnionfs:
		bin, err := lookFuseTool(opts.LookPath, b)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(opts.DevFuse); err != nil {
			return "", fmt.Errorf("%s missing (modprobe fuse; in a container pass --device /dev/fuse): %w", opts.DevFuse, err)
		}
		return bin, nil
	}
	return "", fmt.Errorf("unknown backend %q", b)
}

func probeBackend(ctx context.Context, scratch string, b overlay.Backend, opts ProbeOptions) (err error) {
	bin, err := probePrerequisites(b, opts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	dir, err := os.MkdirTemp(scratch, "probe-"+string(b)+"-")
	if err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	defer func() {
		if rmErr := os.RemoveAll(dir); rmErr != nil && err == nil {
			err = fmt.Errorf("remove probe dir: %w", rmErr)
		}
	}()
	spec := MountSpec{
		Lower: filepath.Join(dir, "lower"), Upper: filepath.Join(dir, "upper"),
		Work: filepath.Join(dir, "work"), Target: filepath.Join(dir, "mnt"),
		Backend: b, Binary: bin, UserXattr: b == overlay.BackendKernel && InUserNamespace(),
	}
	if b == overlay.BackendUnionfs {
		spec.Work = ""
	}
	for _, d := range []string{spec.Lower, spec.Upper, spec.Work, spec.Target, filepath.Join(spec.Lower, "dir")} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("scratch dir: %w", err)
		}
	}
	for name, content := range map[string]string{"keep.txt": "lower keep", "gone.txt": "lower gone", "dir/old.txt": "lower old"} {
		if err := os.WriteFile(filepath.Join(spec.Lower, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("scratch lower: %w", err)
		}
	}
	if err := Mount(ctx, spec); err != nil {
		return err
	}
	mounted := true
	defer func() {
		if mounted {
			if uerr := Unmount(ctx, spec.Target); uerr != nil {
				_ = ForceUnmount(spec.Target)
			}
		}
	}()
	if err := probeOperations(spec.Target); err != nil {
		return err
	}
	if err := Unmount(ctx, spec.Target); err != nil {
		return err
	}
	mounted = false
	if err := checkLowerUntouched(spec.Lower); err != nil {
		return err
	}
	return checkUpperMarks(b, spec.Upper)
}

// probeOperations exercises the merged view the way a World does, then
// checks it shows exactly the result.
func probeOperations(mnt string) error {
	at := func(p string) string { return filepath.Join(mnt, p) }
	got, err := os.ReadFile(at("keep.txt"))
	if err != nil || string(got) != "lower keep" {
		return fmt.Errorf("read a lower file through the mount: got %q, %v", got, err)
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"write a new file", func() error { return os.WriteFile(at("new.txt"), []byte("new"), 0o644) }},
		{"delete a lower file", func() error { return os.Remove(at("gone.txt")) }},
		{"delete a lower dir", func() error { return os.RemoveAll(at("dir")) }},
		{"recreate the dir", func() error { return os.Mkdir(at("dir"), 0o755) }},
		{"write into the recreated dir", func() error { return os.WriteFile(at("dir/fresh.txt"), []byte("fresh"), 0o644) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s through the mount: %w", s.what, err)
		}
	}
	if got, err := os.ReadFile(at("new.txt")); err != nil || string(got) != "new" {
		return fmt.Errorf("read back new file: got %q, %v", got, err)
	}
	if _, err := os.Lstat(at("gone.txt")); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleted lower file still visible (lstat: %v)", err)
	}
	names, err := probeDirNames(at("dir"))
	if err != nil {
		return fmt.Errorf("list recreated dir: %w", err)
	}
	if !slices.Equal(names, []string{"fresh.txt"}) {
		return fmt.Errorf("recreated dir lists %q, want only fresh.txt (lower entries leak through)", names)
	}
	return nil
}

func probeDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func checkLowerUntouched(lower string) error {
	for _, p := range []string{"gone.txt", "dir/old.txt"} {
		if _, err := os.Lstat(filepath.Join(lower, p)); err != nil {
			return fmt.Errorf("the backend changed the lower layer: %s: %w", p, err)
		}
	}
	for _, p := range []string{"new.txt", "dir/fresh.txt"} {
		if _, err := os.Lstat(filepath.Join(lower, p)); err == nil {
			return fmt.Errorf("the backend wrote %s into the lower layer", p)
		}
	}
	return nil
}

// checkUpperMarks checks the upper holds the deletion and opaque-dir marks of
// the backend's dialect, which the change-set reader depends on.
func checkUpperMarks(b overlay.Backend, upper string) error {
	at := func(p string) string { return filepath.Join(upper, p) }
	if got, err := os.ReadFile(at("new.txt")); err != nil || string(got) != "new" {
		return fmt.Errorf("upper lacks new.txt: got %q, %v", got, err)
	}
	if got, err := os.ReadFile(at("dir/fresh.txt")); err != nil || string(got) != "fresh" {
		return fmt.Errorf("upper lacks dir/fresh.txt: got %q, %v", got, err)
	}
	d := b.Dialect()
	switch b {
	case overlay.BackendKernel, overlay.BackendFuseOverlayfs:
		if !overlay.UpperDeletes(d, upper, "gone.txt") {
			return fmt.Errorf("upper has no %s whiteout for a deleted lower file", d)
		}
		if !overlay.UpperOpaque(d, upper, "dir") {
			return fmt.Errorf("recreated dir in upper has no %s opaque mark", d)
		}
	case overlay.BackendUnionfs:
		meta, ok := overlay.UnionfsMetaRoot(upper)
		if !ok {
			return fmt.Errorf("upper has no %s meta tree (is cow on?)", overlay.UnionfsMetaDirs[0])
		}
		if m := overlay.UnionfsHiddenPath(meta, "gone.txt"); !probeIsRegular(at(m)) {
			return fmt.Errorf("upper lacks the %s file marking a deleted lower file", m)
		}
		if !overlay.UpperOpaque(d, upper, "dir") {
			return fmt.Errorf("upper lacks the %s dir marking a replaced dir", overlay.UnionfsHiddenPath(meta, "dir"))
		}
	}
	return nil
}

func probeIsRegular(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}
