// Package boundary owns what a command inside a World may touch: the isolation
// level, the writable paths, the hidden credential paths, the environment
// allow-list and the network egress policy. It computes the effective boundary
// of a session as data (Compute) from the [boundary] table of config.toml, a
// World and a session request; the session init executes it (see
// engine/sandbox for the mount plan) and `strata show` describes it.
//
// The package does no I/O beyond stat: it never mounts, opens or listens.
package boundary
