// Package panes holds one component per pane of the TUI (Worlds, Transcript,
// Changes, Diff, Timeline) and the overlays (help, command palette, dialogs).
// Panes are plain structs that take plain data, update on messages and draw
// into a given width and height; they never call each other or the engine:
// they ask the root model for work with messages (ActionMsg and friends).
package panes
