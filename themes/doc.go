// Package themes turns colour roles (accent, muted, added, removed, selection...)
// into the lipgloss styles the panes draw with: built-in dark, light and
// high-contrast palettes, the light/dark choice made from the terminal's
// reported background, TOML theme files, config.toml [colors] overrides and
// NO_COLOR. No other package names a colour.
package themes
