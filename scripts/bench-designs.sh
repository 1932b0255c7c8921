#!/usr/bin/env bash
# What each concurrency design costs a connection, outside the request
# itself (memory and start-up, per design):
#
#   memory      bytes per idle keep-alive connection: N connections, one
#               request each, held idle; (PSS after - PSS before) / N, the
#               PSS (/proc/PID/smaps_rollup) summed over the server's
#               processes (fork: the parent and every child; a child's
#               pages shared with the parent count once, split between
#               them). RSS beside it for the one-process designs.
#   first-byte  time from connect() to the first byte of the answer for a
#               new connection (one after another, Connection: close),
#               median and p99: where fork pays for its fork().
#   hol         head-of-line: 2 x --threadpool-size idle keep-alive
#               clients, then a new client's latency (connect to answer),
#               with a short --idle-timeout so that it ends.
#
# threadpool is the thread pool's default event mode (a thread per
# request); threadpool-connection is --threadpool-mode connection (a
# thread per connection).
#
# Usage: scripts/bench-designs.sh [memory|first-byte|hol]... (default: all)
# Env: N (idle connections, default 1000), CONNECTS (default 2000),
#      POOL (threadpool size for hol, default 8), IDLE (hol idle timeout, 3s).
# Run it alone on the machine (wrap it in the project's heavy lock).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000}
CONNECTS=${CONNECTS:-2000}
POOL=${POOL:-8}
IDLE=${IDLE:-3s}
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(memory first-byte hol)
DESIGNS=(stackless stackful threads threadpool threadpool-connection fork)
ulimit -n 20000
cargo build --release -p httplite -q
BIN=target/release/httplite
TMP=$(mktemp -d)
SERVER=
cleanup() {
    [ -n "$SERVER" ] && stop_server
    rm -rf "$TMP"
}
trap cleanup EXIT

# start_server DESIGN ARGS...: starts it on a free port; sets SERVER, PORT.
start_server() {
    local design=$1
    shift
    local workers=(--workers 1) runtime=(--runtime "$design")
    [ "$design" = fork ] && workers=()
    [ "$design" = threadpool-connection ] && runtime=(--runtime threadpool --threadpool-mode connection)
    "$BIN" --bind 127.0.0.1:0 "${runtime[@]}" "${workers[@]}" "$@" > "$TMP/out" 2>&1 &
    SERVER=$!
    for _ in $(seq 1 100); do grep -q listening "$TMP/out" && break; sleep 0.05; done
    PORT=$(sed -n 's/.*http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/out" | head -1)
    [ -n "$PORT" ] || { cat "$TMP/out" >&2; exit 1; }
}

# The server and its descendants (fork's children), one PID a line.
tree() {
    local p=$1 c
    echo "$p"
    for c in $(cat "/proc/$p/task/"*/children 2>/dev/null); do tree "$c"; done
}

stop_server() {
    local pids
    pids=$(tree "$SERVER")
    kill -TERM "$SERVER" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
    for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
    wait "$SERVER" 2>/dev/null || true
    SERVER=
}

# Summed PSS and RSS (KiB) of the server's processes: "PSS RSS PROCESSES".
footprint() {
    local pss=0 rss=0 n=0 p v
    for p in $(tree "$SERVER"); do
        v=$(awk '/^Pss:/ {pss=$2} /^Rss:/ {rss=$2} END {print pss, rss}' \
            "/proc/$p/smaps_rollup" 2>/dev/null) || continue
        [ -n "$v" ] || continue
        pss=$((pss + ${v% *}))
        rss=$((rss + ${v#* }))
        n=$((n + 1))
    done
    echo "$pss $rss $n"
}

memory() {
    echo "### Bytes per idle keep-alive connection ($N connections, one request each)"
    echo
    echo "| design | processes | PSS before (KiB) | PSS after (KiB) | PSS bytes per idle connection | RSS bytes per idle connection |"
    echo "|---|---|---|---|---|---|"
    local design extra
    for design in "${DESIGNS[@]}"; do
        extra=()
        # Connection mode: a pool thread per held connection, or they would
        # wait in the queue. (Event mode parks them on its default size.)
        [ "$design" = threadpool-connection ] && extra=(--threadpool-size "$N")
        start_server "$design" --idle-timeout 600s "${extra[@]}"
        sleep 0.5
        python3 scripts/lib/keepalive_client.py "$PORT" 100 1 >/dev/null
        sleep 0.5
        read -r pss0 rss0 _ < <(footprint)
        rm -f "$TMP/hold" "$TMP/clients.out"
        mkfifo "$TMP/hold"
        python3 scripts/lib/idle_clients.py "$PORT" "$N" 120 < "$TMP/hold" > "$TMP/clients.out" &
        local clients=$!
        exec 3>"$TMP/hold"
        for _ in $(seq 1 600); do grep -q ready "$TMP/clients.out" 2>/dev/null && break; sleep 0.2; done
        grep -q ready "$TMP/clients.out" || { echo "clients did not get ready ($design)" >&2; exit 1; }
        sleep 2
        read -r pss1 rss1 procs < <(footprint)
        exec 3>&-
        wait "$clients" || true
        stop_server
        printf '| %s | %s | %s | %s | %s | %s |\n' "$design" "$procs" "$pss0" "$pss1" \
            $(((pss1 - pss0) * 1024 / N)) $(((rss1 - rss0) * 1024 / N))
    done
    echo
}

first_byte() {
    echo "### connect() to the first answer byte, $CONNECTS new connections one after another"
    echo
    echo "| design | median (µs) | p99 (µs) |"
    echo "|---|---|---|"
    local design
    for design in "${DESIGNS[@]}"; do
        start_server "$design"
        read -r med p99 < <(python3 scripts/lib/first_byte.py "$PORT" "$CONNECTS" 200)
        stop_server
        printf '| %s | %s | %s |\n' "$design" "$med" "$p99"
    done
    echo
}

hol() {
    local n=$((2 * POOL))
    echo "### Head-of-line: $n idle keep-alive clients, then a new client (--idle-timeout $IDLE)"
    echo
    echo "| design | clients answered before the new one came | new client's latency (ms) | its status line |"
    echo "|---|---|---|---|"
    local design out extra
    for design in "${DESIGNS[@]}"; do
        extra=()
        case "$design" in threadpool*) extra=(--threadpool-size "$POOL") ;; esac
        start_server "$design" --idle-timeout "$IDLE" "${extra[@]}"
        out=$(python3 scripts/lib/hol_client.py "$PORT" "$n" 1)
        stop_server
        read -r ms answered status <<<"$out"
        printf '| %s | %s of %s | %s | %s |\n' "$design" "$answered" "$n" "$ms" "$status"
    done
    echo
}

echo "## scripts/bench-designs.sh, $(date -u +%F) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs)"
echo
for part in "${PARTS[@]}"; do
    case "$part" in
        memory) memory ;;
        first-byte) first_byte ;;
        hol) hol ;;
        *) echo "unknown part $part (memory, first-byte, hol)" >&2; exit 2 ;;
    esac
done
