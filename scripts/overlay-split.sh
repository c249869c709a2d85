#!/bin/sh
# overlay-split.sh rewrites overlay.X references left in Go code written
# before issue 13 split overlay into overlay/store, overlay/mount and
# overlay/publish (the table is in scripts/overlaysplit/main.go), first inside
# overlay's own packages (package clauses, bare names, the old names of the
# helpers the split exported), then in every importer. Run it from
# the module root after merging such code; it is idempotent.
#
#   scripts/overlay-split.sh            # the whole module
#   scripts/overlay-split.sh engine cmd # only these paths
#   scripts/overlay-split.sh -n         # list what would change
set -eu
cd "$(dirname "$0")/.."
go run ./scripts/overlaysplit "$@"
gofmt -l . | grep -v '^third_party/' || true
