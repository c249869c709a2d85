package cuberun

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/overlay"
)

// cubeDrivers is the order overlay drivers are tried in a guest.
var cubeDrivers = []overlay.Backend{overlay.BackendKernel, overlay.BackendUnionfs, overlay.BackendFuseOverlayfs}

// guestOverlayScript mounts the World's overlay in the guest, idempotently:
// a mount of the right kind already at the mount point that passes the probe
// is kept (the usual case, one quick command per exec); a stale one (after a
// rollback, or the upper restored under it) is taken down; then each driver
// is tried in order until one passes the probe: the source visible through
// the mount, a file written there reaching the host's upper, and deleted
// again without a trace. FUSE tools daemonize, so their output goes to a
// file: a pipe would be held open by the daemon and never end the exec.
//
// Arguments: lower, World dir, mount point, the mount point as mountinfo
// escapes it, drivers (space separated), "force" to remount regardless.
// Prints "strata-overlay: DRIVER kept|mounted"; on failure each driver's
// reason goes to stderr and the exit status is 1.
const guestOverlayScript = `set -u
L=$1 WD=$2 M=$3 EM=$4 DRIVERS=$5 FORCE=$6
U=$WD/upper W=$WD/work
log=/tmp/.strata-overlay.$$.log
top_type() {
	awk -v m="$EM" '$5 == m { i = 7; while ($i != "-") i++; t = $(i + 1) } END { print t }' /proc/self/mountinfo
}
driver_of() {
	case $1 in
	overlay) echo kernel ;;
	fuse.unionfs*) echo unionfs-fuse ;;
	fuse.fuse-overlayfs) echo fuse-overlayfs ;;
	esac
}
probe() {
	p=.strata-probe-$$
	first=$(ls -A "$L" 2>/dev/null | head -n 1)
	if [ -n "$first" ] && ! [ -e "$M/$first" ] && ! [ -L "$M/$first" ]; then
		echo "the source is not visible through $M" >&2; return 1
	fi
	if ! echo strata > "$M/$p" 2>/dev/null; then echo "cannot write in $M" >&2; return 1; fi
	if [ "$(cat "$U/$p" 2>/dev/null)" != strata ]; then
		rm -f "$M/$p"; echo "a file written in $M does not reach the upper layer" >&2; return 1
	fi
	if ! rm -f "$M/$p"; then echo "cannot delete in $M" >&2; return 1; fi
	if [ -e "$M/$p" ] || [ -e "$U/$p" ]; then echo "a deleted file is still there" >&2; return 1; fi
	return 0
}
n=0
while t=$(top_type); [ -n "$t" ] && [ -n "$(driver_of "$t")" ] && [ $n -lt 8 ]; do
	d=$(driver_of "$t")
	case " $DRIVERS " in
	*" $d "*) if [ "$FORCE" != force ] && probe 2>/dev/null; then echo "strata-overlay: $d kept"; exit 0; fi ;;
	esac
	umount "$M" 2>/dev/null || umount -l "$M" 2>/dev/null || { echo "cannot unmount the stale $t mount at $M" >&2; exit 1; }
	n=$((n + 1))
done
mkdir -p "$M" "$U" "$W" || exit 1
for d in $DRIVERS; do
	: > "$log"
	case $d in
	kernel)
		mount -t overlay overlay -o "lowerdir=$L,upperdir=$U,workdir=$W" "$M" > "$log" 2>&1 ;;
	unionfs-fuse)
		bin=$(command -v unionfs || command -v unionfs-fuse) || { echo "unionfs-fuse: not installed in the guest" >&2; continue; }
		"$bin" -o cow,hide_meta_files "$U=RW:$L=RO" "$M" < /dev/null > "$log" 2>&1 ;;
	fuse-overlayfs)
		command -v fuse-overlayfs > /dev/null || { echo "fuse-overlayfs: not installed in the guest" >&2; continue; }
		fuse-overlayfs -o "lowerdir=$L,upperdir=$U,workdir=$W" "$M" < /dev/null > "$log" 2>&1 ;;
	*)
		echo "$d: unknown driver" >&2; continue ;;
	esac
	if [ $? -eq 0 ]; then
		i=0
		while [ -z "$(top_type)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		if probe 2>> "$log"; then rm -f "$log"; echo "strata-overlay: $d mounted"; exit 0; fi
		umount "$M" 2>/dev/null || umount -l "$M" 2>/dev/null
	fi
	echo "$d: $(tr '\n' ' ' < "$log")" >&2
done
rm -f "$log"
exit 1
`

// mountinfoEscape escapes a path the way /proc/self/mountinfo shows it.
func mountinfoEscape(p string) string {
	r := strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`)
	return r.Replace(p)
}

// guestDrivers is what a World may be mounted with: the one recorded (its
// upper is in that dialect), else a forced one, else every driver in order.
func guestDrivers(w *World) []overlay.Backend {
	if w.Cube != nil && w.Cube.Driver != "" {
		return []overlay.Backend{overlay.Backend(w.Cube.Driver)}
	}
	if w.MountBackend != "" && w.MountBackend != overlay.BackendAuto {
		return []overlay.Backend{w.MountBackend}
	}
	return cubeDrivers
}

// GuestOverlayError says why no driver could mount the World in the guest.
type GuestOverlayError struct {
	Sandbox string
	Drivers []overlay.Backend
	Detail  string // each driver's reason, from the guest
}

func (e *GuestOverlayError) Error() string {
	names := make([]string, len(e.Drivers))
	for i, d := range e.Drivers {
		names[i] = string(d)
	}
	return fmt.Sprintf("set up the overlay in sandbox %s: no driver works (tried %s): %s",
		e.Sandbox, strings.Join(names, ", "), strings.ReplaceAll(strings.TrimSpace(e.Detail), "\n", "; "))
}

// setupGuestOverlay runs the script and returns the driver in use and
// whether it mounted anew. env is added to the command's environment.
func (e *Runtime) setupGuestOverlay(ctx context.Context, c *cube.Client, w *World, sb *cube.Sandbox, force bool, env map[string]string) (overlay.Backend, bool, error) {
	drivers := guestDrivers(w)
	names := make([]string, len(drivers))
	for i, d := range drivers {
		names[i] = string(d)
	}
	g := e.cubeGuestDir()
	mp := e.cubeMountPoint(w)
	forceArg := ""
	if force {
		forceArg = "force"
	}
	cctx, cancel := context.WithTimeout(ctx, cubeCallTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	defer addCubeTime(ctx, time.Now())
	res, err := c.Exec(cctx, sb, cube.ExecRequest{
		Cmd:  "/bin/sh",
		Args: []string{"-c", guestOverlayScript, "strata-overlay", g + "/lower", g + "/world", mp, mountinfoEscape(mp), strings.Join(names, " "), forceArg},
		Envs: env, Cwd: "/",
	}, &out, &errOut)
	if err != nil {
		return "", false, fmt.Errorf("set up the overlay in sandbox %s: %w", sb.SandboxID, err)
	}
	if res.ExitCode != 0 {
		return "", false, &GuestOverlayError{Sandbox: sb.SandboxID, Drivers: drivers, Detail: errOut.String()}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		rest, ok := strings.CutPrefix(line, "strata-overlay: ")
		if !ok {
			continue
		}
		name, state, _ := strings.Cut(rest, " ")
		return overlay.Backend(name), state == "mounted", nil
	}
	return "", false, fmt.Errorf("set up the overlay in sandbox %s: unexpected output %q", sb.SandboxID, out.String())
}

// ensureOverlayLocked mounts the World in its guest if needed and notes in
// w the driver (and so the dialect the upper is read in) the first time;
// changed says world.toml needs writing.
func (e *Runtime) ensureOverlayLocked(ctx context.Context, c *cube.Client, w *World, sb *cube.Sandbox, force bool) (changed bool, err error) {
	driver, _, err := e.setupGuestOverlay(ctx, c, w, sb, force, nil)
	if err != nil {
		return false, err
	}
	if w.Cube.Driver != string(driver) || w.MountBackend != driver || w.Dialect != driver.Dialect() {
		w.Cube.Driver, w.MountBackend, w.Dialect = string(driver), driver, driver.Dialect()
		return true, nil
	}
	return false, nil
}

// ensureOverlayAndRecord is ensureOverlayLocked, then world.toml if needed.
func (e *Runtime) ensureOverlayAndRecord(ctx context.Context, c *cube.Client, w *World, sb *cube.Sandbox, force bool) error {
	changed, err := e.ensureOverlayLocked(ctx, c, w, sb, force)
	if err == nil && changed {
		err = writeWorld(e.Paths, w)
	}
	return err
}

// guestUnmountScript takes strata's overlay mounts at the mount point down
// (lazily when busy). Arguments: mount point, its mountinfo escape.
const guestUnmountScript = `M=$1 EM=$2
i=0
while [ $i -lt 8 ]; do
	t=$(awk -v m="$EM" '$5 == m { i = 7; while ($i != "-") i++; t = $(i + 1) } END { print t }' /proc/self/mountinfo)
	case "$t" in
	overlay | fuse.unionfs* | fuse.fuse-overlayfs) ;;
	*) exit 0 ;;
	esac
	umount "$M" 2>/dev/null || umount -l "$M" || exit 1
	i=$((i + 1))
done
exit 1
`

// cubeUnmountGuest takes the World's overlay down in its guest, for strata
// to change the upper from the host (an overlay must not see its layers
// change under it); cubeRemountGuest mounts it again afterwards. Both do
// nothing for a World without a running sandbox. The caller holds the
// World's lock.
func (e *Runtime) cubeUnmountGuest(ctx context.Context, w *World) error {
	if w.Backend != RuntimeCube || w.Cube == nil || w.State != StateReady || w.Cube.SandboxID == "" {
		return nil
	}
	c, err := e.cubeClient()
	if err != nil {
		return err
	}
	mp := e.cubeMountPoint(w)
	if _, err := guestScript(ctx, c, e.cubeSandbox(w), cubeCallTimeout, guestUnmountScript, mp, mountinfoEscape(mp)); err != nil {
		return fmt.Errorf("unmount world %q in sandbox %s: %w", w.Name, w.Cube.SandboxID, err)
	}
	return nil
}

// cubeRemountGuest mounts the World's overlay in its guest again after its
// upper changed on the host.
func (e *Runtime) cubeRemountGuest(ctx context.Context, w *World) error {
	if w.Backend != RuntimeCube || w.Cube == nil || w.State != StateReady || w.Cube.SandboxID == "" {
		return nil
	}
	c, err := e.cubeClient()
	if err != nil {
		return err
	}
	return e.ensureOverlayAndRecord(ctx, c, w, e.cubeSandbox(w), true)
}
