#!/usr/bin/env bash
# The evidence behind the benchmarks' CPU cap (docs/benchmarks.md): the
# stackless server at 256 keep-alive connections, a fresh server per run,
# uncapped and capped, with its own counters: how many requests shared each
# epoll_wait, and the CPU per request that followed.
#
# Usage: scripts/bench-cpu-method.sh [RUNS [CAPS...]]   (default: 5 runs; caps 0 50 30)
# Server on CPU 0 (in a cgroup of its own, scripts/lib/cpu-cap.sh), wrk -t1 on
# CPU 1, a 1 s warm-up and a 4 s measured run each. Needs root for the cgroup.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
shift || true
CAPS=("$@")
[ ${#CAPS[@]} -gt 0 ] || CAPS=(0 50 30)
[[ "$RUNS" =~ ^[0-9]+$ ]] && [ "$RUNS" -ge 1 ] && [ "$RUNS" -le 50 ] || { echo "RUNS must be 1..50" >&2; exit 2; }
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
source scripts/lib/cpu-cap.sh
[ "$(cap_mode)" != none ] || { echo "needs a cgroup cpu controller" >&2; exit 1; }
cargo build --release -q -p httplite
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; cap_remove_all; }
trap cleanup EXIT

stats() { curl -s "http://127.0.0.1:$1/_httplite/stats"; }
echo "| cap | run | requests/s | requests per epoll_wait | server CPU µs/request |"
echo "| --- | --- | --- | --- | --- |"
for cap in "${CAPS[@]}"; do
    for run in $(seq 1 "$RUNS"); do
        port=$((20000 + RANDOM % 20000)) cg=cpu-method-$$-$cap-$run
        cap_create "$cg"; cap_set "$cg" "$cap"
        cap_spawn "$cg" taskset -c 0 target/release/httplite --bind "127.0.0.1:$port" --workers 1 --quiet
        SPID=$!
        for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$port/_httplite/plaintext" && break; sleep 0.1; done
        url=http://127.0.0.1:$port/_httplite/plaintext
        taskset -c 1 wrk -t1 -c256 -d1s "$url" > /dev/null
        s0=$(stats "$port"); u0=$(cap_usage_ns "$cg")
        out=$(taskset -c 1 wrk -t1 -c256 -d4s "$url")
        u1=$(cap_usage_ns "$cg"); s1=$(stats "$port")
        kill "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""
        cap_remove "$cg"
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
