#!/usr/bin/env bash
# Event-loop latency with and without CPU-bound background jobs: plaintext
# p99 (wrk, non-pipelined) with the blocking pool idle, then while jobs keep
# 2 pool threads computing flat out (2 cores' worth of CPU demand). The
# hybrid design's claim is that the loop hardly notices: jobs never run on
# it, and the kernel schedules the pool threads (--pool-priority, default
# idle: SCHED_IDLE) behind it.
#
# Jobs: by default `spin` (test-only: SHA-256 over 10 MiB generated from a
# tiny input),
# so that the loop's share of the job traffic is a few requests per job.
# `--job sha256` submits real 1 MiB sha256 jobs instead: then the loop also
# reads every job's input, as fast as the pool hashes it (hundreds of MB/s),
# and on 2 cores that reading competes with the plaintext requests.
#
# Placement on a 2-core machine: wrk on CPU 1; the server (1 worker, 2 pool
# threads) and the job feeder may use both CPUs, as a real deployment would.
# How much CPU the pool threads got is measured from /proc (utime+stime of
# the threads named httplite-pool), so "2 cores' worth" is checked, not
# assumed: on 2 cores that also run wrk and the loop, they get what is left.
#
# Not run in CI. Usage: scripts/bench-jobs-latency.sh [--runtime R]
#   [--duration 10s] [--rounds 3] [--connections 32]
#   [--pool-priority idle|low|normal] [--job spin|sha256]
#   [--job-size N (spin: MiB, default 10; sha256: bytes, default 1048576)]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=stackless
DURATION=10
CONNS=32
JOB=spin
JOB_SIZE=10
ROUNDS=3
PRIO_ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runtime) RUNTIME=$2; shift 2 ;;
        --duration) DURATION=${2%s}; shift 2 ;;
        --connections) CONNS=$2; shift 2 ;;
        --job) JOB=$2; shift 2 ;;
        --job-size) JOB_SIZE=$2; shift 2 ;;
        --pool-priority) PRIO_ARGS=(--pool-priority "$2"); shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
need() { command -v "$1" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2"; }; }
need wrk wrk
need curl curl
ulimit -n 20000
cargo build --release -p httplite -q
BIN=${CARGO_TARGET_DIR:-target}/release/httplite
TMP=$(mktemp -d)
PORT=$((10000 + RANDOM % 20000))
TICKS=$(getconf CLK_TCK)
URL="http://127.0.0.1:$PORT/_httplite/plaintext"

[ "$JOB" = sha256 ] && [ "$JOB_SIZE" = 10 ] && JOB_SIZE=1048576
HTTPLITE_TEST_ENDPOINTS=1 "$BIN" --bind "127.0.0.1:$PORT" --workers 1 --runtime "$RUNTIME" \
    --pool-threads 2 --pool-queue 64 "${PRIO_ARGS[@]}" --quiet &
SPID=$!
trap 'kill -TERM $SPID 2>/dev/null; wait $SPID 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 1 50); do curl -s -o /dev/null "$URL" && break; sleep 0.1; done

pool_ticks() { # utime+stime of the pool threads (those alive now)
    local t=0 f
    for f in /proc/"$SPID"/task/*; do
        [ "$(cat "$f/comm" 2>/dev/null)" = httplite-pool ] || continue
        t=$((t + $(awk '{print $14 + $15}' "$f/stat")))
    done
    echo "$t"
}

p99() { # wrk output -> "p50 p99" in ms
    python3 - "$1" <<'PY'
import re, sys
out = open(sys.argv[1]).read()
def ms(p):
    v, u = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)", out, re.M).groups()
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[u]
rps = re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)
print(f"{ms(50):.3f} {ms(99):.3f} {rps}")
PY
}

run_wrk() { # file
    taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$URL" > "$1"
}

echo "runtime $RUNTIME, wrk -t1 -c$CONNS -d${DURATION}s on CPU 1, pool: 2 threads ${PRIO_ARGS[*]:-(default priority)}, jobs: $JOB $JOB_SIZE, $ROUNDS round(s)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# Each round measures idle, then busy, back to back, so that both see the
# same background load; the summary is the median over rounds.
for r in $(seq 1 "$ROUNDS"); do
    run_wrk "$TMP/idle.out"
    read -r IDLE_P50 IDLE_P99 IDLE_RPS < <(p99 "$TMP/idle.out")
    echo "round $r idle:  p50 ${IDLE_P50} ms  p99 ${IDLE_P99} ms  (${IDLE_RPS} req/s)"

    # Jobs: 4 submitters keep 2 running and 2 queued at all times.
    python3 scripts/lib/job_feeder.py "$PORT" 4 "$JOB" "$JOB_SIZE" $((DURATION + 3)) > "$TMP/jobs.out" &
    FPID=$!
    sleep 2 # the pool is saturated before measuring
    T0=$(pool_ticks)
    run_wrk "$TMP/busy.out"
    T1=$(pool_ticks)
    wait "$FPID"
    read -r BUSY_P50 BUSY_P99 BUSY_RPS < <(p99 "$TMP/busy.out")
    CORES=$(python3 -c "print(f'{($T1 - $T0) / $TICKS / $DURATION:.2f}')")
    echo "round $r jobs:  p50 ${BUSY_P50} ms  p99 ${BUSY_P99} ms  (${BUSY_RPS} req/s);" \
        "$(cat "$TMP/jobs.out") $JOB jobs ($JOB_SIZE) checked; pool threads used $CORES cores"
    echo "$IDLE_P99 $BUSY_P99" >> "$TMP/p99s"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$TMP/p99s" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
idle = statistics.median(r[0] for r in rows)
busy = statistics.median(r[1] for r in rows)
print(f"median p99: idle {idle:.3f} ms, with jobs {busy:.3f} ms, ratio {busy / idle:.2f}")
PY
