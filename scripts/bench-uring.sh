#!/usr/bin/env bash
# The completion model against the readiness model, in one run: epoll
# stackless, uring, and monoio (the io_uring peer, benches/peers), one worker each, server on CPU 0 in a cgroup capped
# at CAP % (scripts/lib/cpu-cap.sh; docs/benchmarks.md says why), wrk -t1 on
# CPU 1. Per runtime and round, a fresh server:
#   - keep-alive c256, plaintext: requests/s, server CPU µs/request, p99;
#   - the same, 16 pipelined per write (scripts/lib/pipeline.lua);
#   - 5,000 connections on the 10 ms sleep route: p99.
# Requests per request counted by the server's own counters are in
# scripts/syscalls-per-request.sh (strace) instead.
#
# Ends with a summary: per server and workload, the median over rounds and
# (min–max).
#
# Usage: scripts/bench-uring.sh [ROUNDS]   (default 3; CAP=50 DUR=4 override;
#        SERVERS="stackless uring monoio" and LOADS="c256 pipelined c5000-sleep10"
#        choose the rows)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
CAP=${CAP:-50}
DUR=${DUR:-4}
SERVERS=${SERVERS:-stackless uring monoio}
LOADS=${LOADS:-c256 pipelined c5000-sleep10}
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 20 ] || { echo "ROUNDS must be 1..20" >&2; exit 2; }
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
source scripts/lib/cpu-cap.sh
[ "$(cap_mode)" != none ] || { echo "needs a cgroup cpu controller (root)" >&2; exit 1; }
cargo build --release -q -p httplite
case " $SERVERS " in *" monoio "*)
    CARGO_TARGET_DIR="$PWD/target/peers" cargo build --release -q --manifest-path benches/peers/Cargo.toml ;;
esac
ulimit -n 20000
SPID=""
ROWS=$(mktemp)
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; cap_remove_all; rm -f "$ROWS"; }
trap cleanup EXIT

p99_ms() { # wrk --latency output -> p99 in ms
    awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 }
        else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }
        print v }'
}
reqs() { grep -Eo '[0-9]+ requests in' | awk '{print $1}'; }

echo "| runtime | round | workload | requests/s | server CPU µs/request | p99 ms | errors |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
    for rt in $SERVERS; do
        for load in $LOADS; do
            port=$((20000 + RANDOM % 20000)) cg=bench-uring-$$-$rt-$round-$load
            cap_create "$cg"; cap_set "$cg" "$CAP"
            if [ "$rt" = monoio ]; then
                cap_spawn "$cg" taskset -c 0 target/peers/release/peer-monoio --bind "127.0.0.1:$port" --workers 1
            else
                cap_spawn "$cg" taskset -c 0 target/release/httplite --bind "127.0.0.1:$port" \
                    --workers 1 --runtime "$rt" --quiet
            fi
            SPID=$!
            for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$port/_httplite/plaintext" && break; sleep 0.1; done
            url=http://127.0.0.1:$port/_httplite/plaintext
            case $load in
                c256) args=(-c256 --latency) ;;
                pipelined) args=(-c256 -s scripts/lib/pipeline.lua) ;;
                c5000-sleep10) args=(-c5000 --latency --timeout 10s); url="http://127.0.0.1:$port/_httplite/sleep?ms=10" ;;
            esac
            taskset -c 1 wrk -t1 "${args[@]}" -d1s "$url" > /dev/null 2>&1 || true
            u0=$(cap_usage_ns "$cg")
            out=$(taskset -c 1 wrk -t1 "${args[@]}" -d"${DUR}s" "$url" 2>&1) || true
            u1=$(cap_usage_ns "$cg")
            kill "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""
            cap_remove "$cg"
            n=$(reqs <<<"$out" || true); n=${n:-0}
            p99=$(p99_ms <<<"$out" || true); [ "$load" = pipelined ] && p99="-"
            err=$( (grep -Eo 'Socket errors:.*|Non-2xx.*' <<<"$out" || true) | tr '\n' ' ')
            python3 -c "
n, u, d = $n, $((u1 - u0)), $DUR
print(f'| $rt | $round | $load | {n / d:,.0f} | {u / 1e3 / n if n else float(\"nan\"):.2f} | ${p99:--} | ${err:-0} |')" | tee -a "$ROWS"
        done
    done
done

echo
echo "| runtime | workload | rounds | requests/s | server CPU µs/request | p99 ms |"
echo "|---|---|---|---|---|---|"
python3 - "$ROWS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    c = [x.strip() for x in line.strip().strip('|').split('|')]
    rows.setdefault((c[0], c[2]), []).append(c)
def cell(vals, fmt):
    v = [float(x.replace(',', '')) for x in vals if x not in ('-', 'nan')]
    if not v:
        return '-'
    return f"{fmt(statistics.median(v))} ({fmt(min(v))}–{fmt(max(v))})"
for (rt, load), rs in rows.items():
    print(f"| {rt} | {load} | {len(rs)} | {cell([r[3] for r in rs], lambda x: f'{x:,.0f}')} "
          f"| {cell([r[4] for r in rs], lambda x: f'{x:.2f}')} | {cell([r[5] for r in rs], lambda x: f'{x:.2f}')} |")
PY
