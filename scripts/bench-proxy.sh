#!/usr/bin/env bash
# The reverse proxy against nginx, HAProxy, H2O and lighttpd: proxied
# keep-alive requests, server CPU per request, as ratios with their 95 %
# confidence intervals; and a 1 GiB answer to a slow client, the proxy's
# memory meanwhile.
#
# Layout (2 cores): every proxy runs on CPU 0 in a cgroup of its own
# (scripts/lib/cpu-cap.sh) capped at --cap % of that core, so that it is
# the bottleneck and its CPU per request is a request's cost at full load;
# the upstream (nginx, one worker, `return 200 "Hello, World!"`) and wrk
# (-t1, --conns connections, default 256) share CPU 1. Each proxy keeps
# idle upstream connections: nginx `keepalive 32` with
# `proxy_http_version 1.1`, HAProxy 2.6 `http-reuse always`, H2O
# `proxy.reverse.url` (it pools by default), lighttpd `mod_proxy` (which
# opens a connection to the upstream per request: it has no pool), httplite
# its default `--proxy-keepalive` (256 idle connections per upstream). One
# worker each.
#
# Method: after a warm-up of every proxy, --slices rounds of one --slice
# (default 1 s) of load on each proxy in turn (A, B, C, ..., then again);
# a slice's figure is the cgroup's CPU time over the requests wrk
# completed. Ratios are formed slice by slice against the best peer's
# neighbouring slice and bootstrapped (scripts/lib/ratio_ci.py); the host's
# slow spells then land on both sides of a ratio.
#
# httplite runs on all six designs.
#
# --c10k runs the slow-upstream table instead: the upstream is httplite
# (stackless, one worker, on CPU 1) answering /_httplite/sleep?ms=1000,
# wrk holds --conns connections (default 9,000) for --c10k-secs (10) on
# each proxy, uncapped on CPU 0: requests/s (the ideal is --conns per
# second), p99 latency, and memory per in-flight request (PSS summed over
# the proxy's processes under load, minus its idle PSS, over --conns).
# Each in-flight request holds two fds in the proxy: 9,000 is the most
# that fits a hard limit of 20,000 open files, which a container may not
# let even root raise.
#
# Usage: scripts/bench-proxy.sh [--slices N] [--slice S] [--cap PCT]
#                               [--conns N] [--quick] [--no-memory]
#                               [--memory-only] [--c10k] [--c10k-secs S]
#                               [--only LIST]
#   --quick        5 slices, no memory run
#   --memory-only  only the 1 GiB run
#   --only A,B     only these proxies (httplite-stackless, nginx, ...)
# Output: target/bench-proxy/slices.csv, report.txt (also printed);
# c10k.txt for --c10k.
set -euo pipefail
cd "$(dirname "$0")/.."
SLICES=15 SLICE=1 CAP=50 CONNS="" MEMORY=1 MODE=cpu C10K_SECS=10 ONLY=
while [ $# -gt 0 ]; do
    case "$1" in
        --slices) SLICES=$2; shift 2 ;;
        --slice) SLICE=$2; shift 2 ;;
        --cap) CAP=$2; shift 2 ;;
        --conns) CONNS=$2; shift 2 ;;
        --quick) SLICES=5; MEMORY=0; shift ;;
        --no-memory) MEMORY=0; shift ;;
        --memory-only) MODE=memory; shift ;;
        --c10k) MODE=c10k; CAP=100; MEMORY=0; shift ;;
        --c10k-secs) C10K_SECS=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ "$SLICES" =~ ^[0-9]+$ ]] && [ "$SLICES" -ge 2 ] && [ "$SLICES" -le 100 ] ||
    { echo "--slices must be 2..100" >&2; exit 2; }
[[ "$SLICE" =~ ^[0-9]+$ ]] && [ "$SLICE" -ge 1 ] && [ "$SLICE" -le 30 ] ||
    { echo "--slice: whole seconds, 1..30" >&2; exit 2; }
[[ "$CAP" =~ ^[0-9]+$ ]] && [ "$CAP" -ge 10 ] && [ "$CAP" -le 100 ] ||
    { echo "--cap: 10..100" >&2; exit 2; }
if [ -z "$CONNS" ]; then
    CONNS=256; [ "$MODE" = c10k ] && CONNS=9000
fi
[[ "$CONNS" =~ ^[0-9]+$ ]] && [ "$CONNS" -ge 1 ] && [ "$CONNS" -le 9500 ] ||
    { echo "--conns: 1..9500" >&2; exit 2; }
[[ "$C10K_SECS" =~ ^[0-9]+$ ]] && [ "$C10K_SECS" -ge 4 ] && [ "$C10K_SECS" -le 60 ] ||
    { echo "--c10k-secs: 4..60" >&2; exit 2; }

export PATH="$PATH:/usr/sbin:/sbin"
log() { echo "bench-proxy: $*" >&2; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
need() { # command package
    command -v "$1" >/dev/null && return 0
    log "installing $2"
    $SUDO apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$2" >/dev/null 2>&1 || true
    command -v "$1" >/dev/null || { echo "cannot install $2 (for $1)" >&2; exit 1; }
}
need wrk wrk
need curl curl
need python3 python3
need nginx nginx-light
need haproxy haproxy
need h2o h2o
need lighttpd lighttpd
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

source scripts/lib/proc-cpu.sh
source scripts/lib/servers.sh
source scripts/lib/cpu-cap.sh
TMP=$(mktemp -d)
OUT=target/bench-proxy
mkdir -p "$OUT"
cleanup() { stop_running; cap_remove_all; rm -rf "$TMP"; }
trap cleanup EXIT

log "building httplite (release)"
cargo build --release -q -p httplite
BIN=$PWD/target/release/httplite

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # PORT: until it answers (10 s)
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
        sleep 0.1
    done
    return 1
}

# The upstream, on CPU 1: nginx, one worker (`return 200`); for --c10k,
# httplite's sleep endpoint, with room for every request in flight.
UP=$(port)
mkdir -p "$TMP/upstream"
if [ "$MODE" = c10k ]; then
    taskset -c 1 "$BIN" --runtime stackless --workers 1 --bind "127.0.0.1:$UP" --quiet \
        --pool-queue 20000 --idle-timeout 600s > "$TMP/upstream/log" 2>&1 &
    CHECK=/_httplite/plaintext
else
    scripts/lib/nginx-conf.sh "$TMP/upstream" "$UP" > "$TMP/upstream/nginx.conf"
    taskset -c 1 nginx -p "$TMP/upstream" -c "$TMP/upstream/nginx.conf" > "$TMP/upstream/log" 2>&1 &
    CHECK=/
fi
RUNNING+=($!)
wait_port "$UP" || { echo "the upstream did not start: $(cat "$TMP/upstream/log")" >&2; exit 1; }

declare -A PORT CMD
PROXIES=()
add() { PROXIES+=("$1"); PORT[$1]=$(port); }
for rt in stackless uring stackful threads threadpool fork; do add "httplite-$rt"; done
add nginx; add haproxy; add h2o; add lighttpd

for rt in stackless uring stackful threads threadpool fork; do
    # One worker, as every peer (fork has none: it refuses the flag).
    workers="--workers 1"; [ "$rt" = fork ] && workers=""
    CMD[httplite-$rt]="$BIN --runtime $rt $workers --bind 127.0.0.1:${PORT[httplite-$rt]} --quiet \
        --proxy /=http://127.0.0.1:$UP"
done
mkdir -p "$TMP/nginx"
cat > "$TMP/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 20000; }
worker_rlimit_nofile 20000;
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    upstream app { server 127.0.0.1:$UP; keepalive 32; }
    server {
        listen 127.0.0.1:${PORT[nginx]};
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
CONF
CMD[nginx]="nginx -p $TMP/nginx -c $TMP/nginx/nginx.conf"
mkdir -p "$TMP/haproxy"
cat > "$TMP/haproxy/haproxy.cfg" <<CONF
global
    nbthread 1
    # Two fds a connection: within the 20,000 fds a process may open here.
    maxconn 9000
defaults
    mode http
    timeout connect 5s
    timeout client 600s
    timeout server 600s
    http-reuse always
frontend f
    bind 127.0.0.1:${PORT[haproxy]}
    default_backend b
backend b
    server app 127.0.0.1:$UP
CONF
CMD[haproxy]="haproxy -db -f $TMP/haproxy/haproxy.cfg"
mkdir -p "$TMP/h2o"
cat > "$TMP/h2o/h2o.conf" <<CONF
num-threads: 1
max-connections: 10000
error-log: $TMP/h2o/error.log
hosts:
  default:
    listen:
      host: 127.0.0.1
      port: ${PORT[h2o]}
    paths:
      /:
        proxy.reverse.url: http://127.0.0.1:$UP/
CONF
CMD[h2o]="h2o -c $TMP/h2o/h2o.conf"
mkdir -p "$TMP/lighttpd"
cat > "$TMP/lighttpd/lighttpd.conf" <<CONF
server.modules = ( "mod_proxy" )
server.document-root = "$TMP/lighttpd"
server.port = ${PORT[lighttpd]}
server.bind = "127.0.0.1"
server.pid-file = "$TMP/lighttpd/lighttpd.pid"
server.errorlog = "$TMP/lighttpd/error.log"
server.max-fds = 20000
server.max-connections = 10000
server.max-keep-alive-requests = 100000000
server.max-keep-alive-idle = 600
proxy.server = ( "" => ( ( "host" => "127.0.0.1", "port" => $UP ) ) )
CONF
CMD[lighttpd]="lighttpd -D -f $TMP/lighttpd/lighttpd.conf"

[ "$MODE" = memory ] && PROXIES=()
if [ -n "$ONLY" ]; then
    kept=()
    for p in "${PROXIES[@]}"; do [[ ",$ONLY," == *",$p,"* ]] && kept+=("$p"); done
    PROXIES=("${kept[@]}")
fi
log "starting ${#PROXIES[@]} proxies on CPU 0, each capped at $CAP %"
STARTED=()
declare -A PID
for p in "${PROXIES[@]}"; do
    cap_create "bp-$p"
    cap_set "bp-$p" "$CAP"
    # shellcheck disable=SC2086
    cap_spawn "bp-$p" taskset -c 0 ${CMD[$p]} > "$TMP/$p.log" 2>&1
    RUNNING+=($!)
    PID[$p]=$!
    if wait_port "${PORT[$p]}" && [ "$(curl -s "http://127.0.0.1:${PORT[$p]}$CHECK")" = "Hello, World!" ]; then
        STARTED+=("$p")
    else
        log "$p: n/a (did not answer through the proxy: $(tail -c 300 "$TMP/$p.log"))"
    fi
done

# One slice of load on proxy $1; prints "requests cpu_ns throttled_periods".
slice() {
    local p=$1 before after t0 t1 out req
    before=$(cap_usage_ns "bp-$p"); t0=$(cap_throttled "bp-$p")
    out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${SLICE}s" "http://127.0.0.1:${PORT[$p]}/" 2>&1)
    after=$(cap_usage_ns "bp-$p"); t1=$(cap_throttled "bp-$p")
    req=$(echo "$out" | awk '/requests in/ { print $1 }')
    echo "${req:-0} $((after - before)) $((t1 - t0))"
}

# PSS of a process and all its descendants, in kB (one Python pass: a
# fork proxy has thousands of children, too many for a process each).
pss_kb() {
    python3 - "$1" <<'PY'
import glob, sys
todo, total = [sys.argv[1]], 0
while todo:
    pid = todo.pop()
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                total += int(line.split()[1])
        for f in glob.glob(f"/proc/{pid}/task/*/children"):
            todo.extend(open(f).read().split())
    except OSError:
        pass
print(total)
PY
}

if [ "$MODE" = c10k ]; then
    {
        echo "# Slow upstream (httplite stackless, /_httplite/sleep?ms=1000), $CONNS client connections,"
        echo "# wrk -t1 on CPU 1 for ${C10K_SECS}s per proxy, the proxy uncapped on CPU 0 (ideal: $CONNS requests/s)"
        echo "# $(date -u +%Y-%m-%d) $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
        printf "%-22s %12s %10s %10s %14s %12s\n" proxy requests/s p50 p99 "B/in-flight" errors
    } | tee "$OUT/c10k.txt"
    for p in "${STARTED[@]}"; do
        idle=$(pss_kb "${PID[$p]}")
        taskset -c 1 wrk -t1 -c"$CONNS" -d"${C10K_SECS}s" --timeout 10s --latency \
            "http://127.0.0.1:${PORT[$p]}/_httplite/sleep?ms=1000" > "$TMP/c10k-$p.txt" 2>&1 &
        w=$!
        # Every connection has a request in flight once the first second
        # of answers has come back.
        sleep $((C10K_SECS / 2))
        loaded=$(pss_kb "${PID[$p]}")
        wait "$w" || true
        rps=$(awk '/^Requests\/sec/ {print $2}' "$TMP/c10k-$p.txt")
        p50=$(awk '$1 == "50%" {print $2}' "$TMP/c10k-$p.txt")
        p99=$(awk '$1 == "99%" {print $2}' "$TMP/c10k-$p.txt")
        errors=$(awk '/Socket errors|Non-2xx/ {printf "%s ", $0}' "$TMP/c10k-$p.txt")
        per=$(( (loaded - idle) * 1024 / CONNS ))
        printf "%-22s %12s %10s %10s %14s %12s\n" "$p" "${rps:-0}" "${p50:--}" "${p99:--}" "$per" "${errors:-none}" |
            tee -a "$OUT/c10k.txt"
        # The next proxy starts from quiet sockets.
        sleep 2
    done
    exit 0
fi

if [ "$MODE" != memory ]; then
log "warm-up"
for p in "${STARTED[@]}"; do slice "$p" > /dev/null; done
echo "slice,server,cpu_us_per_request" > "$OUT/slices.csv"
echo "slice,server,requests,cpu_ns,throttled" > "$OUT/raw.csv"
for k in $(seq 1 "$SLICES"); do
    for p in "${STARTED[@]}"; do
        read -r req ns thr < <(slice "$p")
        echo "$k,$p,$req,$ns,$thr" >> "$OUT/raw.csv"
        [ "$req" -gt 0 ] && python3 -c "print(f'$k,$p,{$ns / 1000 / $req:.4f}')" >> "$OUT/slices.csv"
    done
    log "slice $k/$SLICES done"
done

{
    echo "# Proxied keep-alive GET, $CONNS connections, proxy capped at $CAP % of CPU 0"
    echo "# $(date -u +%Y-%m-%d) $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo "# $SLICES slices of ${SLICE}s per proxy; median server CPU µs/request and requests/s"
    python3 - "$OUT/raw.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    req, ns = int(r["requests"]), int(r["cpu_ns"])
    if req > 0:
        by.setdefault(r["server"], []).append((ns / 1000 / req, req, int(r["throttled"])))
for s, v in by.items():
    cpu = statistics.median(x[0] for x in v)
    rps = statistics.median(x[1] for x in v)
    print(f"{s:22} {cpu:8.2f} µs/request {rps:10.0f} requests/slice  throttled periods/slice {statistics.median(x[2] for x in v):.0f}")
PY
    best=$(python3 - "$OUT/raw.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    if int(r["requests"]) > 0 and not r["server"].startswith("httplite"):
        by.setdefault(r["server"], []).append(int(r["cpu_ns"]) / int(r["requests"]))
print(min(by, key=lambda s: statistics.median(by[s])) if by else "")
PY
)
    if [ -n "$best" ]; then
        echo "# ratios to the best peer ($best), median per-slice ratio [95 % CI]:"
        for p in "${STARTED[@]}"; do
            case "$p" in httplite-*) python3 scripts/lib/ratio_ci.py "$p" "$best" < "$OUT/slices.csv" ;; esac
        done
    fi
} | tee "$OUT/report.txt"
fi

[ "$MEMORY" = 1 ] || exit 0
# A 1 GiB answer read at 10 MB/s: the proxy's RSS over the transfer. The
# upstream is a second nginx serving a 1 GiB sparse file.
log "memory: a 1 GiB answer to a client reading at 10 MB/s (about 110 s per proxy)"
mkdir -p "$TMP/files" "$TMP/files-nginx"
truncate -s 1G "$TMP/files/big.bin"
FP=$(port)
scripts/lib/nginx-conf.sh "$TMP/files-nginx" "$FP" "$TMP/files" "sendfile on;" > "$TMP/files-nginx/nginx.conf"
taskset -c 1 nginx -p "$TMP/files-nginx" -c "$TMP/files-nginx/nginx.conf" > "$TMP/files-nginx/log" 2>&1 &
RUNNING+=($!)
wait_port "$FP" || true
rss_kb() { local t=0 p; for p in $(proc_tree "$1"); do t=$((t + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0))); done; echo "$t"; }
for rt in stackless uring threads stackful; do
    P=$(port)
    "$BIN" --runtime "$rt" --bind "127.0.0.1:$P" --quiet --proxy "/=http://127.0.0.1:$FP" > "$TMP/mem-$rt.log" 2>&1 &
    pid=$!; RUNNING+=($pid)
    wait_port "$P" || true
    before=$(rss_kb "$pid"); peak=$before
    curl -s --limit-rate 10M -o /dev/null -w '%{size_download}' "http://127.0.0.1:$P/big.bin" \
        > "$TMP/got-$rt" & c=$!
    while kill -0 "$c" 2>/dev/null; do
        now=$(rss_kb "$pid"); [ "$now" -gt "$peak" ] && peak=$now
        sleep 1
    done
    echo "httplite-$rt: 1 GiB at 10 MB/s: $(cat "$TMP/got-$rt") bytes received; RSS $before kB before, $peak kB at most (+$((peak - before)) kB)" |
        tee -a "$OUT/report.txt"
done
