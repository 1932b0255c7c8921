#!/usr/bin/env bash
# Idle memory and instructions per request for the peers (the Rust peers in
# benches/peers, and nginx for instructions), by the same method as
# scripts/idle-memory.sh and scripts/instructions-per-request.sh.
#
# Usage: scripts/lib/peer-metrics.sh memory hyper|may|monoio              -> bytes per idle connection
#        scripts/lib/peer-metrics.sh instructions hyper|may|monoio|nginx  -> "one_at_a_time,pipelined16"
# Env: N (10000), K1 (1000), K2 (21000), ROUNDS (3). Run scripts/bench.sh first
# (it builds target/peers/release/peer-*).
set -euo pipefail
cd "$(dirname "$0")/../.."
WHAT=$1
case "$2" in
    hyper) BIN=target/peers/release/peer-hyper ;;
    may) BIN=target/peers/release/peer-may ;;
    monoio) BIN=target/peers/release/peer-monoio ;;
    nginx) BIN=nginx ;;
    *) echo "unknown peer $2" >&2; exit 2 ;;
esac
if [ "$BIN" = nginx ]; then
    [ "$1" = instructions ] || { echo "nginx memory: use scripts/idle-memory.sh --nginx" >&2; exit 2; }
    command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; }
elif [ ! -x "$BIN" ]; then CARGO_TARGET_DIR="$PWD/target/peers" cargo build --release -q \
    --manifest-path benches/peers/Cargo.toml
fi
ulimit -n 20000
TMP=$(mktemp -d)
PORT=$((10000 + RANDOM % 20000))
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

if [ "$WHAT" = memory ]; then
    N=${N:-10000}
    rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
    "$BIN" --bind "127.0.0.1:$PORT" --workers 1 > /dev/null 2>&1 &
    PID=$!; PIDS+=("$PID")
    sleep 0.5
    python3 scripts/lib/keepalive_client.py "$PORT" 100 1 >/dev/null
    before=$(rss_kb "$PID")
    mkfifo "$TMP/hold"
    python3 scripts/lib/idle_clients.py "$PORT" "$N" 120 < "$TMP/hold" > "$TMP/clients.out" &
    CLIENTS=$!
    exec 3>"$TMP/hold"
    for _ in $(seq 1 600); do grep -q ready "$TMP/clients.out" 2>/dev/null && break; sleep 0.2; done
    grep -q ready "$TMP/clients.out" || { echo "clients did not get ready" >&2; exit 1; }
    sleep 2
    after=$(rss_kb "$PID")
    exec 3>&-
    wait "$CLIENTS" || true
    echo $(( (after - before) * 1024 / N ))
    exit 0
fi

[ "$WHAT" = instructions ] || { echo "unknown measurement $WHAT" >&2; exit 2; }
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
K1=${K1:-1000}
K2=${K2:-21000}
ROUNDS=${ROUNDS:-3}
i=0
count() { # depth K port -> total Ir
    local depth=$1 k=$2 port=$3 f="$TMP/cg.$1.$2"
    local cmd=("$BIN" --bind "127.0.0.1:$port" --workers 1)
    if [ "$BIN" = nginx ]; then
        # One process serving (no master), so callgrind sees every request.
        mkdir -p "$TMP/ng$port"
        scripts/lib/nginx-conf.sh "$TMP/ng$port" "$port" > "$TMP/ng$port/nginx.conf"
        cmd=(nginx -p "$TMP/ng$port" -c "$TMP/ng$port/nginx.conf" -g "master_process off;")
    fi
    valgrind --tool=callgrind --callgrind-out-file="$f" -q \
        "${cmd[@]}" >/dev/null 2>"$TMP/vg.err" &
    local pid=$!
    PIDS+=("$pid")
    if ! timeout 300 python3 scripts/lib/keepalive_client.py "$port" "$k" "$depth" >/dev/null; then
        cat "$TMP/vg.err" >&2; exit 1
    fi
    kill -TERM "$pid"
    wait "$pid" || true
    awk '/^(summary|totals):/ {print $2; exit}' "$f"
}
res=()
for depth in 1 16; do
    per=()
    for _ in $(seq 1 "$ROUNDS"); do
        a=$(count "$depth" "$K1" $((PORT + i))); i=$((i + 1))
        b=$(count "$depth" "$K2" $((PORT + i))); i=$((i + 1))
        per+=("$(python3 -c "print(round(($b - $a) / ($K2 - $K1)))")")
    done
    res+=("$(python3 -c 'import sys,statistics; print(round(statistics.median(int(x) for x in sys.argv[1:])))' "${per[@]}")")
done
echo "${res[0]},${res[1]}"
