#!/usr/bin/env bash
# The comparison benchmark: every httplite configuration (runtime × dispatch ×
# workers) and the peers (nginx, tokio + hyper, may_minihttp, monoio) over every
# workload, interleaved and repeated, then target/bench/report.md with SVG
# charts.
#
# Pinning: 1-worker servers run on CPU 0 and wrk on CPU 1. The 2-worker
# httplite configurations get CPUs 0,1 and so share CPU 1 with wrk; their
# requests/s is not comparable with the 1-worker rows (the report says so).
#
# Every server runs in a cgroup of its own (scripts/lib/cpu-cap.sh), which
# counts its CPU time (every thread and process it ran: nginx's worker, fork's
# children), and with address-space randomisation off (setarch -R), so that
# each round runs the same memory layout. Order: for each round, for each
# workload, every configuration in turn (slice by slice in the saturated
# ones), so drift on the shared machine spreads over all of them.
#
# Saturated workloads (plaintext keep-alive, pipelined, churn): the cgroup caps
# the server at --cap % of one core (default 50), below what wrk on its own
# core can drive, so every server is the bottleneck in every run and its CPU
# per request is the cost of a request at full load. Without the cap, wrk
# saturates first, the server sleeps between requests, and its CPU per request
# measures how often it slept: the figure that flipped between two values
# from round to round (docs/benchmarks.md). A run where the server was
# throttled in under 80 % of the periods was not saturated and is marked so.
# The churn workload runs at half the cap: a new connection costs wrk about
# as much as it costs the server, and at 50 % every server waited for wrk
# (throttled in 33-95 % of the periods, 2026-11-29).
# These workloads run in slices: for each of them, each round starts every
# configuration at once, warms each up, then gives each in turn a --slice of
# load, --slices times over; a cell's figure for the round is the median of
# its slices. The host slows the whole machine down by up to a third for
# seconds to a minute at a time (docs/benchmarks.md); interleaved short
# slices put a short spell on one slice of each server instead of on one
# server's whole run.
# Ratios: the report gives each configuration's CPU per request in each
# saturated workload as a ratio to that workload's best peer (the peer with
# the lowest figure) with a 95 % confidence interval. The configurations run
# in a fixed order within a round (rotated from round to round), one slice
# each per pass, so a configuration's neighbour is the best peer's slice of
# the same round nearest in time (slices.csv's t_start): at most half a pass
# away, one slice away when they run next to each other. Each slice gives one
# ratio; the interval is a bootstrap of their median (scripts/lib/ratio_ci.py).
# A goal "ahead of the best peer" is met when the interval's upper bound is
# below 1.
# Open workloads (the static file, 10 ms sleeps at 5,000 connections) run
# uncapped: their requests/s and latency are the figures.
#
# Usage: scripts/bench.sh [--rounds N] [--duration D] [--cap PCT] [--quick]
#                         [--no-memory] [--no-instructions] [--no-micro]
#   --quick   fewer configurations (1 worker acceptor for each runtime, plus
#             stackless reuseport/2 workers, plus the peers) and smaller
#             memory / instruction runs, shorter micro-benchmarks
#   --cap PCT   the saturated workloads' CPU cap, % of one core (default 50)
#   --slices N, --slice D   the saturated workloads' slices per round
#             (default 5) and their length (default 1s); --duration is the
#             open workloads' run
#   --no-micro  skip the criterion micro-benchmarks (switch, spawn, wake,
#             timers) and the memory per suspended coroutine / pending task
#   --only A,B  run only these configurations (names as in the report, e.g.
#             httplite-stackless-reuseport-w1,nginx), --workloads X,Y only
#             these workloads (e.g. churn-close-c64): one comparison, quickly
# Output: target/bench/results.csv (a row per run, or per round of slices),
#         slices.csv (every slice, with its start time), memory.csv, instructions.csv, micro-rss.txt,
#         report.md, *.svg (criterion's own results stay in target/criterion)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3
DURATION=3s
QUICK=0
MEMORY=1
INSTR=1
MICRO=1
CAP=50
SLICES=5
SLICE=1s
ONLY=""
ONLY_WORKLOADS=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --no-memory) MEMORY=0; shift ;;
        --no-instructions) INSTR=0; shift ;;
        --no-micro) MICRO=0; shift ;;
        --only) ONLY=$2; shift 2 ;;
        --workloads) ONLY_WORKLOADS=$2; shift 2 ;;
        --cap) CAP=$2; shift 2 ;;
        --slices) SLICES=$2; shift 2 ;;
        --slice) SLICE=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 50 ] || { echo "--rounds must be 1..50" >&2; exit 2; }
[[ "$SLICES" =~ ^[0-9]+$ ]] && [ "$SLICES" -ge 1 ] && [ "$SLICES" -le 50 ] || { echo "--slices must be 1..50" >&2; exit 2; }
[[ "$CAP" =~ ^[0-9]+$ ]] && [ "$CAP" -ge 1 ] && [ "$CAP" -le 100 ] || { echo "--cap must be 1..100" >&2; exit 2; }
source scripts/lib/cpu-cap.sh
[ "$(cap_mode)" != none ] || { echo "bench.sh: needs a cgroup cpu controller (scripts/lib/cpu-cap.sh)" >&2; exit 1; }

need() { command -v "$1" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2"; }; }
need wrk wrk
need nginx nginx-light
need taskset util-linux
ulimit -n 20000

echo "building httplite and the peers" >&2
cargo build --release -p httplite -q
CARGO_TARGET_DIR="$PWD/target/peers" cargo build --release -q \
    --manifest-path benches/peers/Cargo.toml
HTTPLITE=target/release/httplite
PEER_HYPER=target/peers/release/peer-hyper
PEER_MAY=target/peers/release/peer-may
PEER_MONOIO=target/peers/release/peer-monoio

OUT=target/bench
mkdir -p "$OUT"
# A report never mixes runs: what this run skips is left out, not kept from the last.
rm -f "$OUT"/*.svg "$OUT"/first-byte.md "$OUT"/memory.csv "$OUT"/instructions.csv "$OUT"/micro-rss.txt "$OUT"/micro-criterion.log
TMP=$(mktemp -d)
# A server still running when the script ends (Ctrl-C, an error) is stopped
# before its cgroup is removed: rmdir fails while a process is inside.
trap 'declare -F stop_all > /dev/null && stop_all; cap_remove_all; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/www"
head -c 1048576 /dev/urandom > "$TMP/www/file.bin"
# nginx's worker drops to an unprivileged user when started as root.
chmod 755 "$TMP" "$TMP/www"; chmod 644 "$TMP/www/file.bin"
PORT=$((10000 + RANDOM % 20000))

# The designs this binary has: the event-loop ones take --dispatch and
# --workers; threadpool and fork run as one configuration each with their
# defaults (fork rejects --workers: its parent runs one thread), and the
# thread pool once more in connection mode (threadpool-connection: a thread
# per connection instead of per request).
RUNTIMES=()
for rt in stackless stackful threads threadpool fork uring; do
    "$HTTPLITE" --runtime "$rt" --version > /dev/null 2>&1 && RUNTIMES+=("$rt")
done
# Configurations: name|kind|runtime|dispatch|workers ("-": the server's default)
CONFIGS=()
for rt in "${RUNTIMES[@]}"; do
    case "$rt" in
        threadpool)
            CONFIGS+=("httplite-threadpool|httplite|threadpool|-|-")
            CONFIGS+=("httplite-threadpool-connection|httplite|threadpool-connection|-|-")
            continue ;;
        fork) CONFIGS+=("httplite-$rt|httplite|$rt|-|-"); continue ;;
    esac
    if [ "$QUICK" = 1 ]; then
        CONFIGS+=("httplite-$rt-acceptor-w1|httplite|$rt|acceptor|1")
        [ "$rt" = stackless ] && CONFIGS+=("httplite-stackless-reuseport-w2|httplite|stackless|reuseport|2")
    else
        for d in acceptor reuseport; do
            for w in 1 2; do CONFIGS+=("httplite-$rt-$d-w$w|httplite|$rt|$d|$w"); done
        done
    fi
done
CONFIGS+=("nginx|nginx|-|-|1" "tokio-hyper|hyper|-|-|1" "may_minihttp|may|-|-|1" "monoio|monoio|-|-|1")
# --only / --workloads: keep the named entries (the first field is the name).
keep_named() { # list-of-names array-name
    local -n arr=$2
    local kept=() e
    for e in "${arr[@]}"; do
        case ",$1," in *",${e%%|*},"*) kept+=("$e") ;; esac
    done
    [ ${#kept[@]} -gt 0 ] || { echo "none of $1 is a known name" >&2; exit 2; }
    arr=("${kept[@]}")
}

# Workloads: name|connections|path-kind|mode|capped (1: saturated at --cap,
# 2: saturated at half of it, 0: open)
WORKLOADS=(
    "keepalive-c64|64|plain|latency|1"
    "keepalive-c256|256|plain|latency|1"
    "keepalive-c1024|1024|plain|latency|1"
    "keepalive-c4096|4096|plain|latency|1"
    "pipelined16-c256|256|plain|pipeline|1"
    "static-1MiB-c64|64|static|latency|0"
    "sleep10ms-c5000|5000|sleep|latency|0"
    "churn-close-c64|64|churn|close|2"
)
[ -z "$ONLY" ] || keep_named "$ONLY" CONFIGS
[ -z "$ONLY_WORKLOADS" ] || keep_named "$ONLY_WORKLOADS" WORKLOADS

path_for() { # kind pathkind -> path or empty if unsupported
    case "$2" in
        plain) echo "/_httplite/plaintext" ;;
        static) case "$1" in httplite|nginx) echo "/file.bin" ;; *) echo "" ;; esac ;;
        sleep) case "$1" in httplite|hyper|may|monoio) echo "/_httplite/sleep?ms=10" ;; *) echo "" ;; esac ;;
        # may_minihttp ignores `Connection: close` (it keeps the connection
        # open), so a churn run would measure keep-alive; leave it out.
        churn) case "$1" in may) echo "" ;; *) echo "/_httplite/plaintext" ;; esac ;;
    esac
}

nginx_conf() { # the shared config plus the static file
    scripts/lib/nginx-conf.sh "$TMP" "$1" |
        sed -e "s|^http {|http {\n    sendfile on;|" -e "s|^    server {|    server {\n        root $TMP/www;\n        location = /file.bin { default_type application/octet-stream; }|"
}

# Servers live in numbered slots (a round of slices runs every configuration
# at once): PIDS[slot], KINDS[slot], CGS[slot], PORTS[slot].
PIDS=() KINDS=() CGS=() PORTS=() NCG=0
start_server() { # slot kind runtime dispatch workers
    local slot=$1 kind=$2 rt=$3 disp=$4 w=$5 cpus=0 flags=() port cg log
    local design=(--runtime "$rt")
    [ "$rt" = threadpool-connection ] && design=(--runtime threadpool --threadpool-mode connection)
    [ "$w" = 2 ] && cpus=0,1
    PORT=$((PORT + 1)); [ "$PORT" -gt 60000 ] && PORT=10000
    port=$PORT log="$TMP/server-$slot.log"
    NCG=$((NCG + 1)); cg=httplite-bench-$$-$NCG
    cap_create "$cg"
    KINDS[slot]=$kind CGS[slot]=$cg PORTS[slot]=$port
    # setarch -R: the same address-space layout in every round, one thing
    # less that differs between rounds (docs/benchmarks.md).
    local run=(taskset -c "$cpus" setarch -R)
    case "$kind" in
        httplite)
            [ "$disp" != - ] && flags+=(--dispatch "$disp")
            [ "$w" != - ] && flags+=(--workers "$w")
            cap_spawn "$cg" "${run[@]}" "$HTTPLITE" --bind "127.0.0.1:$port" "${design[@]}" \
                "${flags[@]}" --root "$TMP/www" --expose plaintext,sleep --quiet > "$log" 2>&1 ;;
        nginx)
            rm -f "$TMP/nginx.pid"
            nginx_conf "$port" > "$TMP/nginx.conf"
            cap_spawn "$cg" "${run[@]}" nginx -c "$TMP/nginx.conf" -p "$TMP" > "$log" 2>&1 ;;
        hyper) cap_spawn "$cg" "${run[@]}" "$PEER_HYPER" --bind "127.0.0.1:$port" --workers "$w" > "$log" 2>&1 ;;
        may) cap_spawn "$cg" "${run[@]}" "$PEER_MAY" --bind "127.0.0.1:$port" --workers "$w" > "$log" 2>&1 ;;
        monoio) cap_spawn "$cg" "${run[@]}" "$PEER_MONOIO" --bind "127.0.0.1:$port" --workers "$w" > "$log" 2>&1 ;;
    esac
    PIDS[slot]=$!
    for _ in $(seq 1 50); do
        curl -s -o /dev/null "http://127.0.0.1:$port/_httplite/plaintext" && return 0
        sleep 0.1
    done
    echo "$kind did not start:" >&2; cat "$log" >&2; return 1
}

stop_server() { # slot
    local slot=$1 pid=${PIDS[$1]:-}
    [ -n "$pid" ] || return 0
    if [ "${KINDS[slot]}" = nginx ]; then kill -QUIT "$pid" 2>/dev/null || true
    else kill -TERM "$pid" 2>/dev/null || true; fi
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    cap_remove "${CGS[slot]}"
    PIDS[slot]=""
}

stop_all() { local slot; for slot in "${!PIDS[@]}"; do stop_server "$slot"; done; }

CSV="$OUT/results.csv" SLICES_CSV="$OUT/slices.csv"
HEADER="round,config,kind,runtime,dispatch,workers,workload,connections,cap_pct,throttled_frac,requests,duration_s,rps,p50_ms,p99_ms,server_cpu_s,cpu_us_per_req,wrk_cpu_s,wrk_wall_s,errors"
echo "$HEADER" > "$CSV"
# slices.csv adds when each slice started (epoch seconds): the report pairs
# each slice with the best peer's slice nearest in time.
echo "slice,$HEADER,t_start" > "$SLICES_CSV"

measure() { # slot duration mode conns path cap prefix -> a CSV row on stdout
    local slot=$1 dur=$2 mode=$3 conns=$4 path=$5 cap=$6 prefix=$7 cg=${CGS[$1]}
    local args=(-t1 -c"$conns" -d"$dur" --timeout 5s)
    case "$mode" in
        latency) args+=(--latency) ;;
        pipeline) args+=(-s scripts/lib/pipeline.lua) ;;
        close) args+=(--latency -H "Connection: close") ;;
    esac
    local before after t0 t1
    before=$(cap_usage_ns "$cg"); t0=$(cap_throttled "$cg")
    TIMEFORMAT='%U %S %R'
    { time WRK_PATH=$path taskset -c 1 setarch -R wrk "${args[@]}" "http://127.0.0.1:${PORTS[slot]}$path" \
        > "$TMP/wrk.out" 2> "$TMP/wrk.err"; } 2> "$TMP/wrk.time" || true
    after=$(cap_usage_ns "$cg"); t1=$(cap_throttled "$cg")
    python3 - "$TMP/wrk.out" "$TMP/wrk.time" "$before" "$after" "$((t1 - t0))" "$cap" "$CAP_PERIOD_US" \
        "$prefix" <<'PY'
import re, sys
out = open(sys.argv[1]).read()
u, s, r = (float(x) for x in open(sys.argv[2]).read().split()[-3:])
before, after, throttled, cap, period, prefix = (int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                                                  int(sys.argv[6]), int(sys.argv[7]), sys.argv[8])
m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
reqs = int(m.group(1)) if m else 0
dur = float(m.group(2)) * {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60}[m.group(3)] if m else 0
rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
rps = float(rps.group(1)) if rps else 0.0
def lat(p):
    m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)", out, re.M)
    return f"{float(m.group(1)) * {'us': 1e-3, 'ms': 1, 's': 1e3}[m.group(2)]:.3f}" if m else ""
errs = 0
for pat in (r"Non-2xx or 3xx responses: (\d+)",):
    e = re.search(pat, out)
    if e: errs += int(e.group(1))
e = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
if e: errs += sum(int(x) for x in e.groups())
cpu = (after - before) / 1e9
per = f"{cpu * 1e6 / reqs:.3f}" if reqs else ""
# The share of the run's CFS periods in which the cap bound the server.
frac = f"{min(1.0, throttled * period / 1e6 / dur):.2f}" if cap and dur else ""
print(f"{prefix},{cap},{frac},{reqs},{dur:.3f},{rps:.0f},{lat(50)},{lat(99)},{cpu:.3f},{per},{u + s:.3f},{r:.3f},{errs}")
PY
}

progress() { # the last row of results.csv, on stderr
    tail -1 "$CSV" | awk -F, -v total="$TOTAL" -v n="$N_DONE" '{printf "[%d/%d] round %s %-32s %-18s cap %3s%% throttled %4s %10s req/s  p99 %8s ms  cpu %7s us/req  errors %s\n", n, total, $1, $2, $7, $9, $10, $13, $15, $17, $20}' >&2
}

run_one() { # round config-line workload-line: an open workload, one run
    local round=$1 name kind rt disp w wl conns pk mode capped path
    IFS='|' read -r name kind rt disp w <<<"$2"
    IFS='|' read -r wl conns pk mode capped <<<"$3"
    path=$(path_for "$kind" "$pk")
    [ -z "$path" ] && return 0
    N_DONE=$((N_DONE + 1))
    start_server 0 "$kind" "$rt" "$disp" "$w" || { echo "$round,$name,$kind,$rt,$disp,$w,$wl,$conns,0,,0,0,0,,,0,,0,0,start-failed" >> "$CSV"; stop_server 0; return 0; }
    cap_set "${CGS[0]}" 0
    measure 0 "$DURATION" "$mode" "$conns" "$path" 0 "$round,$name,$kind,$rt,$disp,$w,$wl,$conns" >> "$CSV"
    stop_server 0
    progress
}

run_sliced() { # round workload-line config-lines...: a saturated workload, in slices
    local round=$1 wl conns pk mode capped slot s c name kind rt disp w path t_start names=() paths=() metas=()
    IFS='|' read -r wl conns pk mode capped <<<"$2"
    shift 2
    local cap=$CAP
    [ "$capped" = 2 ] && cap=$(((CAP + 1) / 2))
    slot=0
    for c in "$@"; do
        IFS='|' read -r name kind rt disp w <<<"$c"
        path=$(path_for "$kind" "$pk")
        [ -z "$path" ] && continue
        if start_server "$slot" "$kind" "$rt" "$disp" "$w"; then
            cap_set "${CGS[slot]}" "$cap"
            names[slot]=$name paths[slot]=$path metas[slot]="$name,$kind,$rt,$disp,$w,$wl,$conns"
            # Warm-up, not measured: the first second of a fresh server is slower.
            taskset -c 1 wrk -t1 -c"$conns" -d1s "http://127.0.0.1:${PORTS[slot]}$path" > /dev/null 2>&1 || true
        else
            echo "$round,$name,$kind,$rt,$disp,$w,$wl,$conns,$cap,,0,0,0,,,0,,0,0,start-failed" >> "$CSV"
            stop_server "$slot"
        fi
        slot=$((slot + 1))
    done
    for s in $(seq 1 "$SLICES"); do
        for slot in "${!names[@]}"; do
            t_start=$(date +%s.%N)
            echo "$(measure "$slot" "$SLICE" "$mode" "$conns" "${paths[slot]}" "$cap" "$s,$round,${metas[slot]}"),${t_start:0:14}" >> "$SLICES_CSV"
        done
    done
    stop_all
    # The round's row: the median slice (CPU per request, requests/s, latency),
    # the least-throttled slice (so an unsaturated one shows), sums of the rest.
    for slot in "${!names[@]}"; do
        N_DONE=$((N_DONE + 1))
        python3 - "$SLICES_CSV" "$round" "${names[slot]}" "$wl" >> "$CSV" <<'PY'
import csv, statistics, sys
path, rnd, cfg, wl = sys.argv[1:]
rows = [r for r in csv.DictReader(open(path)) if (r["round"], r["config"], r["workload"]) == (rnd, cfg, wl)]
def num(r, k):
    try:
        return float(r[k])
    except ValueError:
        return None
def median(k, digits):
    v = [x for x in (num(r, k) for r in rows) if x is not None]
    return f"{statistics.median(v):.{digits}f}" if v else ""
def total(k, digits):
    return f"{sum(num(r, k) or 0 for r in rows):.{digits}f}"
fracs = [x for x in (num(r, "throttled_frac") for r in rows) if x is not None]
r0 = rows[0]
errs = sum(int(r["errors"]) if r["errors"].isdigit() else 1 for r in rows)
print(",".join([rnd, cfg, r0["kind"], r0["runtime"], r0["dispatch"], r0["workers"], wl, r0["connections"],
                r0["cap_pct"], f"{min(fracs):.2f}" if fracs else "", total("requests", 0), total("duration_s", 3),
                median("rps", 0), median("p50_ms", 3), median("p99_ms", 3), total("server_cpu_s", 3),
                median("cpu_us_per_req", 3), total("wrk_cpu_s", 3), total("wrk_wall_s", 3), str(errs)]))
PY
        progress
    done
}

N_RUNS_PER_ROUND=0
for wl in "${WORKLOADS[@]}"; do
    IFS='|' read -r _ _ pk _ _ <<<"$wl"
    for c in "${CONFIGS[@]}"; do
        IFS='|' read -r _ kind _ _ _ <<<"$c"
        [ -n "$(path_for "$kind" "$pk")" ] && N_RUNS_PER_ROUND=$((N_RUNS_PER_ROUND + 1))
    done
done
TOTAL=$((N_RUNS_PER_ROUND * ROUNDS))
echo "$TOTAL cells ($ROUNDS rounds; ${#CONFIGS[@]} configurations, ${#WORKLOADS[@]} workloads): saturated ones in $SLICES slices of $SLICE, open ones in one run of $DURATION" >&2
N_DONE=0
START=$(date +%s)
for round in $(seq 1 "$ROUNDS"); do
    # Rotate the configuration order each round so none always runs first.
    n=${#CONFIGS[@]} order=()
    for i in $(seq 0 $((n - 1))); do order+=("${CONFIGS[$(( (i + round - 1) % n ))]}"); done
    for wl in "${WORKLOADS[@]}"; do
        IFS='|' read -r _ _ _ _ capped <<<"$wl"
        if [ "$capped" != 0 ]; then
            run_sliced "$round" "$wl" "${order[@]}"
        else
            for c in "${order[@]}"; do run_one "$round" "$c" "$wl"; done
        fi
    done
done
echo "throughput runs took $(( $(date +%s) - START ))s" >&2

# Memory per idle connection and instructions per request: the existing
# scripts for httplite and nginx, scripts/lib/peer-metrics.sh (same method)
# for the Rust peers.
MEM_N=10000; INSTR_ROUNDS=3; INSTR_K2=21000
[ "$QUICK" = 1 ] && { MEM_N=10000; INSTR_ROUNDS=1; INSTR_K2=6000; }
last_row() { grep '^| ' | tail -1; }
if [ "$MEMORY" = 1 ]; then
    echo "server,bytes_per_idle_connection" > "$OUT/memory.csv"
    for rt in "${RUNTIMES[@]}"; do
        case "$rt" in threadpool|fork) continue ;; esac
        echo "idle memory: httplite $rt" >&2
        row=$(N=$MEM_N timeout 300 scripts/idle-memory.sh --runtime "$rt" | last_row) || row=""
        echo "httplite $rt,$(echo "$row" | awk -F'|' '{gsub(/ /,"",$5); print $5}')" >> "$OUT/memory.csv"
    done
    # A thread per idle connection (threadpool-connection) and a process per
    # connection (fork) need scripts/bench-designs.sh's method: PSS summed
    # over the processes, and 1,000 connections (a thread or a process
    # each); the thread pool's event mode is measured beside them.
    if printf '%s\n' "${RUNTIMES[@]}" | grep -qE '^(threadpool|fork)$'; then
        echo "idle memory: httplite threadpool (both modes) and fork (PSS, 1,000 connections)" >&2
        N=1000 timeout 600 scripts/bench-designs.sh memory > "$TMP/designs-memory.md" 2>&1 || true
        for rt in threadpool threadpool-connection fork; do
            v=$(awk -F'|' -v d="$rt" '{ n = $2; gsub(/ /, "", n) } n == d { gsub(/[ ,]/, "", $6); print $6 }' "$TMP/designs-memory.md")
            echo "httplite $rt (PSS over its processes; 1000 connections),$v" >> "$OUT/memory.csv"
        done
    fi
    echo "idle memory: nginx" >&2
    row=$(N=$MEM_N timeout 300 scripts/idle-memory.sh --nginx | last_row) || row=""
    echo "nginx,$(echo "$row" | awk -F'|' '{gsub(/ /,"",$5); print $5}')" >> "$OUT/memory.csv"
    for p in hyper may monoio; do
        echo "idle memory: $p" >&2
        v=$(N=$MEM_N timeout 300 scripts/lib/peer-metrics.sh memory "$p") || v=""
        case $p in hyper) name=tokio-hyper ;; may) name=may_minihttp ;; *) name=$p ;; esac
        echo "$name,$v" >> "$OUT/memory.csv"
    done
fi
# Connect to first byte per design (scripts/bench-designs.sh first-byte):
# where a new connection's cost shows (fork's fork()).
if [ "$MEMORY" = 1 ]; then
    echo "connect to first byte, every design" >&2
    CONNECTS=2000 timeout 600 scripts/bench-designs.sh first-byte > "$OUT/first-byte.md" 2>&1 ||
        echo "first-byte failed" >&2
fi
if [ "$INSTR" = 1 ]; then
    echo "server,one_at_a_time,pipelined16" > "$OUT/instructions.csv"
    for rt in stackless stackful threads uring; do
        echo "instructions: httplite $rt" >&2
        tab=$(ROUNDS=$INSTR_ROUNDS K2=$INSTR_K2 timeout 900 scripts/instructions-per-request.sh --runtime "$rt") || tab=""
        a=$(echo "$tab" | awk -F'|' '/one at a time/ {gsub(/ /,"",$4); print $4}')
        b=$(echo "$tab" | awk -F'|' '/16 pipelined/ {gsub(/ /,"",$4); print $4}')
        echo "httplite $rt,$a,$b" >> "$OUT/instructions.csv"
    done
    for p in nginx hyper may monoio; do
        echo "instructions: $p" >&2
        v=$(ROUNDS=$INSTR_ROUNDS K2=$INSTR_K2 timeout 900 scripts/lib/peer-metrics.sh instructions "$p") || v=","
        case $p in hyper) name=tokio-hyper ;; may) name=may_minihttp ;; *) name=$p ;; esac
        echo "$name,$v" >> "$OUT/instructions.csv"
    done
fi

# System calls per request at keep-alive c256 (strace -c -f; the completion
# model's point is fewer of them): epoll stackless beside uring.
if [ "$INSTR" = 1 ]; then
    echo "system calls per request: stackless, uring" >&2
    HTTPLITE_BIN="$HTTPLITE" timeout 900 scripts/syscalls-per-request.sh --runtime stackless \
        --runtime uring > "$OUT/syscalls.md" 2>&1 || echo "syscalls-per-request failed" >&2
fi

# Micro costs, for the report's explanation of the designs' gap: criterion
# (switch, spawn, wake, timers; ours and the peers in the same run), pinned to
# one core, and the memory per suspended coroutine / pending task.
if [ "$MICRO" = 1 ]; then
    CRIT=()
    [ "$QUICK" = 1 ] && CRIT=(--warm-up-time 1 --measurement-time 2)
    echo "micro: coroutine switch and spawn" >&2
    taskset -c 0 cargo bench -q -p httplite-benches --bench coroutine -- "switch/|create/" "${CRIT[@]}" \
        > "$OUT/micro-criterion.log" 2>&1 || echo "micro: coroutine bench failed" >&2
    # Both cores: wake_remote needs a second thread (on one core it measures
    # the two threads taking turns, not a wake).
    echo "micro: runtime (ours vs tokio)" >&2
    taskset -c 0,1 cargo bench -q -p httplite-benches --bench runtime -- "${CRIT[@]}" \
        >> "$OUT/micro-criterion.log" 2>&1 || echo "micro: runtime bench failed" >&2
    echo "micro: memory per suspended coroutine / pending task" >&2
    cargo bench -q -p httplite-benches --bench coroutine_rss > "$OUT/micro-rss.txt" 2>&1 \
        || echo "micro: coroutine_rss failed" >&2
fi

python3 scripts/lib/bench_report.py "$OUT" "$DURATION" "$ROUNDS" "$QUICK" "$CAP" "$SLICES" "$SLICE"
echo "wrote $OUT/report.md" >&2
