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
# Then the same count, one request at a time, for each real client's head
# in scripts/heads/ (curl, wrk, browsers, a crawler, a health check; where
# each shape comes from is in scripts/heads/README.md), once with a plain
# Host and once with a port in it: a table of one row per head. The corpus
# runs use HEAD_K1/HEAD_K2 requests (default 1,000 and 6,000).
#
# Usage: [HTTPLITE_BIN=path] scripts/instructions-per-request.sh [--runtime R]
#            [--no-heads | --heads-only] [-- extra server flags]
# REQ_PATH=/x (and REQ_HEADER='Name: value') counts another request instead of
# plaintext, e.g. a file: REQ_PATH=/1k.bin ... -- --root DIR.
# HEADS='curl chrome' picks heads by file name; HEAD_PORTS (default
# "'' :8080") lists the Host suffixes each head is counted with. A name
# like chrome+chrome-image sends those heads in turn on the connection
# (a page and its images): by default that mix is counted after the
# corpus, since a head that differs from the one before cannot be
# recalled from the parser's memo (see docs/request-path.md).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=stackless
BENCH=1
CORPUS=1
while [ $# -gt 0 ]; do
    case "$1" in
        --runtime) RUNTIME=$2; shift 2 ;;
        --no-heads) CORPUS=0; shift ;;
        --heads-only) BENCH=0; shift ;;
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

# The client's request arguments: the benchmark's request (or REQ_PATH's);
# count_head sets them to a corpus head.
REQ=()
[ -n "${REQ_PATH:-}" ] && REQ=("$REQ_PATH" ${REQ_HEADER:+"$REQ_HEADER"})

count() { # mode-depth K port -> total Ir
    local depth=$1 k=$2 port=$3 f="$OUT/cg.$1.$2"
    shift 3
    valgrind --tool=callgrind --callgrind-out-file="$f" -q \
        "$BIN" --bind "127.0.0.1:$port" --workers 1 --runtime "$RUNTIME" --quiet "$@" \
        >/dev/null 2>"$OUT/vg.err" &
    local pid=$!
    if ! python3 scripts/lib/keepalive_client.py "$port" "$k" "$depth" "${REQ[@]}" >/dev/null; then
        cat "$OUT/vg.err" >&2
        exit 1
    fi
    kill -TERM "$pid"
    wait "$pid" || true
    awk '/^(summary|totals):/ {print $2; exit}' "$f"
}

i=0
# Sets PER to ROUNDS per-request figures (depth, k1, k2, server flags...)
# and MED to their median.
measure() {
    local depth=$1 k1=$2 k2=$3 a b
    shift 3
    PER=()
    for _ in $(seq 1 "$ROUNDS"); do
        a=$(count "$depth" "$k1" $((PORT_BASE + i)) "$@"); i=$((i + 1))
        b=$(count "$depth" "$k2" $((PORT_BASE + i)) "$@"); i=$((i + 1))
        PER+=("$(python3 -c "print(round(($b - $a) / ($k2 - $k1)))")")
    done
    MED=$(python3 -c 'import sys,statistics; print(round(statistics.median(int(x) for x in sys.argv[1:])))' "${PER[@]}")
}

if [ "$BENCH" = 1 ]; then
    printf '| runtime | mode | instructions/request (median of %d) | all rounds |\n|---|---|---|---|\n' "$ROUNDS"
    for depth in 1 16; do
        measure "$depth" "$K1" "$K2" "$@"
        mode=$([ "$depth" = 1 ] && echo "one at a time" || echo "16 pipelined")
        printf '| %s | %s | %s | %s |\n' "$RUNTIME" "$mode" "$MED" "${PER[*]}"
    done
fi

if [ "$CORPUS" = 1 ]; then
    HEAD_K1=${HEAD_K1:-1000}
    HEAD_K2=${HEAD_K2:-6000}
    eval "ports=(${HEAD_PORTS:-"'' :8080"})"
    names=()
    if [ -n "${HEADS:-}" ]; then
        read -r -a names <<<"$HEADS"
    else
        for f in scripts/heads/*.txt; do names+=("$(basename "$f" .txt)"); done
        names+=(chrome+chrome-image)
    fi
    [ "$BENCH" = 1 ] && echo
    printf '| head (scripts/heads/) | Host | bytes | instructions/request, one at a time (median of %d) | all rounds |\n|---|---|---|---|---|\n' "$ROUNDS"
    for name in "${names[@]}"; do
        for suffix in "${ports[@]}"; do
            # The first head's Host and size name the row.
            file=scripts/heads/${name%%+*}.txt
            REQ=(--head "scripts/heads/${name//+/.txt,scripts/heads/}.txt" "$suffix")
            host=$(python3 -c 'import sys; print(next(l.split(":", 1)[1].strip() for l in open(sys.argv[1]) if l.lower().startswith("host:")).replace("{port}", sys.argv[2]))' "$file" "$suffix")
            bytes=$(python3 -c 'import sys; print(sum(len(l.rstrip("\r\n").replace("{port}", sys.argv[2])) + 2 for l in open(sys.argv[1]) if l.strip()) + 2)' "$file" "$suffix")
            measure 1 "$HEAD_K1" "$HEAD_K2" "$@"
            printf '| %s | `%s` | %s | %s | %s |\n' "$name" "$host" "$bytes" "$MED" "${PER[*]}"
        done
    done
fi
rm -rf "$OUT"
