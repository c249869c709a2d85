// Package keymap holds every key binding of the TUI as data: named actions
// grouped by the focus area they apply in, each with its help text, and the
// loading of config.toml [keys] overrides. The status bar's short help, the
// `?` overlay and the `:` palette are all generated from the same bindings.
package keymap
