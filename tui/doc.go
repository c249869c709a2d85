// Package tui is the root Bubble Tea model of strata's workstation: it lays
// the panes out (side by side, or as tabs on small terminals), owns focus,
// routes keys, mouse and engine events, and does all engine I/O in
// commands that return typed messages. Drawing pane contents is the panes'
// job.
package tui
