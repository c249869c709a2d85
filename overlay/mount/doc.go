// Package mount mounts a World's layers with one of the backends (kernel
// overlayfs, fuse-overlayfs, unionfs-fuse), unmounts them, records which
// backend a mount used, and probes which backends work on this machine
// (Probe, PickBackend).
package mount
