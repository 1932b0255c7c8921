#!/usr/bin/env bash
# The evidence behind the benchmarks' method (docs/benchmarks.md): the
# stackless server at 256 keep-alive connections, with its own counters.
#
# Usage: scripts/bench-cpu-method.sh [RUNS [CAPS...]]   (default: 5 runs; caps 0 50 30)
#   A fresh server per run, uncapped and capped: how many requests shared
#   each epoll_wait, and the CPU per request that followed (why the old
#   figure flipped, and what the cap does).
# Usage: scripts/bench-cpu-method.sh --slices [SERVERS [SLICES [CAP]]]   (default: 3 10 0)
#   SERVERS fresh servers in a row, each measured in SLICES one-second slices:
#   the CPU per request of every slice, and how much of it the kernel's (the
#   host's slow spells show as runs of slices 20-35 % high, across restarts).
# Server on CPU 0 (in a cgroup of its own, scripts/lib/cpu-cap.sh, with
# address-space randomisation off), wrk -t1 on CPU 1, a 1 s warm-up each.
# Needs root for the cgroup.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=runs
[ "${1:-}" = --slices ] && { MODE=slices; shift; }
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
source scripts/lib/cpu-cap.sh
[ "$(cap_mode)" != none ] || { echo "needs a cgroup cpu controller" >&2; exit 1; }
cargo build --release -q -p httplite
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; cap_remove_all; }
trap cleanup EXIT

stats() { curl -s "http://127.0.0.1:$1/_httplite/stats"; }
start() { # cgroup cap -> SPID, PORT, URL
    PORT=$((20000 + RANDOM % 20000))
    cap_create "$1"; cap_set "$1" "$2"
    cap_spawn "$1" taskset -c 0 setarch -R target/release/httplite --bind "127.0.0.1:$PORT" --workers 1 --quiet
    SPID=$!
    for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/_httplite/plaintext" && break; sleep 0.1; done
    URL=http://127.0.0.1:$PORT/_httplite/plaintext
    taskset -c 1 wrk -t1 -c256 -d1s "$URL" > /dev/null
}
stop() { kill "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""; cap_remove "$1"; }

if [ "$MODE" = slices ]; then
    SERVERS=${1:-3} SLICES=${2:-10} CAP=${3:-0}
    for n in "$SERVERS" "$SLICES"; do
        [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 50 ] || { echo "SERVERS and SLICES must be 1..50" >&2; exit 2; }
    done
    echo "| server | slice | requests/s | server CPU µs/request | of which kernel |"
    echo "| --- | --- | --- | --- | --- |"
    for srv in $(seq 1 "$SERVERS"); do
        cg=cpu-method-$$-s$srv
        start "$cg" "$CAP"
        for sl in $(seq 1 "$SLICES"); do
            u0=$(cap_usage_ns "$cg") k0=$(cap_system_ns "$cg")
            out=$(taskset -c 1 wrk -t1 -c256 -d1s "$URL")
            u1=$(cap_usage_ns "$cg") k1=$(cap_system_ns "$cg")
            python3 - "$(grep -Eo '[0-9]+ requests in [0-9.]+s' <<<"$out")" "$((u1 - u0))" "$((k1 - k0))" "$srv" "$sl" <<'PY'
import sys
reqs, secs = int(sys.argv[1].split()[0]), float(sys.argv[1].split()[-1].rstrip("s"))
cpu, kern = int(sys.argv[2]), int(sys.argv[3])
print(f"| {sys.argv[4]} | {sys.argv[5]} | {reqs / secs:,.0f} | {cpu / 1e3 / reqs:.2f} | {100 * kern / cpu:.0f} % |")
PY
        done
        stop "$cg"
    done
    exit 0
fi

RUNS=${1:-5}
shift || true
CAPS=("$@")
[ ${#CAPS[@]} -gt 0 ] || CAPS=(0 50 30)
[[ "$RUNS" =~ ^[0-9]+$ ]] && [ "$RUNS" -ge 1 ] && [ "$RUNS" -le 50 ] || { echo "RUNS must be 1..50" >&2; exit 2; }
echo "| cap | run | requests/s | requests per epoll_wait | server CPU µs/request |"
echo "| --- | --- | --- | --- | --- |"
for cap in "${CAPS[@]}"; do
    for run in $(seq 1 "$RUNS"); do
        cg=cpu-method-$$-$cap-$run
        start "$cg" "$cap"
        s0=$(stats "$PORT"); u0=$(cap_usage_ns "$cg")
        out=$(taskset -c 1 wrk -t1 -c256 -d4s "$URL")
        u1=$(cap_usage_ns "$cg"); s1=$(stats "$PORT")
        stop "$cg"
        python3 - "$s0" "$s1" "$(grep -Eo '[0-9]+ requests in [0-9.]+s' <<<"$out")" "$((u1 - u0))" "$cap" "$run" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
reqs, secs = int(sys.argv[3].split()[0]), float(sys.argv[3].split()[-1].rstrip("s"))
def total(j, k):
    return sum(w["runtime"][k] for w in j["workers"])
waits = total(b, "epoll_waits") - total(a, "epoll_waits")
cap = "none" if sys.argv[5] == "0" else f"{sys.argv[5]} %"
print(f"| {cap} | {sys.argv[6]} | {reqs / secs:,.0f} | {reqs / waits:.1f} | {int(sys.argv[4]) / 1e3 / reqs:.2f} |")
PY
    done
done
