#!/usr/bin/env bash
# Soak and fault injection: the release server under mixed, checked load for
# a long time, with fd and RSS watched for growth. Per runtime it starts
# httplite (CPU 0) on a generated --root (1 KiB, 256 KiB and 4 MiB files, the
# endpoints it drives exposed beside them with --expose) and
# runs scripts/lib/soak_client.py (CPU 1): two wrk processes whose Lua script
# checks every body, checking clients that verify every response byte for
# byte, and the faults (early close, reset mid-response, half-close, never
# read, one byte a second, 10 MiB of headers). The pass/fail rules are in
# soak_client.py's docstring; the server must also exit 0 on SIGTERM after.
#
# Usage: scripts/soak.sh [--runtime R | --all] [--duration S] [--requests N]
#   --runtime R    stackless (default), stackful, threads or uring
#   --all          every runtime, one after the other
#   --duration S   seconds of load per runtime (default 600)
#   --requests N   fewest verified requests per runtime for a pass
#                  (default: 10,000,000 per 600 s of duration)
set -euo pipefail
cd "$(dirname "$0")/.."

RUNTIMES=(stackless)
DURATION=600
REQUESTS=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runtime) RUNTIMES=("$2"); shift 2 ;;
        --all) RUNTIMES=(stackless stackful threads uring); shift ;;
        --duration) DURATION=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ "$DURATION" -ge 10 ] || { echo "soak.sh: --duration must be at least 10 s" >&2; exit 2; }
REQUESTS=${REQUESTS:-$((DURATION * 10000000 / 600))}
# One sample per 10 s, but at least ten samples in a short run.
SAMPLE=$((DURATION >= 100 ? 10 : DURATION / 10))
WRITE_TIMEOUT=4
HEADER_TIMEOUT=3

if ! command -v wrk >/dev/null; then
    echo "==> installing wrk"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq wrk >/dev/null
fi
command -v python3 >/dev/null || { echo "soak.sh: python3 is required" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# Server on CPU 0, load on CPU 1, so neither starves the other at random.
SERVER_CPU=(); LOAD_CPU=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    SERVER_CPU=(taskset -c 0); LOAD_CPU=(taskset -c 1)
fi

echo "==> cargo build --release -p httplite"
cargo build --release -p httplite -q
BIN="${CARGO_TARGET_DIR:-target}/release/httplite"

TMP=$(mktemp -d /tmp/httplite-soak.XXXXXX)
SPID=""
cleanup() {
    if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then kill -KILL "$SPID" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
python3 scripts/lib/soak_client.py make-root "$TMP/root"

# Starts the server on a free port below 32768; sets SPID and PORT.
start_server() {
    local rt=$1 try
    for try in 1 2 3 4 5 6 7 8; do
        PORT=$((20000 + RANDOM % 12000))
        "${SERVER_CPU[@]}" "$BIN" --bind "127.0.0.1:$PORT" --workers 2 --runtime "$rt" \
            --root "$TMP/root" --expose plaintext,json,echo \
            --write-timeout "${WRITE_TIMEOUT}s" \
            --header-timeout "${HEADER_TIMEOUT}s" --shutdown-timeout 10s \
            >"$TMP/server-$rt.log" 2>&1 &
        SPID=$!
        for _ in $(seq 1 100); do
            grep -q "listening on" "$TMP/server-$rt.log" 2>/dev/null && return 0
            kill -0 "$SPID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SPID" 2>/dev/null || true
        wait "$SPID" 2>/dev/null || true
        SPID=""
    done
    echo "soak.sh: the $rt server did not start:" >&2
    cat "$TMP/server-$rt.log" >&2
    return 1
}

# SIGTERM, then the exit status (bounded: --shutdown-timeout 10s + 10 s).
stop_server() {
    kill -TERM "$SPID"
    for _ in $(seq 1 200); do
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SPID" 2>/dev/null; then
        kill -KILL "$SPID"
        wait "$SPID" 2>/dev/null || true
        SPID=""
        echo "did not exit within 20 s of SIGTERM"
        return 1
    fi
    local rc=0
    wait "$SPID" || rc=$?
    SPID=""
    echo "exit status $rc"
    [ "$rc" = 0 ]
}

FAILED=()
for rt in "${RUNTIMES[@]}"; do
    echo "==> soak: runtime $rt, ${DURATION} s, at least $REQUESTS verified requests"
    start_server "$rt"
    rc=0
    "${LOAD_CPU[@]}" python3 scripts/lib/soak_client.py run --port "$PORT" --pid "$SPID" \
        --root "$TMP/root" --runtime "$rt" --duration "$DURATION" --sample "$SAMPLE" \
        --min-requests "$REQUESTS" --write-timeout "$WRITE_TIMEOUT" \
        --header-timeout "$HEADER_TIMEOUT" --json "$TMP/$rt.json" --verbose || rc=$?
    if ! kill -0 "$SPID" 2>/dev/null; then
        echo "server: died during the soak"; rc=1
        wait "$SPID" 2>/dev/null || true
        SPID=""
    elif ! stop_server; then
        rc=1
    fi
    if [ -s "$TMP/server-$rt.log" ]; then
        echo "server output (last 20 lines):"; tail -n 20 "$TMP/server-$rt.log"
    fi
    [ "$rc" = 0 ] || FAILED+=("$rt")
done

echo "==> soak: ${#RUNTIMES[@]} runtime(s), ${DURATION} s each"
for rt in "${RUNTIMES[@]}"; do
    [ -f "$TMP/$rt.json" ] || { echo "  $rt: no result"; continue; }
    python3 - "$TMP/$rt.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
g = r["growth"] or {}
faults = sum(r["injected"].values()); survived = sum(r["survived"].values())
print(f"  {r['runtime']:<10} verified {r['verified']:>12,}  wrong {r['wrong']}  "
      f"faults {faults:,}/{survived:,} survived  "
      f"fds {g.get('fd_first_max')}->{g.get('fd_last_max')}  "
      f"rss {g.get('rss_first_max_kb', 0) / 1024:.1f}->{g.get('rss_last_max_kb', 0) / 1024:.1f} MiB  "
      f"{'PASS' if not r['failures'] else 'FAIL'}")
EOF
done
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "soak: FAILED for ${FAILED[*]}"
    exit 1
fi
echo "soak: all passed"
