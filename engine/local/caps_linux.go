package local

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// keptCapabilities are all a session's command keeps; every other capability,
// including ones newer kernels add, is dropped from the bounding, inheritable,
// permitted, effective and ambient sets. These are what root builds and package
// tools use (ownership, permission bypass on files the command can already reach,
// setuid to drop privileges, low ports, chroot into a build root).
//
// Dropped on purpose, among others: SYS_ADMIN (mount, umount, unshare of mount
// namespaces: would undo the World bind and reveal the state root), DAC_READ_SEARCH
// (open_by_handle_at reaches any inode, hidden or not), SYS_PTRACE (would reach the
// init's fds and root), MKNOD (a block device node reads any upper off the disk),
// SYS_MODULE, SYS_RAWIO, SYS_BOOT, SYS_TIME, NET_ADMIN, NET_RAW, SETPCAP, SETFCAP (a
// file capability in the World could be applied to the source), LINUX_IMMUTABLE,
// MAC_*, SYSLOG, BPF, PERFMON, AUDIT_CONTROL, SYS_RESOURCE, SYS_NICE, IPC_OWNER,
// LEASE, WAKE_ALARM, BLOCK_SUSPEND, CHECKPOINT_RESTORE.
var keptCapabilities = []int{
	unix.CAP_CHOWN,
	unix.CAP_DAC_OVERRIDE,
	unix.CAP_FOWNER,
	unix.CAP_FSETID,
	unix.CAP_KILL,
	unix.CAP_SETGID,
	unix.CAP_SETUID,
	unix.CAP_NET_BIND_SERVICE,
	unix.CAP_SYS_CHROOT,
	unix.CAP_AUDIT_WRITE,
}

// dropCapabilities limits the calling thread (and what it starts) to
// keptCapabilities and sets no_new_privs. Capabilities are per thread: call it on a
// thread locked with runtime.LockOSThread that is never given back to the runtime.
func dropCapabilities() error {
	last := lastCapability()
	var keep uint64
	for _, c := range keptCapabilities {
		keep |= 1 << uint(c)
	}
	// The bounding set first: dropping from it needs CAP_SETPCAP, which capset
	// removes below.
	for c := 0; c <= last; c++ {
		if keep&(1<<uint(c)) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	for i := range data {
		mask := uint32(keep >> (32 * uint(i)))
		data[i].Effective &= mask
		data[i].Permitted &= mask
		data[i].Inheritable &= mask
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("set capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return nil
}

// lastCapability is the highest capability number the kernel knows.
func lastCapability() int {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && n > 0 && n < 64 {
			return n
		}
	}
	return 63 // unknown numbers fail with EINVAL, which is skipped
}

// KeptCapabilities are the capabilities a session's command keeps (a copy).
func KeptCapabilities() []int { return append([]int(nil), keptCapabilities...) }
