#!/usr/bin/env bash
# make run: open the strata workstation over a source tree.
#
#   make run                      a small practice tree made for you on the first
#                                 run ($STRATA_PLAYGROUND, default ~/strata-playground)
#   SOURCE=/path/to/tree make run your own tree
#
# Running the TUI over the strata checkout itself (the directory `make run` is
# typed in) is not a useful first experience, so the default is the practice tree.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin/strata"

src=${SOURCE:-}
if [ -z "$src" ]; then
	src=${STRATA_PLAYGROUND:-$HOME/strata-playground}
	if [ ! -d "$src" ]; then
		mkdir -p "$src/src" "$src/tests"
		cat >"$src/README.md" <<'TXT'
# strata playground

A small tree to try strata on. Make a World (press n in the TUI, or run
`strata new try-it`), change files inside it (`strata exec try-it -- sh`),
review the change in the TUI and apply what you like back here.
TXT
		cat >"$src/src/greet.py" <<'TXT'
def greet(name):
    return "hello, " + name


if __name__ == "__main__":
    print(greet("world"))
TXT
		cat >"$src/tests/test_greet.py" <<'TXT'
from src.greet import greet


def test_greet():
    assert greet("ada") == "hello, ada"
TXT
		if command -v git >/dev/null; then
			git -C "$src" init -q
			git -C "$src" add -A
			git -C "$src" -c user.name=strata -c user.email=strata@localhost commit -qm "playground"
		fi
		echo "strata: made a practice tree at $src"
	fi
fi
src=$(cd "$src" && pwd)
echo "strata: opening the workstation over $src (SOURCE=/path/to/tree make run opens another)"
cd "$src"
exec "$bin" tui --source "$src"
