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
// controlling tty and its output arrives as pty data; a stdin pipe unless
// the request says "stdin": false, as envd), Connect (re-attach to a running
// process by pid or tag), List, SendInput (stdin or PTY input), CloseStdin,
// SendSignal (SIGTERM, SIGKILL) and Update (PTY size), answering not_found
// for a process that has ended.
//
// CubeProxy: a Host that does not parse is 400 (retcode 310400); a sandbox
// that is gone, or a port it does not map, is 500 with X-Cube-Retcode 310507;
// a paused sandbox is resumed when it was created with autoResume.enabled,
// else 503 with Retry-After. CubeAPI: bodies are read as axum's Json
// extractor does (415, 400, 422 in plain text; unknown fields ignored);
// errors are {code, message}; host-mount is not listed back in metadata.
//
// Snapshots copy the scratch directory and remember the host mounts; they
// do not hold process memory, so rollback restarts the namespace (mounts
// made by commands are gone, running commands are killed), and a sandbox
// created from a snapshot starts with only its host mounts. Pause stops the
// sandbox's processes with SIGSTOP; connect continues them. A command whose
// exec stream is cut (client gone, dropped stream) runs on, as under envd;
// its Connect-Timeout-Ms still ends it. Background processes live until the
// sandbox is deleted, which kills every process in its namespace. Timeouts
// of sandboxes are recorded, never enforced. Requests are recorded byte for
// byte, and faults can be injected per route.
package cubetest
