// Package cubetest is an in-process fake of CubeSandbox for tests: CubeAPI
// on one listener, CubeProxy on another (routing by the Host header
// <port>-<sandboxID>.<domain> to a per-sandbox envd), with real state
// (sandboxes, templates, snapshots, rollback, pause) and real execution.
//
// Each sandbox is a private mount namespace held by a dedicated OS thread of
// the test process (so it needs root). Commands run on the host's
// filesystem, with three differences that make a sandbox a sandbox:
//   - /tmp is the sandbox's own scratch directory (its "rootfs"): what a
//     command writes there belongs to the sandbox, is captured by snapshots
//     and restored by rollback;
//   - each host mount (metadata["host-mount"]) is bind-mounted at its
//     mountPath, read-only when asked. A missing mount point under /tmp is
//     made in the scratch directory; a missing one elsewhere is made in an
//     overlay (upper layer in the sandbox's directory) over its deepest
//     existing ancestor, which must not be "/" (that ancestor's submounts are
//     hidden in the sandbox). The host itself is never written;
//   - mounts made by commands persist for later commands of the same
//     sandbox, as they would in a VM.
//
// Host mounts are separate mounts, as separate volumes are in a VM: an
// overlayfs needs its upperdir and workdir inside one host mount.
//
// envd's process service: Start (piped output, or a PTY when the request
// has "pty": the command then leads a session with the terminal as its
// controlling tty and its output arrives as pty data), SendInput (PTY input)
// and Update (PTY size), the last two by pid, answering not_found for a
// process that is not running or has no terminal.
//
// Snapshots copy the scratch directory and remember the host mounts; they
// do not hold process memory, so rollback restarts the namespace (mounts
// made by commands are gone, running commands are killed), and a sandbox
// created from a snapshot starts with only its host mounts. Pause stops the
// sandbox's processes with SIGSTOP; connect continues them. A command whose
// exec stream is cut (client gone, dropped stream, timeout) is killed with
// its process group; background processes it leaves behind live until the
// sandbox is deleted, which kills every process in its namespace. Timeouts
// of sandboxes are recorded, never enforced. Requests are recorded byte for
// byte, and faults can be injected per route.
package cubetest
