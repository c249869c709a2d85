// Package publish writes files to a source tree atomically: Publish stages
// every operation beside its target, checks the source still holds what the
// caller read (StaleError) and the staged content is what was checked, then
// renames under a journal, so a crash at any moment leaves either the old
// tree or the whole new one. Recover and RepairJournals finish or undo what
// a crash left; InspectJournals and PendingJournals report it.
package publish
