#!/usr/bin/env bash
# Runtime micro-benchmarks, ours vs tokio current_thread, as ratios in one run.
#
# Each benchmark is run ROUNDS times, the two runtimes interleaved, pinned
# with taskset; the table shows the median of the per-round criterion medians
# (and min/max), then ours/tokio. Usage: scripts/bench-runtime.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-5}"
CPUS="${CPUS:-0,1}"   # wake_remote needs two threads; the others use one

cargo bench -p httplite-benches --bench runtime --no-run 2>/dev/null
BIN=$(cargo bench -p httplite-benches --bench runtime --no-run --message-format=json 2>/dev/null |
    python3 -c 'import sys,json
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="runtime": print(m["executable"])')

BENCHES=(spawn_complete wake_local wake_remote timer_insert_cancel/0 timer_insert_cancel/100000)
OUT=$(mktemp -d)
for round in $(seq 1 "$ROUNDS"); do
    for b in "${BENCHES[@]}"; do
        group=${b%%/*}; param=${b#*/}; [ "$param" = "$b" ] && param=""
        for rt in httplite tokio; do
            id="$group/$rt${param:+/$param}"
            taskset -c "$CPUS" "$BIN" --bench "^${id}\$" --warm-up-time 1 --measurement-time 2 \
                --noplot >/dev/null 2>&1
            est="target/criterion/$group/$rt${param:+/$param}/new/estimates.json"
            python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["median"]["point_estimate"])' \
                "$est" >>"$OUT/$(echo "$id" | tr / _)"
        done
    done
    echo "round $round/$ROUNDS done" >&2
done

python3 - "$OUT" "${BENCHES[@]}" <<'PY'
import sys, statistics, os
out = sys.argv[1]
def fmt(ns): return f"{ns/1000:.2f} µs" if ns >= 1000 else f"{ns:.1f} ns"
print(f"| benchmark | httplite median (min–max) | tokio median (min–max) | httplite/tokio |")
print(f"| --- | --- | --- | --- |")
for b in sys.argv[2:]:
    group, _, param = b.partition("/")
    vals = {}
    for rt in ("httplite", "tokio"):
        name = f"{group}_{rt}" + (f"_{param}" if param else "")
        vals[rt] = [float(x) for x in open(os.path.join(out, name))]
    m = {rt: statistics.median(v) for rt, v in vals.items()}
    cell = lambda rt: f"{fmt(m[rt])} ({fmt(min(vals[rt]))}–{fmt(max(vals[rt]))})"
    print(f"| {b} | {cell('httplite')} | {cell('tokio')} | {m['httplite']/m['tokio']:.2f} |")
PY
