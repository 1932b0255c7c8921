#!/usr/bin/env bash
# User-space instructions per plaintext request, counted by callgrind (no
# hardware counters here; callgrind counts repeat to a few instructions).
#
# For each mode (one request at a time; 16 pipelined per write) the server
# runs twice under callgrind, serving K1 and K2 requests over one keep-alive
# connection; (Ir(K2) - Ir(K1)) / (K2 - K1) cancels start-up and shutdown.
#
# Timing still matters a little (whether the next request is already there
# when the server looks decides if it sleeps in epoll_wait), so each figure is
# the median of ROUNDS (default 3) pairs of runs.
#
# Usage: [HTTPLITE_BIN=path] scripts/instructions-per-request.sh [--runtime R] [-- extra server flags]
# REQ_PATH=/x (and REQ_HEADER='Name: value') counts another request instead of
# plaintext, e.g. a file: REQ_PATH=/1k.bin ... -- --root DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=stackless
while [ $# -gt 0 ]; do
    case "$1" in
        --runtime) RUNTIME=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
K1=${K1:-1000}
K2=${K2:-21000}
ROUNDS=${ROUNDS:-3}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }

# HTTPLITE_BIN=path compares another build (e.g. a worktree of an older commit).
if [ -n "${HTTPLITE_BIN:-}" ]; then
    BIN=$HTTPLITE_BIN
else
    cargo build --release -p httplite -q
    BIN=target/release/httplite
fi
# valgrind 3.19 runs no other thread while one waits in io_uring_enter (see
# scripts/valgrind.sh): the acceptor could never hand a connection over.
# Capped waits give the others a turn; their extra turns cost instructions
# per unit of time, not per request, which the difference below cancels
# only roughly (quote uring's figure with that caveat).
if [ "$RUNTIME" = uring ]; then
    export PROACTOR_MAX_WAIT_MS=${PROACTOR_MAX_WAIT_MS:-10}
fi
OUT=$(mktemp -d)
PORT_BASE=$((10000 + RANDOM % 20000))

count() { # mode-depth K port -> total Ir
    local depth=$1 k=$2 port=$3 f="$OUT/cg.$1.$2"
    shift 3
    valgrind --tool=callgrind --callgrind-out-file="$f" -q \
        "$BIN" --bind "127.0.0.1:$port" --workers 1 --runtime "$RUNTIME" --quiet "$@" \
        >/dev/null 2>"$OUT/vg.err" &
    local pid=$!
    local req=()
    [ -n "${REQ_PATH:-}" ] && req=("$REQ_PATH" ${REQ_HEADER:+"$REQ_HEADER"})
    if ! python3 scripts/lib/keepalive_client.py "$port" "$k" "$depth" "${req[@]}" >/dev/null; then
        cat "$OUT/vg.err" >&2
        exit 1
    fi
    kill -TERM "$pid"
    wait "$pid" || true
    awk '/^(summary|totals):/ {print $2; exit}' "$f"
}

printf '| runtime | mode | instructions/request (median of %d) | all rounds |\n|---|---|---|---|\n' "$ROUNDS"
i=0
for depth in 1 16; do
    per=()
    for _ in $(seq 1 "$ROUNDS"); do
        a=$(count "$depth" "$K1" $((PORT_BASE + i)) "$@"); i=$((i + 1))
        b=$(count "$depth" "$K2" $((PORT_BASE + i)) "$@"); i=$((i + 1))
        per+=("$(python3 -c "print(round(($b - $a) / ($K2 - $K1)))")")
    done
    med=$(python3 -c 'import sys,statistics; print(round(statistics.median(int(x) for x in sys.argv[1:])))' "${per[@]}")
    mode=$([ "$depth" = 1 ] && echo "one at a time" || echo "16 pipelined")
    printf '| %s | %s | %s | %s |\n' "$RUNTIME" "$mode" "$med" "${per[*]}"
done
rm -rf "$OUT"
