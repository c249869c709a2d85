// Package diffview owns everything strata knows about text differences:
// line diffs and hunks (computed with github.com/sergi/go-diff and then
// normalised the way git's xdiff slides change groups), intra-line word
// highlights, the hunk and line selection model used for partial applies,
// unified patch text that `git apply` accepts, a line-level three-way merge
// that agrees with `git merge-file`, and the layout of a diff into display
// rows (unified or side by side, wrapped or truncated to a width measured in
// terminal cells) whose segments carry semantic roles rather than styles.
//
// The package is a pure library: it does no file I/O and imports no UI
// package, so the engine can use it for merges and the TUI panes turn its
// roles into theme styles.
package diffview
