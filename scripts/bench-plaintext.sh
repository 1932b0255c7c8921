#!/usr/bin/env bash
# Plaintext throughput and server CPU per request, httplite vs nginx, in one
# run. The server gets CPU 0 (one worker), wrk gets CPU 1. On two cores a
# non-pipelined wrk saturates its own core first, so the column that ranks
# servers is CPU time per request (user+sys from /proc/PID/stat).
#
# Usage: scripts/bench-plaintext.sh [--runtime R] [--duration 10s] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=stackless
DURATION=10s
ROUNDS=1
while [ $# -gt 0 ]; do
    case "$1" in
        --runtime) RUNTIME=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
need() { command -v "$1" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2"; }; }
need wrk wrk
need nginx nginx-light
ulimit -n 20000
cargo build --release -p httplite -q
TMP=$(mktemp -d)
PORT=$((10000 + RANDOM % 20000))
TICKS=$(getconf CLK_TCK)
PATH_="/_httplite/plaintext"

cpu_ticks() { # all threads of a process: utime + stime
    awk '{print $14 + $15}' "/proc/$1/stat"
}

start_server() { # name -> sets SPID (the process whose CPU is measured)
    case "$1" in
        httplite)
            taskset -c 0 target/release/httplite --bind "127.0.0.1:$PORT" --workers 1 \
                --runtime "$RUNTIME" --quiet &
            SPID=$!; MPID=$SPID ;;
        nginx)
            scripts/lib/nginx-conf.sh "$TMP" "$PORT" > "$TMP/nginx.conf"
            taskset -c 0 nginx -c "$TMP/nginx.conf" -p "$TMP" &
            MPID=$!
            sleep 0.5
            SPID=$(pgrep -P "$(cat "$TMP/nginx.pid")" | head -1) ;;
    esac
    for _ in $(seq 1 50); do
        curl -s -o /dev/null "http://127.0.0.1:$PORT$PATH_" && return 0
        sleep 0.1
    done
    echo "$1 did not start" >&2; exit 1
}

stop_server() {
    if [ "$1" = nginx ]; then kill -QUIT "$(cat "$TMP/nginx.pid")"; else kill -TERM "$SPID"; fi
    wait "$MPID" 2>/dev/null || true
}

run_one() { # server mode -> "rps p50 p99 cpu_us_per_req"
    local server=$1 mode=$2
    start_server "$server"
    local args=(-t1 -c256 -d"$DURATION" --latency)
    [ "$mode" = pipelined ] && args=(-t1 -c256 -d"$DURATION" -s scripts/lib/pipeline.lua)
    local before after
    before=$(cpu_ticks "$SPID")
    WRK_PATH=$PATH_ taskset -c 1 wrk "${args[@]}" "http://127.0.0.1:$PORT$PATH_" > "$TMP/wrk.out"
    after=$(cpu_ticks "$SPID")
    stop_server "$server"
    python3 - "$TMP/wrk.out" "$before" "$after" "$TICKS" <<'PY'
import re, sys
out = open(sys.argv[1]).read()
before, after, ticks = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
reqs = int(re.search(r"(\d+) requests in", out).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
def lat(p):
    m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)", out, re.M)
    if not m: return "-"
    v, u = float(m.group(1)), m.group(2)
    return f"{v * {'us': 1e-3, 'ms': 1, 's': 1e3}[u]:.2f} ms"
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
if errors: sys.exit(f"wrk saw {errors.group(1)} error responses")
cpu_s = (after - before) / ticks
print(f"{rps:.0f} {lat(50)} {lat(99)} {cpu_s * 1e6 / reqs:.2f}".replace(" ms", "ms"))
PY
}

declare -A RES
for round in $(seq 1 "$ROUNDS"); do
    for mode in keepalive pipelined; do
        for server in httplite nginx; do
            RES[$server,$mode,$round]=$(run_one "$server" "$mode")
        done
    done
done

median() { python3 -c 'import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
echo "| server | workload | requests/s | p50 | p99 | server CPU µs/request | CPU/request vs nginx | requests/s per busy server core |"
echo "|---|---|---|---|---|---|---|---|"
for mode in keepalive pipelined; do
    declare -A M
    for server in httplite nginx; do
        rps=(); cpu=(); p50=""; p99=""
        for round in $(seq 1 "$ROUNDS"); do
            read -r r a b c <<<"${RES[$server,$mode,$round]}"
            rps+=("$r"); cpu+=("$c"); p50=$a; p99=$b
        done
        M[$server,rps]=$(median "${rps[@]}"); M[$server,cpu]=$(median "${cpu[@]}")
        M[$server,p50]=$p50; M[$server,p99]=$p99
    done
    for server in httplite nginx; do
        ratio=$(python3 -c "print(f'{${M[$server,cpu]} / ${M[nginx,cpu]}:.2f}')")
        per_core=$(python3 -c "print(f'{1e6 / ${M[$server,cpu]}:.0f}')")
        label=$mode; [ "$mode" = keepalive ] && label="keep-alive c256" || label="pipelined 16 c256"
        echo "| $server | $label | ${M[$server,rps]%.*} | ${M[$server,p50]} | ${M[$server,p99]} | ${M[$server,cpu]} | $ratio | $per_core |"
    done
done
rm -rf "$TMP"
