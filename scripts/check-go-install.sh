#!/usr/bin/env bash
# Proves that `go install github.com/stratahq/strata/cmd/strata@VERSION` works
# for a user: the committed tree (HEAD) is served as version v0.0.0-check from
# a file:// module proxy (the other modules come from the usual proxy), and
# installed with `go install` outside any module. Go refuses such an install
# when go.mod has a replace directive, so this fails if one comes back.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/stratahq/strata
# A pseudo-version of HEAD, so the module cache never serves an older tree.
ver=v0.0.0-$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)-$(git rev-parse --short=12 HEAD)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir="$tmp/proxy/$mod/@v"
mkdir -p "$dir"
git archive --format=zip --prefix="$mod@$ver/" -o "$dir/$ver.zip" HEAD
git show HEAD:go.mod >"$dir/$ver.mod"
printf '{"Version":"%s","Time":"%s"}\n' "$ver" "$(git show -s --format=%cI HEAD)" >"$dir/$ver.info"
printf '%s\n' "$ver" >"$dir/list"
# Only proxies: "direct" would ask github.com for the module.
upstream=$(go env GOPROXY | tr ',|' '\n\n' | grep -v -e '^direct$' -e '^off$' | paste -sd, -)
(
	cd "$tmp"
	GOFLAGS= GOPROXY="file://$tmp/proxy,$upstream" GONOSUMDB=$mod \
		GOBIN="$tmp/bin" go install "$mod/cmd/strata@$ver"
)
"$tmp/bin/strata" --version
echo "go install $mod/cmd/strata@$ver: ok"
