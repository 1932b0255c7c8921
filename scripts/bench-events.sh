#!/usr/bin/env bash
# What a dashboard viewer costs, per runtime: N viewers of /_httplite/events
# against N clients polling /_httplite/stats once a second (keep-alive), D
# seconds each; prints the server's CPU µs per viewer-second, PSS per viewer,
# threads and processes (scripts/lib/bench_events.py). docs/dashboard.md
# quotes a run. Loopback only; bounded by --viewers (at most 500) and --seconds.
#
# Usage: scripts/bench-events.sh [--viewers N] [--seconds D] [--runtimes a,b]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p httplite
exec python3 scripts/lib/bench_events.py --binary target/release/httplite "$@"
