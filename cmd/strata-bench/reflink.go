package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/fsx"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine"
)

// cowSize is the size of the big file and of the changed binaries in the
// reflink group (-cow-size; issue 17 says 1 GB).
var cowSize int64 = 1 << 30

func init() {
	groups = append(groups, group{name: "reflink", run: benchReflink})
}

// cowFS is one loop-mounted file system image the reflink group makes.
type cowFS struct {
	kind string
	mkfs []string
	mnt  string
	img  string
}

// mountImage makes a sparse image of size bytes, formats and loop-mounts it.
func (b *bench) mountImage(f *cowFS, size int64) error {
	tool := "mkfs." + f.kind
	if _, err := exec.LookPath(tool); err != nil {
		return fmt.Errorf("%s is not installed (make deps installs xfsprogs and btrfs-progs): %w", tool, err)
	}
	base := filepath.Join(b.dir, "cow")
	f.img, f.mnt = filepath.Join(base, f.kind+".img"), filepath.Join(base, f.kind)
	_ = exec.Command("umount", f.mnt).Run()
	_ = os.Remove(f.img)
	if err := os.MkdirAll(f.mnt, 0o755); err != nil {
		return err
	}
	img, err := os.Create(f.img)
	if err != nil {
		return err
	}
	err = img.Truncate(size)
	img.Close()
	if err != nil {
		return err
	}
	if err := run(base, tool, append(append([]string{}, f.mkfs...), f.img)...); err != nil {
		return err
	}
	return run(base, "mount", "-o", "loop", f.img, f.mnt)
}

func (f *cowFS) unmount() {
	_ = exec.Command("umount", f.mnt).Run()
	_ = os.Remove(f.img)
}

// usedBytes is the space used on the file system of dir, after a syncfs.
func usedBytes(dir string) (int64, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return 0, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}

func mib(n int64) string { return fsx.HumanBytes(n) }

// benchReflink: on loop-mounted ext4, XFS (reflink=1) and btrfs images,
// each holding the state root and the source: copy-up of a one-byte edit to
// a big file through a World; snap, rollback and fork -n 8 of a World
// holding cowSize of changed binaries; with cp -a and cp --reflink=always
// of the same data as baselines. The space each used is in the notes: it is
// what says whether the kernel cloned.
func benchReflink(b *bench, _ []int) error {
	if os.Geteuid() != 0 {
		b.logf("reflink: loop mounts need root: skipped")
		return nil
	}
	runs := max(2, b.baseRuns)
	// Room for the source, runs Worlds' uppers, their objects, 8 forks
	// and the baselines' copies on a file system that copies.
	imgSize := max(4<<30, cowSize*int64(14+2*runs))
	for _, f := range []*cowFS{
		{kind: "ext4", mkfs: []string{"-q", "-F"}},
		{kind: "xfs", mkfs: []string{"-q", "-f", "-m", "reflink=1"}},
		{kind: "btrfs", mkfs: []string{"-q", "-f"}},
	} {
		if err := b.mountImage(f, imgSize); err != nil {
			return fmt.Errorf("%s image: %w", f.kind, err)
		}
		err := b.reflinkRows(f, runs)
		f.unmount()
		if err != nil {
			return fmt.Errorf("%s: %w", f.kind, err)
		}
	}
	return nil
}

func (b *bench) reflinkRows(f *cowFS, runs int) error {
	src, home := filepath.Join(f.mnt, "src"), filepath.Join(f.mnt, "home")
	cow, err := engine.CheckCopyOnWrite(home, src)
	if err != nil {
		return err
	}
	env := []string{"STRATA_HOME=" + home, "STRATA_CONFIG=" + filepath.Join(b.dir, "none.toml")}
	defer cleanupHome(home)
	nbins := 8
	binSize := cowSize / int64(nbins)
	b.logf("reflink: %s: writing a %s file and %d binaries of %s", f.kind, mib(cowSize), nbins, mib(binSize))
	setup := fmt.Sprintf("set -e; mkdir -p '%[1]s/bin'; head -c %[2]d /dev/urandom > '%[1]s/big.bin'; for i in $(seq 0 %[3]d); do head -c %[4]d /dev/urandom > '%[1]s/bin/b$i.bin'; done; echo hello > '%[1]s/README'",
		src, cowSize, nbins-1, binSize)
	if err := run(f.mnt, "sh", "-c", setup); err != nil {
		return err
	}
	lb := fmt.Sprintf("%s, %s", f.kind, mib(cowSize))
	space := func(before int64, what string, notes *[]string) error {
		after, err := usedBytes(f.mnt)
		if err != nil {
			return err
		}
		*notes = append(*notes, fmt.Sprintf("%s %s", what, mib(after-before)))
		return nil
	}
	strata := func(args ...string) ([]byte, error) {
		cmd := exec.Command(b.bin, args...)
		cmd.Env, cmd.Dir = append(os.Environ(), env...), src
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("strata %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return out, nil
	}
	timeStrata := func(args ...string) (time.Duration, []byte, error) {
		t := time.Now()
		out, err := strata(args...)
		return time.Since(t), out, err
	}

	// Copy-up: a one-byte edit to big.bin through a fresh World each run.
	var copyUp, cpA, cpRef []time.Duration
	var notes []string
	for i := 0; i < runs; i++ {
		w := fmt.Sprintf("cu%d", i)
		if _, err := strata("new", w, "--source", src); err != nil {
			return err
		}
		// Mounted before the timed edit, so the row is the copy-up.
		if _, err := strata("exec", w, "--", "true"); err != nil {
			return err
		}
		before, err := usedBytes(f.mnt)
		if err != nil {
			return err
		}
		d, _, err := timeStrata("exec", w, "--", "sh", "-c", "printf X | dd of=big.bin bs=1 seek=12345 conv=notrunc status=none")
		if err != nil {
			return err
		}
		copyUp = append(copyUp, d)
		if err := space(before, "copy-up", &notes); err != nil {
			return err
		}
		upperBig := filepath.Join(home, "worlds", w, "upper", "big.bin")
		if fi, err := os.Stat(upperBig); err != nil || fi.Size() != cowSize {
			return fmt.Errorf("copy-up: %s is not in the upper at full size: %v", upperBig, err)
		}
		if _, err := strata("rm", w, "--force", "--purge"); err != nil {
			return err
		}
	}
	for i := 0; i < runs; i++ {
		dst := filepath.Join(f.mnt, "cp-big.bin")
		before, err := usedBytes(f.mnt)
		if err != nil {
			return err
		}
		d, err := b.timeCmd(1, nil, "cp", func(int) []string { return []string{"-a", filepath.Join(src, "big.bin"), dst} }, nil, f.mnt)
		if err != nil {
			return err
		}
		cpA = append(cpA, d...)
		if err := space(before, "cp -a", &notes); err != nil {
			return err
		}
		_ = os.Remove(dst)
	}
	reflinkOK := cow.Snapshots
	if reflinkOK {
		for i := 0; i < runs; i++ {
			dst := filepath.Join(f.mnt, "ref-big.bin")
			d, err := b.timeCmd(1, nil, "cp", func(int) []string { return []string{"--reflink=always", filepath.Join(src, "big.bin"), dst} }, nil, f.mnt)
			if err != nil {
				return err
			}
			cpRef = append(cpRef, d...)
			_ = os.Remove(dst)
		}
	}
	doctor := strings.ReplaceAll(cow.String(), "\n", "; ")
	b.add(row{
		group: "reflink", name: "copy-up, 1-byte edit of the big file (" + lb + ")", strata: copyUp, baseName: "cp -a", baseline: cpA,
		note: "strata exec W -- dd, whole process, in a World mounted by an untimed exec before (a World each run); space used: " + strings.Join(notes, ", ") + "; doctor: " + doctor,
	})
	if reflinkOK {
		b.add(row{group: "reflink", name: "copy-up, 1-byte edit of the big file (" + lb + ")", strata: copyUp, baseName: "cp --reflink=always", baseline: cpRef})
	}

	// A World holding cowSize of changed binaries: snap, rollback, fork -n 8.
	var snap, rollback, fork, cpUp, cpUpRef []time.Duration
	notes = nil
	rewrite := fmt.Sprintf("set -e; for i in $(seq 0 %d); do head -c %d /dev/urandom > bin/b$i.bin; done", nbins-1, binSize)
	for i := 0; i < runs; i++ {
		w := fmt.Sprintf("bins%d", i)
		if _, err := strata("new", w, "--source", src); err != nil {
			return err
		}
		if _, err := strata("exec", w, "--", "sh", "-c", rewrite); err != nil {
			return err
		}
		before, err := usedBytes(f.mnt)
		if err != nil {
			return err
		}
		d, out, err := timeStrata("snap", w, "-m", "binaries", "--json")
		if err != nil {
			return err
		}
		var s struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(out, &s); err != nil || s.ID == "" {
			return fmt.Errorf("snap --json: no id (%v): %s", err, out)
		}
		snap = append(snap, d)
		if err := space(before, "snap", &notes); err != nil {
			return err
		}
		if _, err := strata("exec", w, "--", "sh", "-c", "rm -f bin/b0.bin; echo damage > bin/b1.bin"); err != nil {
			return err
		}
		before, _ = usedBytes(f.mnt)
		d, _, err = timeStrata("rollback", w, s.ID)
		if err != nil {
			return err
		}
		rollback = append(rollback, d)
		if err := space(before, "rollback", &notes); err != nil {
			return err
		}
		if fi, err := os.Stat(filepath.Join(home, "worlds", w, "upper", "bin", "b0.bin")); err != nil || fi.Size() != binSize {
			return fmt.Errorf("rollback did not bring back bin/b0.bin at %d bytes: %v", binSize, err)
		}
		before, _ = usedBytes(f.mnt)
		d, _, err = timeStrata("fork", w, "--snap", s.ID, "-n", "8", "--prefix", w+"f")
		if err != nil {
			return err
		}
		fork = append(fork, d)
		if err := space(before, "fork -n 8", &notes); err != nil {
			return err
		}
		upper := filepath.Join(home, "worlds", w, "upper")
		copyDir := filepath.Join(f.mnt, "upper-copy")
		before, _ = usedBytes(f.mnt)
		dd, err := b.timeCmd(1, func(int) error { return os.RemoveAll(copyDir) }, "cp", func(int) []string { return []string{"-a", upper, copyDir} }, nil, f.mnt)
		if err != nil {
			return err
		}
		cpUp = append(cpUp, dd...)
		if err := space(before, "cp -a upper", &notes); err != nil {
			return err
		}
		_ = os.RemoveAll(copyDir)
		if reflinkOK {
			dd, err := b.timeCmd(1, func(int) error { return os.RemoveAll(copyDir) }, "cp", func(int) []string { return []string{"-a", "--reflink=always", upper, copyDir} }, nil, f.mnt)
			if err != nil {
				return err
			}
			cpUpRef = append(cpUpRef, dd...)
			_ = os.RemoveAll(copyDir)
		}
		for j := 1; j <= 8; j++ { // the forks are PREFIX-1 .. PREFIX-8
			if _, err := strata("rm", fmt.Sprintf("%sf-%d", w, j), "--force", "--purge"); err != nil {
				return err
			}
		}
		if _, err := strata("rm", w, "--force", "--purge"); err != nil {
			return err
		}
	}
	base, baseline := "cp -a upper", cpUp
	if reflinkOK {
		base, baseline = "cp -a --reflink=always upper", cpUpRef
	}
	b.add(row{
		group: "reflink", name: "snap, World with changed binaries (" + lb + ")", strata: snap, baseName: "cp -a upper", baseline: cpUp,
		note: "space used per run: " + strings.Join(notes, ", "),
	})
	if reflinkOK {
		b.add(row{group: "reflink", name: "snap, World with changed binaries (" + lb + ")", strata: snap, baseName: base, baseline: baseline})
	}
	b.add(row{group: "reflink", name: "rollback to that snap (" + lb + ")", strata: rollback, baseName: base, baseline: baseline})
	b.add(row{group: "reflink", name: "fork -n 8 of that snap (" + lb + ")", strata: fork, baseName: base, baseline: baseline})
	return nil
}
