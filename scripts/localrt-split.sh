#!/bin/sh
# localrt-split.sh rewrites Go code written against the engine before the
# local runtime's leaves (issue 13) to the names they got: the base index
# (engine/baseidx), the provenance log's format (engine/provlog), the
# activity log (engine/events) and the cgroup tree (engine/cgroup). Run it on
# files merged from a branch that still uses the old unexported names, add
# the imports the compiler asks for, and build:
#
#	scripts/localrt-split.sh engine/*.go
#
# Exported engine names (BaseIndex, BaseRecord, CaptureBase, Event,
# EventType, Event*, OpCreate/OpWrite/OpDelete) keep working through
# aliases in package engine; these rules cover what had none.
set -eu
[ $# -gt 0 ] || { echo "usage: $0 FILE.go..." >&2; exit 2; }

sed -i -E '
s/\bidx\.incomplete\(\)/idx.Incomplete()/g
s/\bidx\.clearIncomplete\(\)/idx.ClearIncomplete()/g
s/\bidx([A-Z]?)\.file\(/idx\1.File(/g
s/\bprovRecord\b/provlog.Record/g
s/\breadProvenanceFile\(/provlog.ReadFile(/g
s/\bjsonLine\(Event\{/events.Line(events.Event{/g
s/\bjsonLine\(/provlog.JSONLine(/g
s/\bdisableCgroups\b/cgroup.Disabled/g
s/\bcgroupV2Root\(/cgroup.V2Root(/g
s/\bworldCgroupDir\(/cgroup.WorldDir(/g
s/\bprepareSessionCgroup\(/cgroup.PrepareSession(/g
s/\bremoveWorldCgroups\(/cgroup.RemoveWorld(/g
s/\bremoveBrokenWorldCgroups\(/cgroup.RemoveBrokenWorld(/g
s/\bcgroupPIDs\(/cgroup.PIDs(/g
s/\bjoinCgroup\(/cgroup.Join(/g
s/\bthawCgroups\(/cgroup.ThawWorld(/g
s/\breadKeyedInt\(/cgroup.ReadKeyedInt(/g
s/(^|[^.])\breadInt\(/\1cgroup.ReadInt(/g
' "$@"
