#!/usr/bin/env bash
# The site (crates/site) answers requests without waiting and must not know
# how any driver waits: its normal dependency tree may hold none of the
# runtime crates (docs/architecture.md, "Site and drivers"). Fails naming
# the crates and the path that pulls each one in.
set -euo pipefail
cd "$(dirname "$0")/.."
FORBIDDEN='reactor|executor|coroutine|dispatch'
tree=$(cargo tree -p site -e normal --prefix none --format '{p}' --offline 2>/dev/null \
    || cargo tree -p site -e normal --prefix none --format '{p}')
bad=$(printf '%s\n' "$tree" | awk '{ print $1 }' | grep -xE "$FORBIDDEN" | sort -u || true)
if [ -n "$bad" ]; then
    echo "check-site-deps.sh: crates/site depends on runtime crate(s): $(echo $bad)" >&2
    for c in $bad; do
        echo "--- how site reaches $c:" >&2
        cargo tree -p site -e normal -i "$c" >&2 || true
    done
    echo "The site must not know how a driver waits; move that code to bin/httplite." >&2
    exit 1
fi
echo "site's normal dependencies: $(printf '%s\n' "$tree" | awk '{ print $1 }' | sort -u | tr '\n' ' ')"
