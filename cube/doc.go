// Package cube is strata's client for CubeSandbox: the CubeAPI control plane
// (sandboxes, pause and resume, snapshots, rollback, clone, templates and
// template builds, node capacity, health) and the envd data plane reached
// through CubeProxy by Host header (process exec with Connect streaming,
// re-attach, list, signals, stdin; files and the filesystem service).
// docs/cube.md lists every endpoint and the CubeSandbox sources checked. It speaks the wire formats of
// CubeSandbox and its E2B-compatible routes with the standard library only,
// retries with backoff and jitter only where a retry cannot repeat work the
// server already did, and knows nothing of Worlds or of any user interface.
// Package cube/cubetest holds an in-process fake of CubeAPI and envd for tests.
package cube
