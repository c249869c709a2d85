package mount

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/overlay"
)

// MountSpec describes one overlay mount of a lower tree and a World's upper
// layer at Target.
type MountSpec struct {
	Lower   string
	Upper   string
	Work    string // kernel and fuse-overlayfs only; unionfs-fuse keeps no work dir
	Target  string
	Backend overlay.Backend
	// UserXattr keeps the kernel's overlay xattrs under user.overlay.*, which
	// is what a kernel mount inside a user namespace needs.
	UserXattr bool
	// Options are extra options (for the kernel, KernelForcedOptions
	// follow them and win): "key=value" or "flag" for the kernel,
	// -o options for the FUSE tools.
	Options []string
	// Binary is the FUSE tool to run; empty means looking it up on PATH.
	Binary string
}

// KernelForcedOptions end every kernel overlay mount strata makes, after
// any caller's Options so they win: metacopy=off means no file in the upper
// ever carries a metacopy or redirect xattr (a chown or chmod copies the
// data up; only directories get redirects), which lets a World that records
// it (world.toml metacopy_off) read the xattrs of its upper's directories
// only. Every other kernel mount of an overlay in strata must pass them too.
var KernelForcedOptions = []string{"metacopy=off"}

var (
	// ErrUnsupportedPath is returned when a path holds a character the
	// backend's command line cannot carry (a colon separates layers).
	ErrUnsupportedPath = errors.New("path cannot be passed to this backend")
	// ErrNoBackend is returned by PickBackend when no usable backend is found.
	ErrNoBackend = errors.New("no usable overlay backend")
)

// MountError tells which mount or unmount failed and what the kernel or the
// FUSE tool said about it.
type MountError struct {
	Op      string // "mount" or "unmount"
	Backend overlay.Backend
	Lower   string
	Upper   string
	Work    string
	Target  string
	Detail  string // the tool's stderr or the kernel's fs_context messages
	Err     error
}

func (e *MountError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Backend != "" {
		b.WriteString(" " + string(e.Backend))
	}
	if e.Op == "mount" {
		fmt.Fprintf(&b, " lower=%q upper=%q", e.Lower, e.Upper)
		if e.Work != "" {
			fmt.Fprintf(&b, " work=%q", e.Work)
		}
		b.WriteString(" on")
	}
	fmt.Fprintf(&b, " %q: %v", e.Target, e.Err)
	if d := strings.TrimSpace(e.Detail); d != "" {
		b.WriteString(": " + strings.ReplaceAll(d, "\n", "; "))
	}
	return b.String()
}

func (e *MountError) Unwrap() error { return e.Err }

// mountWait bounds how long a FUSE daemon may take to show up in mountinfo
// after its launcher returned, and how long an EBUSY unmount is retried.
const mountWait = 5 * time.Second

// Mount mounts s and returns once the mount is visible in
// /proc/self/mountinfo.
func Mount(ctx context.Context, s MountSpec) error {
	s, err := s.absolute()
	if err != nil {
		return err
	}
	fail := func(detail string, err error) error {
		return &MountError{
			Op: "mount", Backend: s.Backend, Lower: s.Lower, Upper: s.Upper, Work: s.Work,
			Target: s.Target, Detail: detail, Err: err,
		}
	}
	before, err := mountsAt(s.Target)
	if err != nil {
		return fail("", err)
	}
	switch s.Backend {
	case overlay.BackendKernel:
		if detail, err := mountKernel(s); err != nil {
			return fail(detail, err)
		}
	case overlay.BackendFuseOverlayfs, overlay.BackendUnionfs:
		args, err := fuseArgs(s)
		if err != nil {
			return fail("", err)
		}
		bin := s.Binary
		if bin == "" {
			if bin, err = lookFuseTool(exec.LookPath, s.Backend); err != nil {
				return fail("", err)
			}
		}
		if detail, err := runFuseTool(ctx, bin, args); err != nil {
			return fail(detail, err)
		}
	default:
		return fail("", fmt.Errorf("unknown backend %q (pick one with PickBackend)", s.Backend))
	}
	if err := waitMounted(ctx, s.Target, len(before)); err != nil {
		return fail("", err)
	}
	return nil
}

func (s MountSpec) absolute() (MountSpec, error) {
	for _, p := range []*string{&s.Lower, &s.Upper, &s.Work, &s.Target} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return s, fmt.Errorf("mount %s: %w", *p, err)
		}
		*p = abs
	}
	missing := ""
	switch {
	case s.Lower == "":
		missing = "lower"
	case s.Upper == "":
		missing = "upper"
	case s.Target == "":
		missing = "target"
	case s.Work == "" && s.Backend != overlay.BackendUnionfs:
		missing = "work"
	}
	if missing != "" {
		return s, fmt.Errorf("mount %s: no %s dir given", s.Backend, missing)
	}
	return s, nil
}

// fuseToolNames lists the executables of each FUSE backend, preferred first,
// and the Debian package that ships them.
var fuseToolNames = map[overlay.Backend]struct {
	names   []string
	pkgName string
}{
	overlay.BackendFuseOverlayfs: {[]string{"fuse-overlayfs"}, "fuse-overlayfs"},
	overlay.BackendUnionfs:       {[]string{"unionfs", "unionfs-fuse"}, "unionfs-fuse"},
}

func lookFuseTool(lookPath func(string) (string, error), b overlay.Backend) (string, error) {
	tool := fuseToolNames[b]
	for _, name := range tool.names {
		if p, err := lookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH (apt-get install %s)", tool.names[0], tool.pkgName)
}

// fuseArgs builds the command line of a FUSE backend. libfuse splits -o on
// commas and honours backslash escapes; the layer lists split on colons with
// no escape at all, so a colon there is refused rather than misread.
func fuseArgs(s MountSpec) ([]string, error) {
	switch s.Backend {
	case overlay.BackendFuseOverlayfs:
		if strings.Contains(s.Lower, ":") {
			return nil, fmt.Errorf("lower %q contains ':': %w", s.Lower, ErrUnsupportedPath)
		}
		opts := "lowerdir=" + escapeFuseOpt(s.Lower) + ",upperdir=" + escapeFuseOpt(s.Upper) +
			",workdir=" + escapeFuseOpt(s.Work)
		for _, o := range s.Options {
			opts += "," + o
		}
		return []string{"-o", opts, s.Target}, nil
	case overlay.BackendUnionfs:
		for _, p := range []string{s.Lower, s.Upper} {
			if strings.Contains(p, ":") {
				return nil, fmt.Errorf("branch %q contains ':': %w", p, ErrUnsupportedPath)
			}
		}
		// cow records deletions (without it unionfs-fuse cannot delete lower
		// Files at all); hide_meta_files keeps its .unionfs-fuse tree and
		// .fuse_hidden files out of the merged view.
		opts := strings.Join(append([]string{"cow", "hide_meta_files"}, s.Options...), ",")
		return []string{"-o", opts, s.Upper + "=RW:" + s.Lower + "=RO", s.Target}, nil
	}
	return nil, fmt.Errorf("%q is not a FUSE backend", s.Backend)
}

func escapeFuseOpt(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`)
	return r.Replace(s)
}

// runFuseTool runs a FUSE tool that daemonizes once its mount is in place.
// Its output goes to a file, not a pipe: the daemon inherits the descriptor
// and would keep a pipe open for as long as the mount lives.
func runFuseTool(ctx context.Context, bin string, args []string) (string, error) {
	out, err := os.CreateTemp("", "strata-mount-*.log")
	if err != nil {
		return "", fmt.Errorf("create log for %s: %w", bin, err)
	}
	defer func() {
		_ = out.Close()
		_ = os.Remove(out.Name())
	}()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	runErr := cmd.Run()
	detail, _ := os.ReadFile(out.Name())
	if runErr != nil {
		return string(detail), fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), runErr)
	}
	return string(detail), nil
}

func waitMounted(ctx context.Context, target string, before int) error {
	deadline := time.Now().Add(mountWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		now, err := mountsAt(target)
		if err != nil {
			return err
		}
		if len(now) > before {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mount did not appear in /proc/self/mountinfo within %s", mountWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for mount: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
}

// Unmount unmounts the topmost mount at target, retrying briefly while it is
// busy. A target with nothing mounted is not an error, so cleanup can call it
// unconditionally.
func Unmount(ctx context.Context, target string) error {
	return unmountTop(ctx, target, false)
}

// ForceUnmount detaches the topmost mount at target lazily (MNT_DETACH): it
// disappears from the tree now and is torn down when its last user leaves.
func ForceUnmount(target string) error {
	return unmountTop(context.Background(), target, true)
}

// MountedAt reports whether something is mounted at target and, if so, the
// file system type of the topmost mount ("overlay", "fuse.fuse-overlayfs",
// "fuse.unionfs").
func MountedAt(target string) (fstype string, mounted bool, err error) {
	mounts, err := mountsAt(target)
	if err != nil || len(mounts) == 0 {
		return "", false, err
	}
	return mounts[len(mounts)-1].FSType, true, nil
}

// MountInfo is one line of /proc/self/mountinfo: the mount's id and its
// parent's, where it is mounted, its file system type and source.
type MountInfo struct {
	ID, Parent int
	MountPoint string
	FSType     string
	Source     string
}

// mountsAt lists the mounts at target, bottom first. A target that does not
// exist has none.
func mountsAt(target string) ([]MountInfo, error) {
	abs, ok, err := mountPoint(target)
	if err != nil || !ok {
		return nil, err
	}
	t, err := ReadTable()
	if err != nil {
		return nil, err
	}
	return t.at[abs], nil
}

// ParseMountInfo reads the mountinfo format (proc(5)): the mount's id and
// its parent's are fields 1 and 2, the mount point is field 5, the file
// system type and source follow the "-" separator, and space, tab, newline
// and backslash in paths are written as \ooo octal.
func ParseMountInfo(r io.Reader) ([]MountInfo, error) {
	var out []MountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), " ")
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+2 >= len(fields) {
			return nil, fmt.Errorf("read mount table: malformed line %q", sc.Text())
		}
		id, err := strconv.Atoi(fields[0])
		if err != nil {
			return nil, fmt.Errorf("read mount table: malformed line %q", sc.Text())
		}
		parent, err := strconv.Atoi(fields[1])
		if err != nil {
			return nil, fmt.Errorf("read mount table: malformed line %q", sc.Text())
		}
		out = append(out, MountInfo{
			ID: id, Parent: parent,
			MountPoint: unescapeMountInfo(fields[4]),
			FSType:     unescapeMountInfo(fields[sep+1]),
			Source:     unescapeMountInfo(fields[sep+2]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return out, nil
}

func unescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && mountInfoIsOctal(s[i+1]) && mountInfoIsOctal(s[i+2]) && mountInfoIsOctal(s[i+3]) {
			b = append(b, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func mountInfoIsOctal(c byte) bool { return c >= '0' && c <= '7' }

// MountRecordName is the file, in a World's directory, that records how its
// overlay was mounted.
const MountRecordName = "mount.json"

// MountRecord says which backend mounted a World, so the upper is later read
// in the dialect that backend wrote.
type MountRecord struct {
	Backend   overlay.Backend `json:"backend"`
	Dialect   overlay.Dialect `json:"dialect"`
	Target    string          `json:"target"`
	Options   []string        `json:"options,omitempty"`
	MountedAt time.Time       `json:"mounted_at"`
}

// WriteMountRecord stores r as dir/mount.json, atomically. An empty Dialect
// is filled in from the backend.
func WriteMountRecord(dir string, r MountRecord) error {
	if r.Dialect == overlay.DialectAuto {
		r.Dialect = r.Backend.Dialect()
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode mount record: %w", err)
	}
	return overlay.WriteFileAtomic(filepath.Join(dir, MountRecordName), append(data, '\n'), 0o644)
}

// ReadMountRecord loads dir/mount.json; a missing record wraps fs.ErrNotExist.
func ReadMountRecord(dir string) (MountRecord, error) {
	var r MountRecord
	path := filepath.Join(dir, MountRecordName)
	data, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("read mount record: %w", err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("decode mount record %s: %w", path, err)
	}
	return r, nil
}
