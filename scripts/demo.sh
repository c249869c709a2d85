#!/usr/bin/env bash
# make demo: build strata, make a demo source tree and three Worlds whose
# scripted agents edit, create and delete files over about a minute (one
# fails, one stops to ask a question), then open the TUI on them.
#
#   STRATA_DEMO_DIR=/tmp/d scripts/demo.sh   keep the demo in /tmp/d
#   STRATA_DEMO_NO_TUI=1 scripts/demo.sh     set everything up, do not open the TUI
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin/strata"
(cd "$root" && go build -o "$bin" ./cmd/strata)

demo=${STRATA_DEMO_DIR:-$(mktemp -d /tmp/strata-demo.XXXXXX)}
mkdir -p "$demo"
export STRATA_HOME="$demo/state"
src="$demo/src"
agents="$demo/agents"

# Start over on a second run in the same directory.
if [ -d "$STRATA_HOME/worlds" ]; then
	for w in refactor add-feature cleanup; do "$bin" rm "$w" --force --purge --kill >/dev/null 2>&1 || true; done
fi
rm -rf "$src" "$agents"
mkdir -p "$src/src" "$src/docs" "$src/tests" "$agents"

cat > "$src/README.md" <<'TXT'
# inventory

A small inventory service used by the strata demo.

Run the tests with `python3 -m pytest tests`.
TXT
cat > "$src/src/app.py" <<'TXT'
from util import load_items, save_items


def add_item(name, count):
    items = load_items()
    items[name] = items.get(name, 0) + count
    save_items(items)
    return items[name]


def remove_item(name):
    items = load_items()
    items.pop(name, None)
    save_items(items)


def report():
    items = load_items()
    for name in sorted(items):
        print(name, items[name])
TXT
cat > "$src/src/util.py" <<'TXT'
import json

PATH = "items.json"


def load_items():
    try:
        with open(PATH) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def save_items(items):
    with open(PATH, "w") as f:
        json.dump(items, f)
TXT
cat > "$src/docs/guide.md" <<'TXT'
# Guide (outdated)

This guide describes the old command line, which no longer exists.
TXT
cat > "$src/tests/test_app.py" <<'TXT'
from app import add_item


def test_add():
    assert add_item("apple", 2) >= 2
TXT

# Each agent narrates in colour, as real agents do, and works in steps.
cat > "$agents/refactor.sh" <<'TXT'
say() { printf '\033[36m[refactor]\033[0m %s\n' "$1"; sleep "${2:-3}"; }
say "reading src/app.py"
say "renaming add_item -> add_stock"
sed -i 's/add_item/add_stock/g' src/app.py tests/test_app.py
say "extracting a helper module"
printf 'def clamp(n, lo, hi):\n    return max(lo, min(n, hi))\n' > src/helpers.py
say "using the helper in app.py"
sed -i 's/items\[name\] = items.get(name, 0) + count/items[name] = max(0, items.get(name, 0) + count)/' src/app.py
for i in 1 2 3 4 5 6; do say "running checks ($i/6)" 4; done
printf '\033[32mrefactor done: 3 files changed\033[0m\n'
TXT
cat > "$agents/add-feature.sh" <<'TXT'
say() { printf '\033[35m[feature]\033[0m %s\n' "$1"; sleep 3; }
say "planning: add a low-stock report"
cat >> src/app.py <<'PY'


def low_stock(threshold=5):
    return {n: c for n, c in load_items().items() if c < threshold}
PY
say "writing tests/test_low_stock.py"
printf 'from app import low_stock\n\n\ndef test_low_stock():\n    assert isinstance(low_stock(), dict)\n' > tests/test_low_stock.py
say "updating README"
printf '\nLow stock: `python3 -c "import app; print(app.low_stock())"`\n' >> README.md
printf '\033[33mThe schema of items.json changes. Migrate existing data? [y/N] \033[0m'
read -r answer
say "answer: ${answer:-N}"
printf 'migrated: %s\n' "${answer:-no}" > MIGRATION.txt
printf '\033[32mfeature done\033[0m\n'
TXT
cat > "$agents/cleanup.sh" <<'TXT'
say() { printf '\033[34m[cleanup]\033[0m %s\n' "$1"; sleep 3; }
say "removing the outdated guide"
rm -f docs/guide.md
say "tidying README"
sed -i 's/A small inventory service/An inventory service/' README.md
say "running the test suite"
for i in 1 2 3; do printf 'tests/test_app.py::test_add ... \033[32mok\033[0m\n'; sleep 1; done
printf 'tests/test_app.py::test_report ... \033[31mFAILED\033[0m\n'
printf '\033[31mE   AssertionError: report() printed nothing\033[0m\n'
exit 1
TXT

cd "$src"
for w in refactor add-feature cleanup; do
	"$bin" new "$w" >/dev/null
	"$bin" exec "$w" --tty --detach -- bash "$agents/$w.sh" >/dev/null
done

echo "demo source: $src"
echo "state:       $STRATA_HOME  (STRATA_HOME=$STRATA_HOME $bin ... to use the CLI on it)"
if [ -n "${STRATA_DEMO_NO_TUI:-}" ]; then
	exit 0
fi
exec "$bin"
