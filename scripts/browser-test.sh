#!/usr/bin/env bash
# The dashboard in a real browser: starts the release httplite, loads
# /_httplite/ in headless Chromium (Debian's `chromium`, driven over the
# DevTools protocol by scripts/lib/browser_test.py), drives bounded load
# (keep-alive clients on 127.0.0.1 for a few seconds), and checks that the
# page's figures are non-zero and match /_httplite/stats (requests/s
# within 35 % of the server's own rate; totals within a few requests),
# that it reads Server-Sent Events (and, with --all, falls back to polling
# when /_httplite/events answers 503), and that a directory listing
# (--root --list-dirs) renders. Saves a screenshot and prints its path.
#
# Usage: scripts/browser-test.sh [--short | --all] [--load S] [--out FILE.png]
#   --short      stackless only, 5 s of load (scripts/test.sh runs this)
#   --all        every runtime, and the polling fallback on each
#   --load S     seconds of load per runtime (default 8; the screenshot is
#                taken halfway through, so more seconds draw longer charts)
#   --out FILE   the screenshot (default target/browser-test/dashboard.png;
#                the listing's goes beside it as FILE-listing.png)
#
# Chromium runs with --no-sandbox: as root in a container it has no user
# namespace for its sandbox, and it only ever loads this local server.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNTIMES=stackless
LOAD=8
FALLBACK=""
OUT=target/browser-test/dashboard.png
while [ $# -gt 0 ]; do
    case "$1" in
        --short) RUNTIMES=stackless; LOAD=5; shift ;;
        --all) RUNTIMES=stackless,stackful,threads,threadpool,fork,uring; FALLBACK=--fallback; shift ;;
        --out) OUT=$2; shift 2 ;;
        --load) LOAD=$2; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "browser-test.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if ! command -v chromium >/dev/null; then
    echo "==> installing chromium (needed by the browser test)"
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq chromium >/dev/null
    else
        sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null
    fi
fi
command -v chromium >/dev/null || { echo "browser-test.sh: chromium is not installed and could not be" >&2; exit 1; }
# Fails loudly if this Chromium cannot start at all (a missing library).
chromium --headless --no-sandbox --disable-gpu --version >/dev/null 2>&1 || {
    echo "browser-test.sh: chromium does not run here:" >&2
    chromium --headless --no-sandbox --disable-gpu --version >&2 || true
    exit 1
}

cargo build --release -q -p httplite
mkdir -p "$(dirname "$OUT")"
python3 scripts/lib/browser_test.py --binary target/release/httplite --chromium chromium \
    --runtimes "$RUNTIMES" --load-seconds "$LOAD" --screenshot "$OUT" $FALLBACK
